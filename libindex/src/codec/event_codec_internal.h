// Helpers shared by the event decoder and encoder (private to libindex).
#ifndef KVINDEX_SRC_EVENT_CODEC_INTERNAL_H_
#define KVINDEX_SRC_EVENT_CODEC_INTERNAL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"

namespace kvindex::codec_internal {

// A vLLM prompt-embeds digest (a bin item of extra_keys) becomes the multimodal key
// "embeds:<lower-case hex of the digest>" with offset 0.
inline constexpr std::string_view kEmbedsPrefix = "embeds:";

// Parses a hash spelled as a string: decimal (optionally negative, two's complement) or 0x hex
// (1..16 digits). False when it is neither.
bool ParseHashString(std::string_view s, uint64_t& value);
// ParseHashString(), else XXH3_64 (seed 0) of the string's bytes.
uint64_t NormaliseHashString(std::string_view s);
// The last 8 bytes big-endian; shorter inputs are zero-extended (their big-endian value).
uint64_t NormaliseHashBytes(std::span<const uint8_t> bytes);
// "embeds:" + lower-case hex of `digest`.
std::string EmbedsId(std::span<const uint8_t> digest);
// True for a key the encoder writes back as a bin digest: "embeds:" + an even number of
// lower-case hex digits, offset 0. Within a block these keys come after the (id, offset) pairs.
bool IsEmbedsKey(const MultimodalKey& key);

// The decoder's fast path for the common vLLM positional batch (event_codec.cpp has the shape it
// takes). True: `batch` holds exactly what the general decoder gives for `payload`. False: the
// payload is outside that shape and `batch` holds an unspecified (valid) value.
// DecodeEventBatchInto() tries it first when no format is asked for.
bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch);

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_EVENT_CODEC_INTERNAL_H_
