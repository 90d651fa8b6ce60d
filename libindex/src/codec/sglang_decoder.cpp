// SGLang's additions to the positional and map events: the metadata map {cache_salt, session_id}
// (BlockStoredWithMetadata, SGLang main) and EAGLE's bigram token_ids (a radix cache built for
// EAGLE-family speculative decoding keys pages by token pairs, and its events publish the pairs).
// The rest of an SGLang event reads as vLLM's (vllm_array_decoder.cpp, vllm_map_decoder.cpp);
// signed hashes mark its batches (Flags). vLLM's block_offsets list is read here too: both are
// per-event token layouts that the fast path leaves to this decoder.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

bool Decoder::ReadMetadata(std::optional<std::string>& salt, std::optional<std::string>& session) {
  if (r_.TryNil()) return true;
  uint32_t n;
  if (!r_.ReadMap(n)) return TypeFail("metadata", "map");
  flags_.sglang_metadata = true;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    if (r_.ReadStr(key)) {
      if (Eq(key, "cache_salt")) {
        if (!ReadOptStr("metadata.cache_salt", salt)) return false;
        continue;
      }
      if (Eq(key, "session_id")) {
        if (!ReadOptStr("metadata.session_id", session)) return false;
        continue;
      }
    } else if (!Skip("metadata", 5)) {
      return false;
    }
    if (!Skip("metadata", 5)) return false;
  }
  return true;
}

bool Decoder::ReadStoredTokens(std::string_view field, std::vector<TokenId>& out,
                               std::optional<TokenId>& next) {
  next.reset();
  if (r_.ReadTokenIds(out, kMaxTokensPerEvent)) return true;
  const uint8_t* const start = r_.position();
  uint32_t n = 0;
  if (!r_.ReadArray(n) || n == 0 || r_.PeekType() != Type::kArray) {
    r_.set_position(start);
    return ReadTokens(field, out);  // a flat list after all: its own error message
  }
  if (n > kMaxTokensPerEvent) {
    return Fail(StatusCode::kLimitExceeded, field,
                std::to_string(n) + " bigram pairs exceed the limit of " +
                    std::to_string(kMaxTokensPerEvent));
  }
  out.clear();
  out.resize(n);
  TokenId second = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t items = 0;
    if (!r_.ReadArray(items)) return TypeFail(field, "bigram pair [t, t_next]");
    if (items != 2) {
      return Fail(StatusCode::kMalformed, field,
                  "bigram pair " + std::to_string(i) + " has " + std::to_string(items) +
                      " items, expected 2");
    }
    TokenId pair[2];
    for (TokenId& t : pair) {
      uint64_t bits;
      bool negative;
      if (!r_.ReadInt(bits, negative)) return TypeFail(field, "int token id");
      if (negative || bits > UINT32_MAX) {
        return Fail(StatusCode::kMalformed, field,
                    "bigram pair " + std::to_string(i) + ": token id does not fit in 32 bits");
      }
      t = static_cast<TokenId>(bits);
    }
    if (i > 0 && pair[0] != second) {
      return Fail(StatusCode::kMalformed, field,
                  "bigram pair " + std::to_string(i) + " starts with " + std::to_string(pair[0]) +
                      " but pair " + std::to_string(i - 1) + " ends with " +
                      std::to_string(second));
    }
    out[i] = pair[0];
    second = pair[1];
  }
  next = second;
  flags_.bigram_tokens = true;
  return true;
}

bool Decoder::ReadBlockOffsets(std::vector<uint32_t>& out) {
  out.clear();
  if (r_.TryNil()) return true;
  uint32_t n;
  if (!r_.ReadArray(n)) return TypeFail("block_offsets", "array or nil");
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    if (!ReadU32("block_offsets", v)) return false;
    if (!out.empty() && v <= out.back()) {
      return Fail(StatusCode::kMalformed, "block_offsets",
                  "not strictly increasing at index " + std::to_string(i));
    }
    out.push_back(v);
  }
  flags_.block_offsets = true;
  return true;
}

}  // namespace kvindex::codec_internal
