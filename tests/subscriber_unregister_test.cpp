// Registering and unregistering a source over and over against a live Subscriber (HTTP /register
// and /unregister do exactly this) holds no sockets: the open descriptors of the process stay
// within a small bound over 1,200 cycles (ZeroMQ's default limit is 1,023 sockets per context, so
// sockets kept open would fail registration after about 500 cycles of SUB + DEALER), and a source
// registered afterwards is still read and answered. Real sockets on loopback; every wait is
// bounded, no timing is asserted.
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "kvindex/zmq/publisher.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex {
namespace {

// The open file descriptors of this process (entries of /proc/self/fd, less the one reading it).
size_t OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  size_t n = 0;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// A vLLM array-era batch storing one block (engine hash 1, tokens 1..4, block size 4), as
// python3-msgpack encodes [0.0, [["BlockStored", [1], None, [1, 2, 3, 4], 4, None, "GPU", None]]].
std::vector<std::byte> OneBlockBatch() {
  const std::string hex =
      "93cb00000000000000009198ab426c6f636b53746f7265649101c0940102030404c0a3475055c000";
  std::vector<std::byte> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

uint64_t LongestFor(const PrefixIndex& index, const std::string& instance) {
  MatchQuery query;
  query.model = "m";
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  auto match = index.MatchTokens(query, tokens);
  if (!match.ok()) return 0;
  for (const InstanceMatch& m : match->instances) {
    if (m.instance == instance) return m.longest_matched;
  }
  return 0;
}

TEST_CASE("1,200 register/unregister cycles hold no sockets; a source registered after is read") {
  PublisherOptions pub_options;
  pub_options.endpoint = "tcp://127.0.0.1:*";
  pub_options.connect = PublisherConnect::kBind;
  pub_options.replay_endpoint = "tcp://127.0.0.1:*";
  auto publisher = Publisher::Create(pub_options);
  REQUIRE(publisher.ok());

  PrefixIndex index;
  SubscriberOptions options;
  options.status_interval = std::chrono::milliseconds(1000);
  auto subscriber = Subscriber::Create(&index, nullptr, options);
  REQUIRE(subscriber.ok());
  std::thread io([&] { CHECK((*subscriber)->Run().ok()); });
  // A failed REQUIRE below still stops and joins the I/O thread: the failure is reported, not
  // turned into std::terminate by a joinable thread's destructor.
  struct StopOnExit {
    Subscriber* subscriber;
    std::thread* io;
    ~StopOnExit() {
      subscriber->Stop();
      if (io->joinable()) io->join();
    }
  } stop_on_exit{subscriber->get(), &io};

  SourceConfig config;
  config.name = "vllm-0";
  config.format = "vllm";
  config.model = "m";
  config.block_size = 4;
  config.endpoint = (*publisher)->live_endpoint();
  config.replay_endpoint = (*publisher)->replay_endpoint();  // a DEALER per registration too

  const auto cycle = [&] {
    const Status added = (*subscriber)->AddSourceWhileRunning({&config, 1});
    REQUIRE_MESSAGE(added.ok(), added.ToString());
    auto removed = (*subscriber)->RemoveInstanceWhileRunning("vllm-0");
    REQUIRE_MESSAGE(removed.ok(), removed.status().ToString());
  };
  for (int i = 0; i < 50; ++i) cycle();
  const size_t before = OpenFds();
  for (int i = 0; i < 1150; ++i) cycle();
  // ZeroMQ's reaper closes sockets asynchronously: allow it to catch up.
  size_t after = OpenFds();
  for (int i = 0; i < 200 && after > before + 16; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = OpenFds();
  }
  CHECK(after <= before + 16);
  MESSAGE("open descriptors after 50 cycles: " << before << ", after 1,200: " << after);

  // Unregistering what is not registered is refused.
  CHECK((*subscriber)->RemoveInstanceWhileRunning("nobody").status().code() ==
        StatusCode::kNotFound);

  // Registered once more: live batches are read and the index answers for it.
  config.replay_endpoint.clear();  // no backfill to wait for
  REQUIRE((*subscriber)->AddSourceWhileRunning({&config, 1}).ok());
  const std::vector<std::byte> batch = OneBlockBatch();
  uint64_t longest = 0;
  for (uint64_t seq = 0; seq < 400 && longest == 0; ++seq) {
    REQUIRE((*publisher)->Send(seq, batch).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    longest = LongestFor(index, "vllm-0");
  }
  CHECK(longest == 4);

}

}  // namespace
}  // namespace kvindex
