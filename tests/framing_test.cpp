#include "kvindex/codec/framing.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "kvindex/codec/event_codec.h"
#include "test_util.h"

namespace kvindex {
namespace {

using test::FromHex;
using test::ToHex;

std::vector<Frame> Frames(std::initializer_list<const char*> hex) {
  std::vector<Frame> frames;
  for (const char* h : hex) frames.push_back(FromHex(h));
  return frames;
}

std::vector<Frame> FramesFromJson(const nlohmann::json& arr) {
  std::vector<Frame> frames;
  for (const auto& h : arr) frames.push_back(FromHex(h.get<std::string>()));
  return frames;
}

std::vector<std::string> HexFrames(const std::vector<Frame>& frames) {
  std::vector<std::string> out;
  for (const Frame& f : frames) out.push_back(ToHex(f));
  return out;
}

TEST_SUITE("framing") {

TEST_CASE("The sequence frame is 8 bytes big-endian") {
  CHECK(ToHex(EncodeSeqFrame(0)) == "0000000000000000");
  CHECK(ToHex(EncodeSeqFrame(0x0102030405060708ull)) == "0102030405060708");
  CHECK(ToHex(EncodeSeqFrame(kReplayEndSeq)) == "ffffffffffffffff");
  auto seq = DecodeSeqFrame(FromHex("000000000000000d"));
  REQUIRE(seq.ok());
  CHECK(*seq == 13);
  for (const char* bad : {"", "00", "00000000000000", "000000000000000000"}) {
    auto r = DecodeSeqFrame(FromHex(bad));
    REQUIRE(!r.ok());
    CHECK(r.status().code() == StatusCode::kMalformed);
  }
  CHECK(DecodeSeqFrame(FromHex("0000000000000001ff")).status().message() ==
        "sequence frame: expected 8 bytes, got 9");
}

TEST_CASE("A live message must be [topic, seq8, payload]") {
  const auto good = Frames({"6b762d6576656e7473", "0000000000000005", "90"});
  auto view = ParseEventMessage(good);
  REQUIRE(view.ok());
  CHECK(view->seq == 5);
  CHECK(view->topic.size() == 9);
  CHECK(view->payload.size() == 1);
  CHECK(HexFrames(BuildEventMessage(good[0], 5, good[2])) == HexFrames(good));

  const auto two = Frames({"0000000000000005", "90"});
  CHECK(ParseEventMessage(two).status().message() ==
        "event message: expected 3 frames [topic, seq, payload], got 2");
  const auto four = Frames({"", "0000000000000005", "90", ""});
  CHECK(ParseEventMessage(four).status().code() == StatusCode::kMalformed);
  const auto short_seq = Frames({"", "05", "90"});
  CHECK(ParseEventMessage(short_seq).status().code() == StatusCode::kMalformed);
  const auto empty_topic = Frames({"", "0000000000000001", ""});  // Mooncake RFC: empty topic
  CHECK(ParseEventMessage(empty_topic).ok());
}

TEST_CASE("Replay requests and replies match the golden captures") {
  const auto golden = test::TestDataDir() / "golden";
  for (const char* file : {"vllm_v0_9_0.json", "sglang_006d053f.json"}) {
    CAPTURE(file);
    const auto doc = nlohmann::json::parse(test::ReadFile(golden / file));
    for (const char* which : {"ranged", "past_end"}) {
      CAPTURE(which);
      const auto& replay = doc["replay"][which];
      const uint64_t start = replay["start_seq"].get<uint64_t>();
      const auto request = FramesFromJson(replay["request_frames_hex"]);
      CHECK(HexFrames(BuildReplayRequest(start)) == HexFrames(request));
      auto parsed_request = ParseReplayRequest(request);
      REQUIRE(parsed_request.ok());
      CHECK(*parsed_request == start);

      const auto& replies = replay["reply_messages_hex"];
      REQUIRE(!replies.empty());
      uint64_t expected_seq = start;
      for (size_t i = 0; i < replies.size(); ++i) {
        const auto frames = FramesFromJson(replies[i]);
        auto reply = ParseReplayReply(frames);
        REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
        CHECK(reply->style == ReplayStyle::kVllm);
        if (i + 1 == replies.size()) {
          CHECK(reply->kind == ReplayReply::Kind::kEnd);
          CHECK(HexFrames(BuildReplayEnd(ReplayStyle::kVllm)) == HexFrames(frames));
          continue;
        }
        CHECK(reply->kind == ReplayReply::Kind::kBatch);
        CHECK(reply->seq == expected_seq);
        // The replayed payload is the live one and decodes.
        std::vector<std::byte> payload(reply->payload.begin(), reply->payload.end());
        CHECK(ToHex(payload) == doc["frames"][expected_seq]["payload_hex"].get<std::string>());
        CHECK(DecodeEventBatch(reply->payload).ok());
        CHECK(HexFrames(BuildReplayReply(ReplayStyle::kVllm, {}, reply->seq, reply->payload)) ==
              HexFrames(frames));
        ++expected_seq;
      }
    }
  }
}

TEST_CASE("Replay replies in every layout are classified without being told the style") {
  const std::vector<std::byte> topic = FromHex("6b762d6576656e7473");
  const std::vector<std::byte> payload = FromHex("92cb41da13b86000000090");
  struct Case {
    ReplayStyle style;
    std::vector<std::string> reply;  // as the DEALER receives it
    std::vector<std::string> end;
  };
  const Case cases[] = {
      {ReplayStyle::kVllm,
       {"", "0000000000000007", "92cb41da13b86000000090"},
       {"", "ffffffffffffffff", ""}},
      {ReplayStyle::kVllmTopic,
       {"", "6b762d6576656e7473", "0000000000000007", "92cb41da13b86000000090"},
       {"", "", "ffffffffffffffff", ""}},
      {ReplayStyle::kMooncake,
       {"", "0000000000000007", "92cb41da13b86000000090"},
       // End marker: an empty seq frame, FF x8 as payload (docs/wire-formats.md "Replay").
       {"", "", "ffffffffffffffff"}},
  };
  for (const Case& c : cases) {
    CAPTURE(ReplayStyleName(c.style));
    const auto built = BuildReplayReply(c.style, topic, 7, payload);
    CHECK(HexFrames(built) == c.reply);
    auto reply = ParseReplayReply(built);
    REQUIRE(reply.ok());
    CHECK(reply->kind == ReplayReply::Kind::kBatch);
    CHECK(reply->seq == 7);
    CHECK(reply->payload.size() == payload.size());
    if (c.style == ReplayStyle::kVllmTopic) CHECK(reply->topic.size() == topic.size());

    const auto end = BuildReplayEnd(c.style);
    CHECK(HexFrames(end) == c.end);
    auto parsed_end = ParseReplayReply(end);
    REQUIRE(parsed_end.ok());
    CHECK(parsed_end->kind == ReplayReply::Kind::kEnd);
    if (c.style != ReplayStyle::kVllm) CHECK(parsed_end->style == c.style);
  }
  // A REQ socket receives the same messages without the empty delimiter.
  auto req = ParseReplayReply(Frames({"0000000000000009", "90"}));
  REQUIRE(req.ok());
  CHECK(req->seq == 9);
  auto req_end = ParseReplayReply(Frames({"ffffffffffffffff", ""}));
  REQUIRE(req_end.ok());
  CHECK(req_end->kind == ReplayReply::Kind::kEnd);
}

TEST_CASE("Malformed replay replies and requests are refused") {
  const std::vector<std::vector<std::string>> bad_replies = {
      {},
      {""},
      {"", "0000000000000007"},              // no payload
      {"", "07", "90"},                       // short sequence frame
      {"", "ffffffffffffffff", "90"},         // end sequence with a payload
      {"", "74", "0000000000000007", "90", ""},  // 5 frames
      {"", "74", "07", "90"},                 // topic layout, short sequence
      {"", "", "fffffffffffffffe"},           // Mooncake-like but not FF x8
  };
  for (const auto& hex : bad_replies) {
    std::vector<Frame> frames;
    for (const auto& h : hex) frames.push_back(FromHex(h));
    auto r = ParseReplayReply(frames);
    CHECK_MESSAGE(!r.ok(), hex.size());
    if (!r.ok()) CHECK(r.status().code() == StatusCode::kMalformed);
  }
  CHECK(ParseReplayRequest(Frames({"0000000000000001"})).ok());  // a REQ socket's request
  CHECK(!ParseReplayRequest(Frames({"78", "0000000000000001"})).ok());
  CHECK(!ParseReplayRequest(Frames({"", "01"})).ok());
  CHECK(!ParseReplayRequest(Frames({"", "", "0000000000000001"})).ok());
}

TEST_CASE("Replay style names parse back") {
  for (ReplayStyle s : {ReplayStyle::kVllm, ReplayStyle::kVllmTopic, ReplayStyle::kMooncake}) {
    auto parsed = ParseReplayStyle(ReplayStyleName(s));
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
  }
  CHECK(ParseReplayStyle("zmq").status().code() == StatusCode::kInvalidArgument);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
