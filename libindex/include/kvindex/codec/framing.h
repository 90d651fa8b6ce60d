// Framing of KV-event messages and of the replay protocol, as byte vectors (no ZeroMQ here: the
// transport delivers frames, this file says what they mean).
//
//  - A live message is three frames `[topic, seq (8 bytes big-endian), payload]`.
//  - A replay request, as sent by a DEALER, is `["", start_seq (8 bytes big-endian)]`.
//  - Replay replies, as a DEALER receives them, come in three layouts (ReplayStyle):
//      kVllm       `["", seq, payload]`          end marker `["", FF x8, ""]`   (vLLM < 0.26, SGLang)
//      kVllmTopic  `["", topic, seq, payload]`   end marker `["", "", FF x8, ""]` (vLLM >= 0.26)
//      kMooncake   `["", seq, payload]`          end marker `["", "", FF x8]`   (Mooncake store:
//                  the sequence frame is empty and FF x8 sits in the payload position)
//    ParseReplayReply() accepts all of them without being told which.
//
// Thread safety: pure functions and plain values.
#ifndef KVINDEX_CODEC_FRAMING_H_
#define KVINDEX_CODEC_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvindex/core/status.h"

namespace kvindex {

using Frame = std::vector<std::byte>;
// A frame borrowed from elsewhere (e.g. a capture reader's buffer, CaptureRecordView).
using FrameView = std::span<const std::byte>;

// The sequence value of the replay end marker, FF x8 (-1 as a signed 64-bit big-endian value).
inline constexpr uint64_t kReplayEndSeq = ~uint64_t{0};

// Returns `seq` as 8 big-endian bytes.
Frame EncodeSeqFrame(uint64_t seq);

// Returns the sequence in an 8-byte big-endian frame; kMalformed when it is not 8 bytes long.
Result<uint64_t> DecodeSeqFrame(std::span<const std::byte> frame);

// A live message, borrowing the frames it was parsed from.
struct EventMessageView {
  std::span<const std::byte> topic;
  uint64_t seq = 0;
  std::span<const std::byte> payload;
};

// Checks a received live message: exactly 3 frames, the second exactly 8 bytes. Anything else is
// kMalformed (the message names the frame count or the sequence frame's length). The view borrows
// `frames`.
Result<EventMessageView> ParseEventMessage(std::span<const Frame> frames);
Result<EventMessageView> ParseEventMessage(std::span<const FrameView> frames);

// Returns `[topic, seq_be8, payload]`.
std::vector<Frame> BuildEventMessage(std::span<const std::byte> topic, uint64_t seq,
                                     std::span<const std::byte> payload);

// Returns the replay request a DEALER sends: `["", start_seq_be8]`.
std::vector<Frame> BuildReplayRequest(uint64_t start_seq);

// Parses a replay request as a DEALER sent it (`["", seq8]`) or a REQ sent it (`[seq8]`);
// kMalformed otherwise.
Result<uint64_t> ParseReplayRequest(std::span<const Frame> frames);

enum class ReplayStyle : uint8_t { kVllm, kVllmTopic, kMooncake };

// Returns "vllm", "vllm-topic" or "mooncake".
std::string_view ReplayStyleName(ReplayStyle style);
// Parses a ReplayStyleName(); kInvalidArgument otherwise.
Result<ReplayStyle> ParseReplayStyle(std::string_view name);

// Returns one replay reply as the DEALER receives it, in `style` (`topic` is used by kVllmTopic
// only).
std::vector<Frame> BuildReplayReply(ReplayStyle style, std::span<const std::byte> topic,
                                    uint64_t seq, std::span<const std::byte> payload);

// Returns the end marker in `style` as the DEALER receives it.
std::vector<Frame> BuildReplayEnd(ReplayStyle style);

// One received replay message, classified. Spans borrow the frames.
struct ReplayReply {
  enum class Kind : uint8_t { kBatch, kEnd };
  Kind kind = Kind::kBatch;
  uint64_t seq = 0;                         // kBatch only
  std::span<const std::byte> topic;         // kBatch in the topic layout; else empty
  std::span<const std::byte> payload;       // kBatch only
  ReplayStyle style = ReplayStyle::kVllm;   // the layout it was recognised as
};

// Classifies a message a DEALER received from a replay endpoint, whatever its layout:
//   ["", seq8, payload]            -> batch (kVllm; an empty payload with seq FF x8 -> end)
//   ["", topic, seq8, payload]     -> batch (kVllmTopic; seq FF x8 with empty payload -> end)
//   ["", "", FF x8]                -> end (kMooncake)
// A message without the leading empty delimiter (as a REQ socket receives it) is accepted too.
// Anything else is kMalformed, naming the frame count and the offending frame.
Result<ReplayReply> ParseReplayReply(std::span<const Frame> frames);
Result<ReplayReply> ParseReplayReply(std::span<const FrameView> frames);

}  // namespace kvindex

#endif  // KVINDEX_CODEC_FRAMING_H_
