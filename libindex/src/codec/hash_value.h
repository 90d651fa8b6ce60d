// Hash values as publishers spell them, normalised to the u64 kvindex keys blocks by: decimal or
// 0x-hex strings, bin digests, and the "embeds:" multimodal keys vLLM prompt-embeds digests become.
// The decoder reads hashes through these and the encoder writes embeds keys back as digests.
//
// Thread safety: pure functions; any thread.
#ifndef KVINDEX_SRC_CODEC_HASH_VALUE_H_
#define KVINDEX_SRC_CODEC_HASH_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvindex/core/event.h"

namespace kvindex::codec_internal {

// A vLLM prompt-embeds digest (a bin item of extra_keys) becomes the multimodal key
// "embeds:<lower-case hex of the digest>" with offset 0.
inline constexpr std::string_view kEmbedsPrefix = "embeds:";

// Parses a hash spelled as a string: decimal (optionally negative, two's complement) or 0x hex
// (1..16 digits) into `value`. False (and `value` unchanged) when it is neither.
bool ParseHashString(std::string_view s, uint64_t& value);
// ParseHashString(), else XXH3_64 (seed 0) of the string's bytes.
uint64_t NormaliseHashString(std::string_view s);
// The last 8 bytes big-endian; shorter inputs are zero-extended (their big-endian value).
// Inline: the decoder calls it for every bin hash.
inline uint64_t NormaliseHashBytes(std::span<const uint8_t> bytes) {
  uint64_t v = 0;
  const size_t from = bytes.size() > 8 ? bytes.size() - 8 : 0;
  for (size_t i = from; i < bytes.size(); ++i) v = (v << 8) | bytes[i];
  return v;
}
// "embeds:" + lower-case hex of `digest`.
std::string EmbedsId(std::span<const uint8_t> digest);
// True for a key the encoder writes back as a bin digest: "embeds:" + an even number of
// lower-case hex digits, offset 0. Within a block these keys come after the (id, offset) pairs.
bool IsEmbedsKey(const MultimodalKey& key);

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_HASH_VALUE_H_
