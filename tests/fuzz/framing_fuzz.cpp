// Fuzz target for the message framing parsers (codec/framing.h): the live message
// `[topic, seq, payload]`, the replay request and the three replay reply layouts, which the
// subscriber applies to whatever frames a socket delivers. Input layout: a sequence of frames, each
// one length byte then that many bytes (the last frame takes what is left when the input is
// shorter). Properties (a violation aborts):
//  - ParseEventMessage accepts exactly 3 frames with an 8-byte second one (the documented shape,
//    checked independently here), with the seq read big-endian and the spans on frames 0 and 2,
//    and BuildEventMessage of what it returns gives the same frames back;
//  - ParseReplayRequest accepts exactly `["", seq8]` and `[seq8]`, and BuildReplayRequest of its
//    seq parses back to the same seq;
//  - ParseReplayReply never crashes; a batch rebuilt with BuildReplayReply in the recognised style
//    parses back to the same seq, topic and payload, an end marker rebuilt with BuildReplayEnd
//    parses back as an end in the same style; errors are kMalformed, one line;
//  - the owning (Frame) and borrowing (FrameView) overloads agree.
//
// Corpus (tests/fuzz/corpus/framing/): written by make_framing_corpus.py: the golden captures'
// live messages and replay replies (tests/data/golden/*.json) and every layout's end marker.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/codec/framing.h"

#include "fuzz_check.h"

namespace {

using kvindex::Frame;
using kvindex::FrameView;

std::string_view g_input;

void Fail(std::string_view what, std::string_view detail) {
  kvindex::fuzz::Violation("framing_fuzz", what, detail, g_input);
}

bool Same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

uint64_t BigEndian(const Frame& frame) {
  uint64_t v = 0;
  for (std::byte b : frame) v = (v << 8) | static_cast<uint64_t>(b);
  return v;
}

void CheckError(const kvindex::Status& status) {
  if (status.code() != kvindex::StatusCode::kMalformed) Fail("unexpected code", status.ToString());
  if (!kvindex::fuzz::IsOneLine(status.message())) Fail("error is not one line", status.message());
}

void CheckEventMessage(const std::vector<Frame>& frames, const std::vector<FrameView>& views) {
  auto message = kvindex::ParseEventMessage(std::span<const Frame>(frames));
  auto from_views = kvindex::ParseEventMessage(std::span<const FrameView>(views));
  const bool shape = frames.size() == 3 && frames[1].size() == 8;
  if (message.ok() != shape || from_views.ok() != shape) Fail("live message shape", "");
  if (!shape) {
    CheckError(message.status());
    return;
  }
  if (message->seq != BigEndian(frames[1]) || from_views->seq != message->seq) Fail("seq", "");
  if (!Same(message->topic, frames[0]) || !Same(message->payload, frames[2])) Fail("spans", "");
  if (kvindex::BuildEventMessage(message->topic, message->seq, message->payload) != frames) {
    Fail("BuildEventMessage does not give the frames back", "");
  }
}

void CheckReplayRequest(const std::vector<Frame>& frames) {
  auto seq = kvindex::ParseReplayRequest(frames);
  const bool shape = (frames.size() == 2 && frames[0].empty() && frames[1].size() == 8) ||
                     (frames.size() == 1 && frames[0].size() == 8);
  if (seq.ok() != shape)
    Fail("replay request shape", seq.ok() ? "accepted" : seq.status().message());
  if (!seq.ok()) {
    CheckError(seq.status());
    return;
  }
  if (*seq != BigEndian(frames.back())) Fail("replay request seq", "");
  auto back = kvindex::ParseReplayRequest(kvindex::BuildReplayRequest(*seq));
  if (!back.ok() || *back != *seq) Fail("BuildReplayRequest does not parse back", "");
}

void CheckReplayReply(const std::vector<Frame>& frames, const std::vector<FrameView>& views) {
  auto reply = kvindex::ParseReplayReply(std::span<const Frame>(frames));
  auto from_views = kvindex::ParseReplayReply(std::span<const FrameView>(views));
  if (reply.ok() != from_views.ok()) Fail("Frame and FrameView overloads disagree", "");
  if (!reply.ok()) {
    CheckError(reply.status());
    return;
  }
  if (reply->kind != from_views->kind || reply->seq != from_views->seq ||
      reply->style != from_views->style || !Same(reply->payload, from_views->payload) ||
      !Same(reply->topic, from_views->topic)) {
    Fail("Frame and FrameView overloads give other replies", "");
  }
  if (reply->kind == kvindex::ReplayReply::Kind::kEnd) {
    auto end = kvindex::ParseReplayReply(kvindex::BuildReplayEnd(reply->style));
    if (!end.ok() || end->kind != kvindex::ReplayReply::Kind::kEnd || end->style != reply->style) {
      Fail("BuildReplayEnd does not parse back as the same end", "");
    }
    return;
  }
  if (reply->seq == kvindex::kReplayEndSeq) Fail("a batch with the end marker's seq", "");
  const std::vector<Frame> rebuilt =
      kvindex::BuildReplayReply(reply->style, reply->topic, reply->seq, reply->payload);
  auto again = kvindex::ParseReplayReply(rebuilt);
  if (!again.ok() || again->kind != reply->kind || again->seq != reply->seq ||
      again->style != reply->style || !Same(again->payload, reply->payload) ||
      !Same(again->topic, reply->topic)) {
    Fail("BuildReplayReply does not parse back to the same reply", "");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_input = std::string_view(reinterpret_cast<const char*>(data), size);
  std::vector<Frame> frames;
  size_t at = 0;
  while (at < size && frames.size() < 8) {
    const size_t n = std::min<size_t>(data[at], size - at - 1);
    const auto* begin = reinterpret_cast<const std::byte*>(data + at + 1);
    frames.emplace_back(begin, begin + n);
    at += 1 + n;
  }
  std::vector<FrameView> views(frames.begin(), frames.end());
  CheckEventMessage(frames, views);
  CheckReplayRequest(frames);
  CheckReplayReply(frames, views);
  return 0;
}
