// JournalPublisher against a real nats-server -js on loopback (started here, with its own store
// folder): the journal position a cut covers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/nats/journal.h"
#include "record_test_util.h"
#include "test_util.h"

extern char** environ;

namespace kvindex {
namespace {

using test::B;
using test::Bytes;

// A TCP port on 127.0.0.1 that nothing held a moment ago (0: none found).
uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool Accepts(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// nats-server -js on a free loopback port with a store folder of its own (and `config`, the text
// of a configuration file, when given); killed and reaped at the end. Start() fails the calling
// test when the server does not listen within 20 s.
class NatsServer {
 public:
  enum class When { kNow, kLater };
  explicit NatsServer(When when = When::kNow, std::string config = "")
      : store_("nats"), config_(std::move(config)) {
    port_ = FreePort();
    REQUIRE(port_ != 0);
    if (when == When::kNow) Start();
  }
  ~NatsServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  void Start() {
    const std::string server =
        access("/usr/sbin/nats-server", X_OK) == 0 ? "/usr/sbin/nats-server" : "nats-server";
    std::vector<std::string> args = {server,  "-js", "-sd", store_.path.string(), "-a",
                                     "127.0.0.1", "-p", std::to_string(port_)};
    if (!config_.empty()) {
      const std::string path = (store_.path / "nats.conf").string();
      std::ofstream(path) << config_;
      args.insert(args.end(), {"-c", path});
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = (store_.path / "nats.log").string();
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int spawned = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE_MESSAGE(spawned == 0, "cannot start nats-server (scripts/setup.sh installs it)");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!Accepts(port_)) {
      int status = 0;
      REQUIRE_MESSAGE(waitpid(pid_, &status, WNOHANG) == 0,
                      "nats-server exited: " << test::ReadFile(log));
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  test::BuildTempDir store_;
  std::string config_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// The definition record of capture source 9 (the source of test::LiveRecord()).
Bytes Definition() {
  Bytes out;
  REQUIRE(EncodeCaptureText(out, CaptureRecordType::kSourceDefinition, SourceId{9}, 1,
                            R"({"name":"fake-0"})")
              .ok());
  return out;
}

// Waits (up to 10 s) until no record handed over is pending (acknowledged or lost); returns the
// status then.
JournalPublisherStatus Drained(const JournalPublisher& publisher) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  JournalPublisherStatus status = publisher.status();
  while (status.records_pending != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    status = publisher.status();
  }
  REQUIRE_MESSAGE(status.records_pending == 0, status.records_pending << " records pending: "
                                                                      << status.last_error);
  return status;
}

std::unique_ptr<JournalPublisher> StartPublisher(const JournalOptions& options) {
  Result<std::unique_ptr<JournalPublisher>> started = JournalPublisher::Start(options);
  REQUIRE(started.ok());
  return std::move(*started);
}

// The records of the stream, in order: "definition", "message <seq>" or the note's text.
std::vector<std::string> StreamRecords(const JournalOptions& options) {
  Result<std::unique_ptr<JournalReader>> reader =
      JournalReader::Open(options, 1, std::chrono::seconds(5));
  REQUIRE(reader.ok());
  std::vector<std::string> out;
  JournalEntry entry;
  while ((*reader)->Next(entry, std::chrono::milliseconds(500))) {
    REQUIRE(entry.problem.ok());
    switch (entry.record.type) {
      case CaptureRecordType::kSourceDefinition:
        out.emplace_back("definition");
        break;
      case CaptureRecordType::kMessage: {
        uint64_t seq = 0;
        for (const std::byte b : entry.record.frames[1]) seq = seq << 8 | static_cast<uint8_t>(b);
        out.push_back("message " + std::to_string(seq));
        break;
      }
      default:
        out.emplace_back(entry.record.text());
    }
  }
  return out;
}

using Records = std::vector<std::string>;

TEST_CASE("a cut covers the records before it, also when later ones are acknowledged first") {
  NatsServer server;
  for (const size_t batch : {size_t{1}, size_t{8}}) {
    CAPTURE(batch);
    JournalOptions options;
    options.servers = {server.url()};
    options.stream = "cut" + std::to_string(batch);
    options.batch_records = batch;
    std::unique_ptr<JournalPublisher> publisher = StartPublisher(options);
    publisher->Put(Definition());
    for (uint64_t seq = 1; seq <= 3; ++seq) publisher->Put(test::LiveRecord(seq, B("before")));
    publisher->EndOfCycle();
    // One message per record, or the definition and the three batches in one (a source's
    // records group; the definition's journal key is the source's).
    const JournalPublisherStatus drained = Drained(*publisher);
    CHECK(drained.records_acked == 4);
    const uint64_t covered_by_cut = drained.last_acked_seq;
    CHECK(covered_by_cut == (batch == 1 ? 4 : 1));

    const JournalCut cut = publisher->Cut();
    CHECK(cut.ordinal == 4);
    // Records after the cut, acknowledged and gone before anyone waits for the cut.
    for (uint64_t seq = 4; seq <= 6; ++seq) publisher->Put(test::LiveRecord(seq, B("after")));
    publisher->EndOfCycle();
    CHECK(Drained(*publisher).last_acked_seq > covered_by_cut);
    const Result<uint64_t> covered = publisher->WaitCovered(cut, std::chrono::seconds(2));
    REQUIRE(covered.ok());
    CHECK(*covered == covered_by_cut);

    // Only the latest cut can be waited for.
    const JournalCut later = publisher->Cut();
    CHECK(later.ordinal == 7);
    CHECK(publisher->WaitCovered(cut, std::chrono::seconds(2)).status().code() ==
          StatusCode::kUnavailable);
    const Result<uint64_t> covered_later = publisher->WaitCovered(later, std::chrono::seconds(2));
    REQUIRE(covered_later.ok());
    CHECK(*covered_later == publisher->status().last_acked_seq);
    publisher->Close(std::chrono::seconds(2));
  }
}

TEST_CASE("a record dropped before a cut has its journal-lost note before the cut") {
  NatsServer server;
  JournalOptions options;
  options.servers = {server.url()};
  options.stream = "dropped";
  options.buffer_bytes = 1000;
  std::unique_ptr<JournalPublisher> publisher = StartPublisher(options);
  publisher->Put(Definition());
  publisher->Put(test::LiveRecord(1, Bytes(3000)));  // more than the buffer holds: dropped
  const JournalCut cut = publisher->Cut();
  CHECK(cut.ordinal == 2);  // the definition and the note
  const JournalPublisherStatus drained = Drained(*publisher);
  CHECK(drained.lost_records == 1);
  const Result<uint64_t> covered = publisher->WaitCovered(cut, std::chrono::seconds(2));
  REQUIRE(covered.ok());
  CHECK(*covered == 2);
  publisher->Put(test::LiveRecord(2, B("after")));
  Drained(*publisher);
  publisher->Close(std::chrono::seconds(2));
  CHECK(StreamRecords(options) == Records{"definition", "journal-lost", "message 2"});
}

TEST_CASE("a record lost when sent gets a journal-lost note; a cut before it covers nothing") {
  // The publisher keeps records while the server is not up yet, so it learns the server's 2 KiB
  // limit only when it sends a 3,000-byte record.
  NatsServer server(NatsServer::When::kLater, "max_payload: 2048\n");
  JournalOptions options;
  options.servers = {server.url()};
  options.stream = "too_large";
  std::unique_ptr<JournalPublisher> publisher = StartPublisher(options);
  publisher->Put(Definition());
  publisher->Put(test::LiveRecord(1, Bytes(3000)));
  const JournalCut cut = publisher->Cut();
  server.Start();
  const JournalPublisherStatus drained = Drained(*publisher);
  CHECK(drained.lost_records == 1);
  CHECK(drained.records_acked == 1);
  CHECK(publisher->WaitCovered(cut, std::chrono::seconds(2)).status().code() ==
        StatusCode::kUnavailable);
  publisher->Put(test::LiveRecord(2, B("after")));
  Drained(*publisher);
  publisher->Close(std::chrono::seconds(2));
  CHECK(StreamRecords(options) == Records{"definition", "journal-lost", "message 2"});
}

}  // namespace
}  // namespace kvindex
