// The live path on loopback with real sockets: an independent publisher written in Python
// (tests/data/py_publisher.py: python3-zmq + python3-msgpack) drives the C++ Subscriber. Expected
// answers are hand-computed from each plan. Every wait is bounded (20 s); no timing is asserted.
#include "kvindex/zmq/subscriber.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/files/capture.h"
#include "kvindex/ingest/capture_replay.h"
#include "test_util.h"

extern char** environ;

namespace kvindex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A vLLM array-era batch storing one block, as python3-msgpack encodes it (see py_publisher.py).
bool CodecWorks() {
  const std::string hex = "93cb00000000000000009198ab426c6f636b53746f7265649101c0940102030404c0a3475055c000";
  std::vector<std::byte> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return DecodeEventBatch(bytes, FormatHint::kVllm).ok();
}

// The subscriber cases need a working decoder: one that cannot decode this batch fails them.
#define REQUIRE_CODEC() \
  REQUIRE_MESSAGE(CodecWorks(), "the event codec does not decode a vLLM array-era batch")

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kvindex-sub-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One block per batch: seq i stores hash 1000 + i (parent 1000 + i - 1), tokens 4i .. 4i + 3.
json Batch(uint64_t seq, uint64_t epoch = 0) {
  json parent = seq == 0 ? json(nullptr) : json(1000 + epoch * 100000 + seq - 1);
  json tokens = json::array();
  for (uint64_t t = 0; t < 4; ++t) tokens.push_back(epoch * 100000 + 4 * seq + t);
  return {{"seq", seq}, {"blocks", json::array({json::array({1000 + epoch * 100000 + seq, parent, tokens})})}};
}

std::vector<TokenId> Tokens(uint64_t n_blocks, uint64_t epoch = 0) {
  std::vector<TokenId> out;
  for (uint64_t t = 0; t < 4 * n_blocks; ++t) out.push_back(static_cast<TokenId>(epoch * 100000 + t));
  return out;
}

class PyPublisher {
 public:
  PyPublisher(const TempDir& dir, const std::string& name, const json& steps,
              std::vector<std::string> extra) {
    const fs::path plan = dir.path / (name + ".plan.json");
    std::ofstream(plan) << json{{"steps", steps}}.dump();
    ready_ = dir.path / (name + ".ready");
    log_ = dir.path / (name + ".log");
    std::vector<std::string> args = {KVINDEX_PYTHON,
                                     (test::TestDataDir() / "py_publisher.py").string(),
                                     "--plan", plan.string(), "--ready", ready_.string(),
                                     "--log", log_.string()};
    bool has_pub = false;
    for (const auto& e : extra) has_pub = has_pub || e == "--pub";
    if (!has_pub) {
      args.push_back("--pub");
      args.push_back("tcp://127.0.0.1:*");
    }
    for (auto& e : extra) args.push_back(std::move(e));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(ready_)) {
      int status = 0;
      REQUIRE_MESSAGE(waitpid(pid_, &status, WNOHANG) == 0, "py_publisher exited early");
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    info_ = json::parse(test::ReadFile(ready_));
  }
  ~PyPublisher() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  std::string pub() const { return info_.at("pub"); }
  std::string replay() const { return info_.value("replay", ""); }
  // The live messages sent, as hex frames.
  std::vector<std::vector<std::string>> Sent() const {
    std::vector<std::vector<std::string>> out;
    std::ifstream in(log_);
    std::string line;
    while (std::getline(in, line)) out.push_back(json::parse(line).get<std::vector<std::string>>());
    return out;
  }

 private:
  pid_t pid_ = -1;
  fs::path ready_, log_;
  json info_;
};

// Two consecutive TCP ports on 127.0.0.1 that nothing holds now (checked by binding both; a
// port + 1 taken by another test's connection is skipped). 0 when none was found.
uint16_t TwoFreePorts() {
  const auto bind_to = [](uint16_t port, uint16_t* bound) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      close(fd);
      return -1;
    }
    if (bound != nullptr) *bound = ntohs(addr.sin_port);
    return fd;
  };
  for (int attempt = 0; attempt < 50; ++attempt) {
    uint16_t port = 0;
    const int first = bind_to(0, &port);
    if (first < 0) continue;
    const int second = port < 65535 ? bind_to(static_cast<uint16_t>(port + 1), nullptr) : -1;
    close(first);
    if (second >= 0) {
      close(second);
      return port;
    }
  }
  return 0;
}

SourceConfig Source(const std::string& spec) {
  auto configs = ParseSourceSpec(spec);
  REQUIRE_MESSAGE(configs.ok(), configs.status().message());
  REQUIRE(configs->size() == 1);
  return configs->front();
}

// Runs `sub` on a thread until `done(status)` holds (bounded by 20 s), then stops it.
bool RunUntil(Subscriber& sub, const std::function<bool(const SubscriberStatus&)>& done) {
  Status result;
  std::thread io([&] { result = sub.Run(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool met = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done(sub.status())) {
      met = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sub.Stop();
  io.join();
  CHECK_MESSAGE(result.ok(), result.message());
  return met;
}

std::string Hex(std::span<const std::byte> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    out += digits[static_cast<unsigned>(b) >> 4];
    out += digits[static_cast<unsigned>(b) & 15];
  }
  return out;
}

std::vector<CaptureRecord> ReadAll(const std::vector<std::string>& paths) {
  auto reader = CaptureReader::Open(paths);
  REQUIRE(reader.ok());
  std::vector<CaptureRecord> out;
  CaptureRecord record;
  while ((*reader)->Next(record)) out.push_back(record);
  CHECK((*reader)->problems().empty());
  return out;
}

// Applies the capture at `path` to `index` offline (as `kvindex replay` does); returns the first
// source's counters.
SourceCounters ReplayCapture(const std::string& path, PrefixIndex& index) {
  Ingestor ingestor(&index);
  CaptureReplayer replayer(ingestor);
  auto reader = CaptureReader::Open({path});
  REQUIRE(reader.ok());
  REQUIRE(replayer.ApplyAll(**reader).ok());
  return ingestor.counters(SourceId{0});
}

uint64_t Matched(const PrefixIndex& index, const std::string& instance,
                 const std::vector<TokenId>& tokens) {
  MatchQuery query;
  query.model = "m";
  auto match = index.MatchTokens(query, tokens);
  REQUIRE(match.ok());
  const InstanceMatch* found = match->Find(instance);
  return found == nullptr ? 0 : found->longest_matched;
}

json Steps(uint64_t from, uint64_t to, std::function<void(uint64_t, json&)> edit = {}) {
  json steps = json::array();
  for (uint64_t s = from; s < to; ++s) {
    json b = Batch(s);
    if (edit) edit(s, b);
    steps.push_back(b);
  }
  return steps;
}

json Concat(std::initializer_list<json> parts) {
  json out = json::array();
  for (const auto& p : parts) {
    for (const auto& s : p) out.push_back(s);
  }
  return out;
}

const json kWaitSub = json::array({json{{"wait_sub", true}}});

TEST_SUITE("subscriber") {

TEST_CASE("record: the capture holds every live message byte-exactly as the publisher sent it") {
  TempDir dir;
  PyPublisher pub(dir, "p", Concat({kWaitSub, Steps(0, 20)}), {});
  const std::string path = (dir.path / "cap.kvcap").string();
  auto writer = CaptureWriter::Create(path);
  REQUIRE(writer.ok());
  auto sub = Subscriber::Create(nullptr, writer->get());
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) { return s.messages >= 20; }));
  REQUIRE((*writer)->Close().ok());
  std::vector<std::vector<std::string>> got;
  for (const auto& r : ReadAll({path})) {
    if (r.type != CaptureRecordType::kMessage) continue;
    std::vector<std::string> frames;
    for (const auto& f : r.frames) frames.push_back(Hex(f));
    got.push_back(frames);
  }
  CHECK(got == pub.Sent());
  CHECK(got.size() == 20);
}

TEST_CASE("A gap is recovered by replay in each reply layout") {
  REQUIRE_CODEC();
  for (const std::string style : {"vllm", "vllm-topic", "mooncake"}) {
    CAPTURE(style);
    TempDir dir;
    auto steps = Concat({kWaitSub, Steps(0, 10, [](uint64_t s, json& b) {
                           if (s == 3 || s == 4) b["skip"] = true;
                         })});
    PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*", "--style", style});
    PrefixIndex index;
    SubscriberOptions options;
    options.backfill = false;
    auto sub = Subscriber::Create(&index, nullptr, options);
    REQUIRE(sub.ok());
    REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
    CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
      return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 10;
    }));
    const auto c = (*sub)->status().sources.at(0);
    CHECK(c.ingest.sequence.gaps == 1);
    CHECK(c.ingest.sequence.recovered == 2);
    CHECK(c.ingest.sequence.lost == 0);
    CHECK(c.ingest.sequence.replay_requests == 1);
    CHECK(c.replay_timeouts == 0);
    CHECK(Matched(index, "a", Tokens(10)) == 40);
  }
}

TEST_CASE("A ring that lost the batches: they are counted lost, held live batches applied") {
  REQUIRE_CODEC();
  TempDir dir;
  // 2, 3, 4 dropped; 5 reveals the gap; the ring keeps 2 batches (4, 5) when the request comes.
  json steps = Concat({kWaitSub, Steps(0, 6, [](uint64_t s, json& b) {
                         if (s >= 2 && s <= 4) b["skip"] = true;
                       }),
                       json::array({json{{"wait_served", 1}}}), Steps(6, 10)});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*", "--ring", "2"});
  const std::string path = (dir.path / "cap.kvcap").string();
  auto writer = CaptureWriter::Create(path);
  REQUIRE(writer.ok());
  PrefixIndex index;
  SubscriberOptions options;
  options.backfill = false;
  auto sub = Subscriber::Create(&index, writer->get(), options);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  const bool done = RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].messages == 7 &&
           s.sources[0].ingest.sequence.applied == 8;
  });
  {
    const auto st = (*sub)->status().sources.at(0);
    const auto& q = st.ingest.sequence;
    INFO("messages " << st.messages << " applied " << q.applied << " lost " << q.lost
                     << " recovered " << q.recovered << " requests " << q.replay_requests
                     << " orphan replays " << q.orphan_replays << " reapplied " << q.reapplied
                     << " timeouts " << st.replay_timeouts << " waiting " << st.waiting);
    CHECK(done);
  }
  REQUIRE((*writer)->Close().ok());
  const auto c = (*sub)->status().sources.at(0);
  CHECK(c.ingest.sequence.lost == 2);
  CHECK(c.ingest.sequence.recovered == 1);  // 4 from the ring; 5 was held live and applied
  uint64_t lost_records = 0;
  for (const auto& r : ReadAll({path})) {
    if (r.type == CaptureRecordType::kLost) {
      CHECK(r.first() == 2);
      CHECK(r.second() == 2);
      ++lost_records;
    }
  }
  CHECK(lost_records == 1);
  CHECK(Matched(index, "a", Tokens(10)) == 8);  // blocks 0, 1; block 2 was lost
}

TEST_CASE("A silent replay endpoint times out: timeout recorded before the loss, DEALER renewed") {
  REQUIRE_CODEC();
  TempDir dir;
  json steps = Concat({kWaitSub, Steps(0, 6, [](uint64_t s, json& b) {
                         if (s == 2) b["skip"] = true;
                       })});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*", "--mute-replay"});
  const std::string path = (dir.path / "cap.kvcap").string();
  auto writer = CaptureWriter::Create(path);
  REQUIRE(writer.ok());
  PrefixIndex index;
  SubscriberOptions options;
  options.replay_timeout = std::chrono::milliseconds(300);
  options.backfill = false;
  auto sub = Subscriber::Create(&index, writer->get(), options);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 5 &&
           s.sources[0].ingest.sequence.lost == 1;
  }));
  REQUIRE((*writer)->Close().ok());
  const auto c = (*sub)->status().sources.at(0);
  CHECK(c.replay_timeouts == 1);
  CHECK(c.dealers_recreated == 1);
  std::vector<CaptureRecordType> observed;
  for (const auto& r : ReadAll({path})) {
    if (r.type == CaptureRecordType::kTimeout || r.type == CaptureRecordType::kLost) {
      observed.push_back(r.type);
    }
  }
  CHECK(observed == std::vector<CaptureRecordType>{CaptureRecordType::kTimeout,
                                                   CaptureRecordType::kLost});
}

TEST_CASE("Duplicates are ignored, corrupt payloads are replayed, bad frame counts skipped") {
  REQUIRE_CODEC();
  TempDir dir;
  json steps = Concat({kWaitSub, Steps(0, 10, [](uint64_t s, json& b) {
                         if (s == 3 || s == 7) b["dup"] = true;
                         if (s == 5) b["corrupt"] = true;
                       }),
                       json::array({json{{"frames", json::array({"00"})}},
                                    json{{"frames", json::array({"", "0000000000000000", "", ""})}},
                                    json{{"frames", json::array({"", "00", "90"})}}}),
                       Steps(10, 12)});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*"});
  PrefixIndex index;
  SubscriberOptions options;
  options.backfill = false;
  auto sub = Subscriber::Create(&index, nullptr, options);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 12;
  }));
  const auto c = (*sub)->status().sources.at(0);
  CHECK(c.messages == 17);
  // The two live duplicates, plus replayed copies of batches applied meanwhile (timing).
  CHECK(c.ingest.sequence.duplicates >= 2);
  CHECK(c.ingest.sequence.malformed == 1);
  CHECK(c.ingest.sequence.recovered == 1);
  CHECK(c.ingest.frame_errors == 3);
  CHECK(c.ingest.sequence.lost == 0);
  CHECK(Matched(index, "a", Tokens(12)) == 48);
}

TEST_CASE("A publisher restart clears the source") {
  REQUIRE_CODEC();
  TempDir dir;
  json restarted = json::array();
  for (uint64_t s = 0; s < 3; ++s) restarted.push_back(Batch(s, /*epoch=*/1));
  json steps = Concat({kWaitSub, Steps(0, 6), json::array({json{{"clear_ring", true}}}), restarted});
  PyPublisher pub(dir, "p", steps, {});
  PrefixIndex index;
  auto sub = Subscriber::Create(&index, nullptr);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m")).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 9;
  }));
  const auto c = (*sub)->status().sources.at(0);
  CHECK(c.ingest.sequence.restarts == 1);
  CHECK(Matched(index, "a", Tokens(6)) == 0);
  CHECK(Matched(index, "a", Tokens(3, 1)) == 12);
}

TEST_CASE("dp-size: one source per rank on port + r") {
  REQUIRE_CODEC();
  TempDir dir;
  // Two consecutive free ports: rank r binds port + r.
  const uint16_t port = TwoFreePorts();
  REQUIRE(port != 0);
  const std::string ep0 = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string ep1 = "tcp://127.0.0.1:" + std::to_string(port + 1);
  PyPublisher rank0(dir, "r0", Concat({kWaitSub, Steps(0, 3)}), {"--pub", ep0});
  PyPublisher rank1(dir, "r1", Concat({kWaitSub, Steps(0, 5)}), {"--pub", ep1});
  auto configs = ParseSourceSpec("a=vllm@" + ep0 + ",model=m,dp-size=2");
  REQUIRE(configs.ok());
  REQUIRE(configs->size() == 2);
  PrefixIndex index;
  auto sub = Subscriber::Create(&index, nullptr);
  REQUIRE(sub.ok());
  for (const auto& c : *configs) REQUIRE((*sub)->AddSource(c).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return s.sources.size() == 2 && s.sources[0].ingest.sequence.applied == 3 &&
           s.sources[1].ingest.sequence.applied == 5;
  }));
  CHECK((*sub)->status().sources[1].endpoint == ep1);
  CHECK(Matched(index, "a", Tokens(5)) == 20);
}

TEST_CASE("A subscriber started mid-stream backfills from the ring") {
  REQUIRE_CODEC();
  TempDir dir;
  // 0..4 are published before anyone subscribes (lost live; kept in the ring).
  json steps = Concat({Steps(0, 5), json::array({json{{"ready", true}}}), kWaitSub,
                       json::array({json{{"sleep", 0.3}}}), Steps(5, 8)});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*"});
  PrefixIndex index;
  auto sub = Subscriber::Create(&index, nullptr);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 8;
  }));
  const auto c = (*sub)->status().sources.at(0);
  CHECK(c.ingest.sequence.lost == 0);
  CHECK(Matched(index, "a", Tokens(8)) == 32);
}

TEST_CASE("An orphan asks for the ring again: the missing parents are restored, live and offline") {
  REQUIRE_CODEC();
  TempDir dir;
  // 0..4 are published before anyone subscribes (kept in the ring) and there is no backfill, so
  // batch 5 is the first one applied and its block is an orphan (its parent 1004 is unknown).
  json steps = Concat({Steps(0, 5), json::array({json{{"ready", true}}}), kWaitSub,
                       json::array({json{{"sleep", 0.3}}}), Steps(5, 8)});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*"});
  const std::string path = (dir.path / "cap.kvcap").string();
  auto writer = CaptureWriter::Create(path);
  REQUIRE(writer.ok());
  PrefixIndex live;
  SubscriberOptions options;
  options.backfill = false;
  options.orphan_replay_interval = std::chrono::milliseconds(0);
  auto sub = Subscriber::Create(&live, writer->get(), options);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    return !s.sources.empty() && s.sources[0].ingest.sequence.applied == 3 && !s.sources[0].waiting;
  }));
  REQUIRE((*writer)->Close().ok());
  const SourceCounters c = (*sub)->ingestor().counters(SourceId{0});
  CHECK(c.index.orphans == 1);              // batch 5, once
  CHECK(c.sequence.orphan_replays == 1);
  CHECK(c.sequence.reapplied == 6);         // 0..5 from the ring (5 again, now with its parent)
  CHECK(c.sequence.applied == 3);           // 5, 6, 7 (each applied once as new)
  CHECK(c.sequence.gaps == 0);
  CHECK(c.sequence.lost == 0);
  CHECK(Matched(live, "a", Tokens(8)) == 32);  // the whole chain, from block 0
  uint64_t notes = 0;
  for (const auto& r : ReadAll({path})) {
    if (r.type == CaptureRecordType::kNote && r.text() == "orphan-replay") ++notes;
  }
  CHECK(notes == 1);

  // Offline equals live: the note starts the same replay, the recorded replies re-apply the ring.
  PrefixIndex offline;
  const SourceCounters off = ReplayCapture(path, offline);
  CHECK(off.index.orphans == c.index.orphans);
  CHECK(off.sequence.orphan_replays == c.sequence.orphan_replays);
  CHECK(off.sequence.reapplied == c.sequence.reapplied);
  CHECK(off.sequence.applied == c.sequence.applied);
  CHECK(off.index.stored == c.index.stored);
  CHECK(Matched(offline, "a", Tokens(8)) == 32);
  CHECK(offline.stats().blocks == live.stats().blocks);
}

TEST_CASE("subscribe --record: an offline replay of the capture reaches the live state") {
  REQUIRE_CODEC();
  TempDir dir;
  json restarted = json::array();
  for (uint64_t s = 0; s < 4; ++s) restarted.push_back(Batch(s, 1));
  // The backfill (an empty ring) is answered before the stream starts, and the restart comes
  // after the gaps are recovered: a restart inside the backfill window cannot be told apart from
  // the old incarnation's held batches (both are held by sequence).
  // (The backfill request may be served while the publisher still waits for the subscription:
  // wait for one request served in all, not for one more.)
  json steps = Concat({kWaitSub, json::array({json{{"wait_served", 1}}}),
                       Steps(0, 12, [](uint64_t s, json& b) {
                         if (s == 2 || s == 8) b["skip"] = true;
                         if (s == 4) b["dup"] = true;
                         if (s == 6) b["corrupt"] = true;
                       }),
                       json::array({json{{"frames", json::array({"00"})}}, json{{"sleep", 0.5}},
                                    json{{"clear_ring", true}}}),
                       restarted});
  PyPublisher pub(dir, "p", steps, {"--replay", "tcp://127.0.0.1:*", "--style", "vllm-topic"});
  const std::string path = (dir.path / "cap.kvcap").string();
  auto writer = CaptureWriter::Create(path);
  REQUIRE(writer.ok());
  PrefixIndex live;
  auto sub = Subscriber::Create(&live, writer->get());
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub() + ",model=m,replay=" + pub.replay())).ok());
  CHECK(RunUntil(**sub, [](const SubscriberStatus& s) {
    // Every live message in, the restart seen, nothing missing. (How many batches the restart
    // dropped depends on timing; the point is that the offline replay agrees.)
    return !s.sources.empty() && s.sources[0].messages == 16 &&
           s.sources[0].ingest.sequence.restarts == 1 && !s.sources[0].waiting;
  }));
  {
    const auto st = (*sub)->status().sources.at(0);
    INFO("applied " << st.ingest.sequence.applied << " restarts " << st.ingest.sequence.restarts
                    << " lost " << st.ingest.sequence.lost << " gaps " << st.ingest.sequence.gaps
                    << " messages " << st.messages << " replayed " << st.ingest.sequence.replayed << " rmsgs " << st.replay_messages << " rferr " << st.ingest.replay_frame_errors << " req " << st.ingest.sequence.replay_requests << " sendfail " << st.replay_send_failures << " dups " << st.ingest.sequence.duplicates);
    CHECK(st.ingest.sequence.restarts == 1);
  }
  REQUIRE((*writer)->Close().ok());
  const SourceCounters live_counters = (*sub)->ingestor().counters(SourceId{0});

  PrefixIndex offline;
  const SourceCounters off = ReplayCapture(path, offline);
  CHECK(off.sequence.applied == live_counters.sequence.applied);
  CHECK(off.sequence.gaps == live_counters.sequence.gaps);
  CHECK(off.sequence.recovered == live_counters.sequence.recovered);
  CHECK(off.sequence.lost == live_counters.sequence.lost);
  CHECK(off.sequence.duplicates == live_counters.sequence.duplicates);
  CHECK(off.sequence.restarts == live_counters.sequence.restarts);
  CHECK(off.sequence.malformed == live_counters.sequence.malformed);
  CHECK(off.frame_errors == live_counters.frame_errors);
  CHECK(off.events == live_counters.events);
  for (uint64_t n : {1, 3, 4, 12}) {
    CHECK(Matched(offline, "a", Tokens(n)) == Matched(live, "a", Tokens(n)));
    CHECK(Matched(offline, "a", Tokens(n, 1)) == Matched(live, "a", Tokens(n, 1)));
  }
  CHECK(Matched(live, "a", Tokens(4, 1)) == 16);
  CHECK(offline.stats().blocks == live.stats().blocks);
}

TEST_CASE("Stop() before any message ends Run() cleanly; a bad endpoint is a usage error") {
  auto sub = Subscriber::Create(nullptr, nullptr);
  REQUIRE(sub.ok());
  const Status bad = (*sub)->AddSource(Source("a=vllm@nonsense://x:1"));
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message().find("'a'") != std::string::npos);
  REQUIRE((*sub)->AddSource(Source("a=vllm@tcp://127.0.0.1:1")).ok());
  (*sub)->Stop();
  CHECK((*sub)->Run().ok());
  CHECK_FALSE((*sub)->status().running);
}

TEST_CASE("--strict: the first bad message ends Run() with its reason") {
  TempDir dir;
  PyPublisher pub(dir, "p", Concat({kWaitSub, json::array({json{{"frames", json::array({"00"})}}})}), {});
  SubscriberOptions options;
  options.strict = true;
  auto sub = Subscriber::Create(nullptr, nullptr, options);
  REQUIRE(sub.ok());
  REQUIRE((*sub)->AddSource(Source("a=vllm@" + pub.pub())).ok());
  Status result;
  std::thread io([&] { result = (*sub)->Run(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*sub)->status().messages == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((*sub)->status().running && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*sub)->Stop();
  io.join();
  CHECK_FALSE(result.ok());
  CHECK(result.message().find("--strict") != std::string::npos);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
