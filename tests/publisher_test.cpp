// Publisher (kvindex_zmq): the replay ring and ROUTER probed by an independent python3-zmq DEALER
// (tests/data/fake_subscriber.py), endpoint rules, and publish-fake's --out capture read back
// with CaptureReader.
#include "kvindex/zmq/publisher.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/files/capture.h"
#include "test_util.h"

namespace kvindex {
namespace {

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Binds a publisher with a replay ROUTER on random free ports (retrying on collisions), in the
// ephemeral range: the CLI tests own the ports below it (tests/CMakeLists.txt).
std::unique_ptr<Publisher> MakePublisher(ReplayStyle style, size_t ring, uint16_t* replay_port) {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 50; ++attempt) {
    const uint16_t port = static_cast<uint16_t>(32768 + rng() % 28000);
    PublisherOptions o;
    o.endpoint = "tcp://127.0.0.1:" + std::to_string(port);
    o.connect = PublisherConnect::kBind;
    o.replay_endpoint = "tcp://127.0.0.1:" + std::to_string(port + 1);
    o.replay_style = style;
    o.topic = "kv-events";
    o.ring_size = ring;
    o.linger_ms = 0;
    auto pub = Publisher::Create(o);
    if (pub.ok()) {
      *replay_port = static_cast<uint16_t>(port + 1);
      return std::move(*pub);
    }
  }
  return nullptr;
}

// Runs the python DEALER against `port` while the publisher serves replay requests.
nlohmann::json Dealer(Publisher& pub, uint16_t port, const std::string& args) {
  const std::string command = std::string(KVINDEX_PYTHON) + " " + KVINDEX_TEST_DATA_DIR +
                              "/fake_subscriber.py replay --endpoint tcp://127.0.0.1:" +
                              std::to_string(port) + " --idle 2 " + args;
  auto reply = std::async(std::launch::async, [command] { return RunCommand(command); });
  while (reply.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    REQUIRE(pub.ServeReplay(std::chrono::milliseconds(20)).ok());
  }
  const std::string out = reply.get();
  auto doc = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_MESSAGE(!doc.is_discarded(), "DEALER output: " << out);
  return doc;
}

std::string Hex(uint64_t seq) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(seq));
  return buf;
}

std::string HexOf(const std::string& s) {
  std::string out;
  char buf[3];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

TEST_SUITE("publisher") {
  TEST_CASE("Bind or connect follows vLLM's endpoint rule") {
    CHECK(PublisherEndpointBinds("tcp://*:5557"));
    CHECK(PublisherEndpointBinds("tcp://[::]:5557"));
    CHECK(PublisherEndpointBinds("tcp://0.0.0.0:5557"));
    CHECK(PublisherEndpointBinds("ipc:///tmp/x"));
    CHECK(PublisherEndpointBinds("inproc://x"));
    CHECK_FALSE(PublisherEndpointBinds("tcp://127.0.0.1:5557"));
    CHECK_FALSE(PublisherEndpointBinds("tcp://host:5557"));
  }

  TEST_CASE("A bad endpoint is an error naming it, never a throw") {
    PublisherOptions o;
    o.endpoint = "nonsense://x";
    o.connect = PublisherConnect::kBind;
    auto pub = Publisher::Create(o);
    REQUIRE_FALSE(pub.ok());
    CHECK(pub.status().code() == StatusCode::kIoError);
    CHECK(pub.status().message().find("nonsense://x") != std::string::npos);
    o.endpoint.clear();
    CHECK(Publisher::Create(o).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("WaitForSubscribers without counting is a usage error; with it, a timeout") {
    uint16_t port = 0;
    auto pub = MakePublisher(ReplayStyle::kVllm, 4, &port);
    REQUIRE(pub);
    CHECK(pub->WaitForSubscribers(1, std::chrono::milliseconds(10)).code() ==
          StatusCode::kInvalidArgument);
  }

  TEST_CASE("The replay ROUTER answers from the middle, before the ring, past the end; not bad requests") {
    for (ReplayStyle style : {ReplayStyle::kVllm, ReplayStyle::kVllmTopic, ReplayStyle::kMooncake}) {
      CAPTURE(ReplayStyleName(style));
      uint16_t port = 0;
      auto pub = MakePublisher(style, 4, &port);
      REQUIRE(pub);
      for (uint64_t seq = 0; seq < 10; ++seq) pub->Remember(seq, Bytes("payload-" + std::to_string(seq)));
      CHECK(pub->ring_batches() == 4);
      auto batch = [&](uint64_t seq) {
        nlohmann::json frames = nlohmann::json::array({""});
        if (style == ReplayStyle::kVllmTopic) frames.push_back(HexOf("kv-events"));
        frames.push_back(Hex(seq));
        frames.push_back(HexOf("payload-" + std::to_string(seq)));
        return frames;
      };
      const nlohmann::json end =
          style == ReplayStyle::kVllm        ? nlohmann::json::array({"", "ffffffffffffffff", ""})
          : style == ReplayStyle::kVllmTopic ? nlohmann::json::array({"", "", "ffffffffffffffff", ""})
                                             : nlohmann::json::array({"", "", "ffffffffffffffff"});
      auto middle = Dealer(*pub, port, "--start 8");
      CHECK(middle["replies"] == nlohmann::json::array({batch(8), batch(9), end}));
      auto before = Dealer(*pub, port, "--start 0");
      CHECK(before["replies"] == nlohmann::json::array({batch(6), batch(7), batch(8), batch(9), end}));
      auto past = Dealer(*pub, port, "--start 10");
      CHECK(past["replies"] == nlohmann::json::array({end}));
      auto bad = Dealer(*pub, port, "--raw 0000000000000008");  // no empty delimiter
      CHECK(bad["replies"].empty());
      auto short_seq = Dealer(*pub, port, "--raw '' 0008");
      CHECK(short_seq["replies"].empty());
      const PublisherCounters& c = pub->counters();
      CHECK(c.replay_requests == 3);
      CHECK(c.replay_batches == 6);
      CHECK(c.replay_malformed == 2);
      pub->ClearRing();
      CHECK(Dealer(*pub, port, "--start 0")["replies"] == nlohmann::json::array({end}));
    }
  }

#ifdef KVINDEX_CLI_BINARY  // the kvindex binary exists only with the tools (KVINDEX_BUILD_TOOLS)
  TEST_CASE("publish-fake --out is a capture CaptureReader reads: definitions, messages, replies") {
    const std::filesystem::path binary = KVINDEX_CLI_BINARY;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("kvindex_publisher_test_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir);
    const std::string out = (dir / "f.kvcap").string();
    const std::string command = binary.string() +
                                " publish-fake --format sglang --instances 2 --dp-ranks 2 --count 6"
                                " --drop-every 3 --replay-port 7000 --out " + out + " 2>/dev/null";
    REQUIRE(std::system(command.c_str()) == 0);
    auto reader = CaptureReader::Open({out});
    REQUIRE(reader.ok());
    CaptureRecord record;
    size_t definitions = 0, messages = 0, replayed = 0, ends = 0, gaps = 0;
    while ((*reader)->Next(record)) {
      switch (record.type) {
        case CaptureRecordType::kSourceDefinition: {
          auto config = SourceConfigFromJson(record.text());
          REQUIRE(config.ok());
          CHECK(config->name == "fake-" + std::to_string(definitions / 2));
          CHECK(config->dp_rank == DpRank(definitions % 2));
          CHECK(config->format == "sglang");
          CHECK(config->replay_endpoint == "tcp://127.0.0.1:" + std::to_string(7000 + definitions));
          ++definitions;
          break;
        }
        case CaptureRecordType::kMessage: {
          auto view = ParseEventMessage(record.frames);
          REQUIRE(view.ok());
          auto batch = DecodeEventBatch(view->payload, FormatHint::kSglang);
          REQUIRE(batch.ok());
          CHECK(batch->dp_rank == DpRank(record.source.value % 2));
          ++messages;
          break;
        }
        case CaptureRecordType::kReplayed: {
          auto reply = ParseReplayReply(record.frames);
          REQUIRE(reply.ok());
          if (reply->kind == ReplayReply::Kind::kEnd) ++ends;
          else ++replayed;
          break;
        }
        case CaptureRecordType::kGap: ++gaps; break;
        default: break;
      }
    }
    CHECK((*reader)->problems().empty());
    CHECK(definitions == 4);
    // 6 batches per source; the 3rd (seq 2) is dropped live, revealed by seq 3, replayed with
    // seq 3 from the ring (the 6th is the last: never dropped).
    CHECK(messages == 4 * 5);
    CHECK(gaps == 4);
    CHECK(replayed == 4 * 2);
    CHECK(ends == 4);
    std::filesystem::remove_all(dir);
  }
#endif
}

}  // namespace
}  // namespace kvindex
