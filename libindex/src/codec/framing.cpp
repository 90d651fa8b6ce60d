#include "kvindex/codec/framing.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

namespace kvindex {
namespace {

bool IsEndSeq(std::span<const std::byte> frame) {
  return frame.size() == 8 &&
         std::all_of(frame.begin(), frame.end(), [](std::byte b) { return b == std::byte{0xff}; });
}

Frame Copy(std::span<const std::byte> bytes) { return Frame(bytes.begin(), bytes.end()); }

uint64_t LoadBe64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

}  // namespace

Frame EncodeSeqFrame(uint64_t seq) {
  Frame frame(8);
  for (int i = 0; i < 8; ++i) frame[static_cast<size_t>(i)] = std::byte(seq >> (56 - 8 * i));
  return frame;
}

Result<uint64_t> DecodeSeqFrame(std::span<const std::byte> frame) {
  if (frame.size() != 8) {
    return Status::Malformed("sequence frame: expected 8 bytes, got " +
                             std::to_string(frame.size()));
  }
  return LoadBe64(frame.data());
}

namespace {

// The parsers below serve owned frames (Frame) and borrowed ones (FrameView) alike.
template <typename F>
Result<EventMessageView> ParseEventMessageOf(std::span<const F> frames) {
  if (frames.size() != 3) {
    return Status::Malformed("event message: expected 3 frames [topic, seq, payload], got " +
                             std::to_string(frames.size()));
  }
  const std::span<const std::byte> seq_frame(frames[1]);
  if (seq_frame.size() != 8) return DecodeSeqFrame(seq_frame).status();
  return EventMessageView{frames[0], LoadBe64(seq_frame.data()), frames[2]};
}

}  // namespace

Result<EventMessageView> ParseEventMessage(std::span<const Frame> frames) {
  return ParseEventMessageOf(frames);
}
Result<EventMessageView> ParseEventMessage(std::span<const FrameView> frames) {
  return ParseEventMessageOf(frames);
}

std::vector<Frame> BuildEventMessage(std::span<const std::byte> topic, uint64_t seq,
                                     std::span<const std::byte> payload) {
  std::vector<Frame> frames;
  frames.reserve(3);
  frames.push_back(Copy(topic));
  frames.push_back(EncodeSeqFrame(seq));
  frames.push_back(Copy(payload));
  return frames;
}

std::vector<Frame> BuildReplayRequest(uint64_t start_seq) {
  std::vector<Frame> frames;
  frames.emplace_back();
  frames.push_back(EncodeSeqFrame(start_seq));
  return frames;
}

Result<uint64_t> ParseReplayRequest(std::span<const Frame> frames) {
  if (frames.size() == 2 && frames[0].empty()) return DecodeSeqFrame(frames[1]);
  if (frames.size() == 1) return DecodeSeqFrame(frames[0]);
  return Status::Malformed("replay request: expected [\"\", seq] or [seq], got " +
                           std::to_string(frames.size()) + " frames");
}

std::string_view ReplayStyleName(ReplayStyle style) {
  switch (style) {
    case ReplayStyle::kVllm: return "vllm";
    case ReplayStyle::kVllmTopic: return "vllm-topic";
    case ReplayStyle::kMooncake: return "mooncake";
  }
  return "vllm";
}

Result<ReplayStyle> ParseReplayStyle(std::string_view name) {
  for (ReplayStyle style : {ReplayStyle::kVllm, ReplayStyle::kVllmTopic, ReplayStyle::kMooncake}) {
    if (name == ReplayStyleName(style)) return style;
  }
  return Status::InvalidArgument("unknown replay style '" + std::string(name) +
                                 "' (expected vllm, vllm-topic or mooncake)");
}

std::vector<Frame> BuildReplayReply(ReplayStyle style, std::span<const std::byte> topic,
                                    uint64_t seq, std::span<const std::byte> payload) {
  std::vector<Frame> frames;
  frames.emplace_back();
  if (style == ReplayStyle::kVllmTopic) frames.push_back(Copy(topic));
  frames.push_back(EncodeSeqFrame(seq));
  frames.push_back(Copy(payload));
  return frames;
}

std::vector<Frame> BuildReplayEnd(ReplayStyle style) {
  std::vector<Frame> frames;
  frames.emplace_back();
  switch (style) {
    case ReplayStyle::kVllm:
      frames.push_back(EncodeSeqFrame(kReplayEndSeq));
      frames.emplace_back();
      break;
    case ReplayStyle::kVllmTopic:
      frames.emplace_back();
      frames.push_back(EncodeSeqFrame(kReplayEndSeq));
      frames.emplace_back();
      break;
    case ReplayStyle::kMooncake:
      frames.emplace_back();
      frames.push_back(EncodeSeqFrame(kReplayEndSeq));
      break;
  }
  return frames;
}

namespace {

template <typename F>
Result<ReplayReply> ParseReplayReplyOf(std::span<const F> frames) {
  // Drop the DEALER's empty delimiter; a REQ socket receives the message without it.
  std::span<const F> rest = frames;
  if (rest.size() >= 3 && rest[0].empty()) rest = rest.subspan(1);
  ReplayReply reply;
  if (rest.size() == 2) {
    if (rest[0].empty() && IsEndSeq(rest[1])) {  // Mooncake: empty seq frame, FF x8 as payload
      reply.kind = ReplayReply::Kind::kEnd;
      reply.style = ReplayStyle::kMooncake;
      return reply;
    }
    auto seq = DecodeSeqFrame(rest[0]);
    if (!seq.ok()) return seq.status().WithContext("replay reply (2 frames after delimiter)");
    reply.style = ReplayStyle::kVllm;
    if (*seq == kReplayEndSeq) {
      if (!rest[1].empty()) {
        return Status::Malformed("replay reply: end marker sequence with a " +
                                 std::to_string(rest[1].size()) + "-byte payload");
      }
      reply.kind = ReplayReply::Kind::kEnd;
      return reply;
    }
    reply.seq = *seq;
    reply.payload = rest[1];
    return reply;
  }
  if (rest.size() == 3) {
    auto seq = DecodeSeqFrame(rest[1]);
    if (!seq.ok()) return seq.status().WithContext("replay reply (3 frames after delimiter)");
    reply.style = ReplayStyle::kVllmTopic;
    if (*seq == kReplayEndSeq) {
      if (!rest[2].empty()) {
        return Status::Malformed("replay reply: end marker sequence with a " +
                                 std::to_string(rest[2].size()) + "-byte payload");
      }
      reply.kind = ReplayReply::Kind::kEnd;
      return reply;
    }
    reply.seq = *seq;
    reply.topic = rest[0];
    reply.payload = rest[2];
    return reply;
  }
  return Status::Malformed("replay reply: expected 3 or 4 frames, got " +
                           std::to_string(frames.size()));
}

}  // namespace

Result<ReplayReply> ParseReplayReply(std::span<const Frame> frames) {
  return ParseReplayReplyOf(frames);
}
Result<ReplayReply> ParseReplayReply(std::span<const FrameView> frames) {
  return ParseReplayReplyOf(frames);
}

}  // namespace kvindex
