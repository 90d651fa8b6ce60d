// The event codec: every KV-event payload vLLM, SGLang and the Mooncake store have published,
// decoded into EventBatch, and EventBatch encoded back into each of those formats.
//
// A payload is the third frame of a `[topic, seq, payload]` message (framing.h): one msgpack
// document. The decoder detects the era per message (docs/wire-formats.md lists what it accepts);
// a FormatHint only breaks ties between eras whose bytes look alike (an early SGLang batch is a
// valid vLLM v0.9 batch). The encoder writes the bytes each publisher writes (msgspec's
// minimal-width ints, float64 timestamps, nil for absent optionals in array eras, omitted defaults
// in the map era), so `publish-fake` can stand in for every publisher.
//
// Thread safety: pure functions; distinct calls may run concurrently.
#ifndef KVINDEX_CODEC_EVENT_CODEC_H_
#define KVINDEX_CODEC_EVENT_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

namespace kvindex {

// The wire formats the encoder writes (and the decoder reports as detected).
enum class WireFormat : uint8_t {
  kVllmV09,       // "vllm-v0.9": [ts, events]; BlockStored [tag, hashes, parent, tokens, bs, lora_id]
  kVllm,          // "vllm": [ts, events, rank|nil]; 12-field BlockStored, [tag, hashes, medium, group]
  kVllmMap,       // "vllm-map": [ts, events, rank|nil]; events are tagged maps, defaults omitted
  kSglang,        // "sglang": positional, signed hashes; the shortest SGLang era carrying the batch
  kMooncake,      // "mooncake": RFC #1527, [timestamp_ms, [maps], rank], every key written
  kMooncakeSeed,  // "mooncake-seed": [ts, events] with BlockUpdateEvent / RemoveAllEvent /
                  // BlockStoreEvent (subscriber guide layout)
  kSglangEagle,   // "sglang-eagle": sglang with token_ids as EAGLE bigram pairs [[t0,t1],[t1,t2]..]
  kTrtllm,        // "trtllm": TensorRT-LLM's publisher, vllm-map's tagged maps, signed hashes
  kLmcache,       // "lmcache": LMCache's vLLM connector, vllm's layout (its events say CPU)
};

// Returns the format named "vllm-v0.9", "vllm", "vllm-map", "sglang", "mooncake",
// "mooncake-seed", "sglang-eagle", "trtllm" or "lmcache" (exact, lower-case); kInvalidArgument for
// anything else.
Result<WireFormat> ParseWireFormat(std::string_view name);

// Returns the name ParseWireFormat() accepts for `format`.
std::string_view WireFormatName(WireFormat format);

// What the source is configured as (`--source NAME=FORMAT@...`). The decoder detects the era per
// message; the hint only breaks ties (e.g. kSglang reports an early SGLang batch as kSglang
// rather than kVllmV09). It never makes a valid payload fail.
// kSglangEagle and kTrtllm name the publishers whose bytes otherwise read as kSglang / kVllm.
enum class FormatHint : uint8_t { kAuto, kVllm, kSglang, kMooncake, kSglangEagle, kTrtllm };

// Hard limits (docs/wire-formats.md "Failures and limits"). Exceeding one is kLimitExceeded.
inline constexpr size_t kMaxPayloadBytes = size_t{64} << 20;  // 64 MiB
inline constexpr int kMaxNesting = 32;                        // arrays/maps inside each other
inline constexpr size_t kMaxEventsPerBatch = size_t{1} << 20;  // 1 M (1,048,576)
inline constexpr size_t kMaxTokensPerEvent = size_t{16} << 20;  // 16 M (16,777,216)

// Decodes one payload.
//
// Returns the batch, or a non-ok Status when the *envelope* is unusable: kMalformed (empty or
// truncated input, not an array/map, no events list, bad timestamp, trailing bytes), kLimitExceeded
// (a hard limit above). Each event that fails on its own (unknown tag: kUnsupported; wrong shape,
// token id beyond u32, bad hash: kMalformed; over 16 M tokens: kLimitExceeded) is reported in
// EventBatch::errors with its index and the other events are kept. Messages name the event, the
// byte offset and the field, e.g. "event 3 (byte 812): token_ids: expected array, got str".
//
// EventError::index is the event's position in the payload's events array. A Mooncake seed
// BlockStoreEvent decodes into two events: a BlockStored (wire.object_key = its key) followed by
// the StoreUpdate of its replicas. A batch holds one publisher family (vLLM/SGLang, Mooncake RFC,
// Mooncake seed; clears are neutral): an event of another family than the first fails alone with
// kUnsupported.
//
// `detected`, when given, receives the format whose encoder reproduces this batch (the era of
// the message, narrowed by `hint`); for an envelope failure it is left unchanged.
// `payload` is only borrowed for the call.
Result<EventBatch> DecodeEventBatch(std::span<const std::byte> payload,
                                    FormatHint hint = FormatHint::kAuto,
                                    WireFormat* detected = nullptr);

// Decodes one payload into `batch`, exactly as DecodeEventBatch() does, reusing what `batch`
// already holds: its vectors keep their capacity and events of the same kind are emptied in place,
// so a stream of similar batches decoded into one EventBatch allocates nothing once warm (the
// live and capture-replay paths do this). Returns DecodeEventBatch()'s Status; on failure `batch`
// holds an unspecified (valid) value.
Status DecodeEventBatchInto(std::span<const std::byte> payload, EventBatch& batch,
                            FormatHint hint = FormatHint::kAuto, WireFormat* detected = nullptr);

// Encodes `batch` in `format` into `out`. `out` is cleared first (its capacity is reused), so on
// success it holds exactly one payload. `batch.errors` is ignored.
//
// Fails with kUnsupported when the batch holds something `format` cannot carry (e.g. a tier in
// vllm-v0.9, a StoreUpdate outside mooncake-seed, a Mooncake key in a vLLM format) — nothing is
// ever dropped silently — and kInvalidArgument when a field the format requires is missing (a
// vLLM/SGLang BlockStored without block_size). On failure `out` is unspecified.
Status EncodeEventBatch(const EventBatch& batch, WireFormat format, std::vector<std::byte>& out);

// Returns ok when EncodeEventBatch(batch, format, ...) would succeed, else its Status.
Status CheckEncodable(const EventBatch& batch, WireFormat format);

}  // namespace kvindex

#endif  // KVINDEX_CODEC_EVENT_CODEC_H_
