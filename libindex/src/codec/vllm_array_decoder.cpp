// Positional events, vLLM and SGLang (msgspec array_like structs): ["BlockStored", hashes,
// parent, tokens, block_size, lora_id, (medium, lora_name | SGLang metadata, extra_keys, group_idx,
// kv_cache_spec_kind, kv_cache_spec_sliding_window, block_offsets)] and ["BlockRemoved", hashes,
// (medium, group_idx)]. Tokens may be SGLang EAGLE bigram pairs (sglang_decoder.cpp). The array's length tells the version: missing trailing fields take their defaults
// and items beyond the last known field are skipped.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

bool Decoder::DecodeStoredArray(uint32_t n, EventSlots& out) {
  if (n < 6) {
    return Fail(StatusCode::kMalformed, "BlockStored",
                "expected at least 6 elements (tag + 5 fields), got " + std::to_string(n));
  }
  // Built in place (a BlockStored is large); the caller drops it again if decoding fails.
  BlockStored& ev = out.Next<BlockStored>();
  if (!ReadHashList("block_hashes", ev.block_hashes)) return false;
  if (!ReadOptHash("parent_block_hash", ev.parent)) return false;
  if (!ReadStoredTokens("token_ids", ev.token_ids, ev.wire.eagle_next)) return false;
  uint32_t block_size = 0;
  if (!ReadU32("block_size", block_size)) return false;
  ev.scope.block_size = block_size;
  if (!ReadOptI64("lora_id", ev.scope.lora_id)) return false;
  // Scratch kept in the decoder (emptied here, not built per event).
  ExtraKeys& extra = extra_;
  extra.present = false;
  extra.blocks.clear();
  std::optional<std::string>& meta_salt = meta_salt_;
  meta_salt.reset();
  for (uint32_t i = 6; i < n; ++i) {
    bool ok = true;
    switch (i) {
      case 6:
        ok = ReadOptTier("medium", ev.tier, ev.wire.tier_spelling);
        break;
      case 7:
        if (r_.PeekType() == Type::kMap) {  // SGLang BlockStoredWithMetadata
          ok = ReadMetadata(meta_salt, ev.wire.session_id);
        } else {
          ok = ReadOptStr("lora_name", ev.scope.lora_name);
        }
        break;
      case 8:
        ok = ReadExtraKeys(extra);
        break;
      case 9:
        ok = ReadOptU32("group_idx", ev.scope.group);
        break;
      case 10:
        ok = ReadOptStr("kv_cache_spec_kind", ev.wire.spec_kind);
        break;
      case 11:
        ok = ReadOptI64("kv_cache_spec_sliding_window", ev.wire.sliding_window);
        break;
      case 12:
        ok = ReadBlockOffsets(ev.block_offsets);
        break;
      default:
        ok = Skip("BlockStored", kEventLevel);
        break;
    }
    if (!ok) return false;
  }
  if (meta_salt) ev.scope.salt = std::move(meta_salt);
  ResolveExtraKeys(extra, ev);
  return CheckBlockOffsets(ev);
}

bool Decoder::DecodeRemovedArray(uint32_t n, EventSlots& out) {
  if (n < 2) return Fail(StatusCode::kMalformed, "BlockRemoved", "missing block_hashes");
  BlockRemoved& ev = out.Next<BlockRemoved>();
  if (!ReadHashList("block_hashes", ev.block_hashes)) return false;
  for (uint32_t i = 2; i < n; ++i) {
    bool ok = true;
    switch (i) {
      case 2:
        ok = ReadOptTier("medium", ev.tier, ev.wire.tier_spelling);
        break;
      case 3:
        ok = ReadOptU32("group_idx", ev.scope.group);
        break;
      default:
        ok = Skip("BlockRemoved", kEventLevel);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace kvindex::codec_internal
