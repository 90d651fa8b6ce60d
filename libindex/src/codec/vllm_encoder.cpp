// vLLM's formats: the positional events of vllm-v0.9 and vllm (12 fields, nil for absent
// optionals) and the tagged map events of vllm-map (defaults omitted). extra_keys carry the salt
// and the multimodal keys per block, prompt-embeds keys going back to bin digests.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

#include "event_writer.h"
#include "hash_value.h"

namespace kvindex::codec_internal {
namespace {

void WriteEmbeds(Writer& w, const std::string& id) {
  std::vector<uint8_t> digest;
  digest.reserve((id.size() - kEmbedsPrefix.size()) / 2);
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = kEmbedsPrefix.size(); i + 1 < id.size(); i += 2) {
    digest.push_back(static_cast<uint8_t>((nibble(id[i]) << 4) | nibble(id[i + 1])));
  }
  w.Bin(digest);
}

// In vLLM's skipped-context form the salt travels in skipped_extra_keys (vLLM salts the request's
// first block, which is a skipped one whenever the run does not start at the root).
bool SaltInExtraKeys(const BlockStored& ev) {
  return ev.scope.salt && !ev.block_hashes.empty() && !ev.wire.skipped_context;
}
// The multimodal keys extra_keys carry: none when they go in TensorRT-LLM's mm_keys.
const std::vector<std::vector<MultimodalKey>>& ExtraMultimodal(const BlockStored& ev) {
  static const std::vector<std::vector<MultimodalKey>> kNone;
  return ev.wire.mm_keys ? kNone : ev.multimodal;
}
bool HasExtraKeys(const BlockStored& ev) {
  return SaltInExtraKeys(ev) || !ExtraMultimodal(ev).empty() || ev.wire.extra_keys_sent;
}
// A salt on an event without blocks cannot travel in extra_keys; vllm-map then sends it as
// SGLang's metadata map (a kvindex choice: vLLM itself never salts an empty event).
bool SaltInMetadata(const BlockStored& ev) { return ev.scope.salt && ev.block_hashes.empty(); }

// vLLM's raw extra_keys for `blocks` blocks: per block nil or (lora_name?, (mm_id, offset)...,
// cache_salt on the first block when `salt`); prompt-embeds keys go back to bin digests.
void WriteKeyList(Writer& w, size_t blocks, const BlockStored& ev,
                  const std::vector<std::vector<MultimodalKey>>& multimodal, bool salt_first) {
  w.Array(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const bool salt = b == 0 && salt_first;
    const size_t mm = b < multimodal.size() ? multimodal[b].size() : 0;
    const size_t count = (ev.scope.lora_name ? 1 : 0) + mm + (salt ? 1 : 0);
    if (count == 0) {
      w.Nil();
      continue;
    }
    w.Array(count);
    if (ev.scope.lora_name) w.Str(*ev.scope.lora_name);
    for (size_t k = 0; k < mm; ++k) {
      const MultimodalKey& key = multimodal[b][k];
      if (IsEmbedsKey(key)) continue;
      w.Array(2);
      w.Str(key.id);
      w.Int(key.offset);
    }
    if (salt) w.Str(*ev.scope.salt);
    for (size_t k = 0; k < mm; ++k) {
      const MultimodalKey& key = multimodal[b][k];
      if (IsEmbedsKey(key)) WriteEmbeds(w, key.id);
    }
  }
}
void WriteExtraKeys(Writer& w, const BlockStored& ev) {
  WriteKeyList(w, ev.block_hashes.size(), ev, ExtraMultimodal(ev), SaltInExtraKeys(ev));
}

// TensorRT-LLM's mm_keys: per block a list of {"type": "mm_key", "hash", "start_offset"}.
void WriteMmKeys(Writer& w, const BlockStored& ev) {
  w.Array(ev.multimodal.size());
  for (const auto& keys : ev.multimodal) {
    w.Array(keys.size());
    for (const MultimodalKey& key : keys) {
      w.Map(3);
      w.Str("type");
      w.Str("mm_key");
      w.Str("hash");
      w.Str(key.id);
      w.Str("start_offset");
      w.Int(key.offset);
    }
  }
}

// The chunks of a skipped-context event's token_ids that came as skipped_token_ids.
size_t SkippedTokens(const BlockStored& ev) {
  return ev.wire.skipped_context ? size_t{ev.block_offsets.front()} * *ev.scope.block_size : 0;
}

}  // namespace

void WriteVllmArrayEvent(Writer& w, const Event& event, bool v09) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const bool offsets = !s->block_offsets.empty();
    w.Array(v09 ? 6 : offsets ? 13 : 12);
    w.Str("BlockStored");
    WriteHashes(w, s->block_hashes, false);
    WriteOptHash(w, s->parent, false);
    WriteTokens(w, s->token_ids);
    w.Uint(*s->scope.block_size);
    WriteOptInt(w, s->scope.lora_id);
    if (v09) return;
    WriteMedium(w, s->tier, s->wire.tier_spelling);
    WriteOptStr(w, s->scope.lora_name);
    if (HasExtraKeys(*s)) {
      WriteExtraKeys(w, *s);
    } else {
      w.Nil();
    }
    WriteOptUint(w, s->scope.group);
    WriteOptStr(w, s->wire.spec_kind);
    WriteOptInt(w, s->wire.sliding_window);
    if (offsets) WriteBlockOffsets(w, s->block_offsets);
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    w.Array(v09 ? 2 : 4);
    w.Str("BlockRemoved");
    WriteHashes(w, r->block_hashes, false);
    if (v09) return;
    WriteMedium(w, r->tier, r->wire.tier_spelling);
    WriteOptUint(w, r->scope.group);
  } else {
    w.Array(1);
    w.Str("AllBlocksCleared");
  }
}

void WriteVllmMapEvent(Writer& w, const Event& event, bool signed_hashes) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const bool extra = HasExtraKeys(*s);
    const bool skipped = s->wire.skipped_context;
    const bool offsets = !s->block_offsets.empty() && !skipped;
    const size_t n = 8 + (extra ? 1 : 0) + (s->scope.group ? 1 : 0) + (s->wire.spec_kind ? 1 : 0) +
                     (s->wire.sliding_window ? 1 : 0) + (s->wire.locality ? 1 : 0) +
                     (s->wire.ownership ? 1 : 0) + (s->wire.session_id ? 1 : 0) +
                     (SaltInMetadata(*s) ? 1 : 0) + (offsets ? 1 : 0) +
                     (skipped ? (s->parent ? 3 : 2) : 0) + (s->wire.mm_keys ? 1 : 0);
    const size_t split = SkippedTokens(*s);
    const std::span<const TokenId> tokens(s->token_ids);
    w.Map(n);
    w.Str("type");
    w.Str("BlockStored");
    w.Str("block_hashes");
    WriteHashes(w, s->block_hashes, signed_hashes);
    w.Str("parent_block_hash");
    WriteOptHash(w, skipped ? s->wire.run_parent : s->parent, signed_hashes);
    w.Str("token_ids");
    if (skipped) {
      WriteTokens(w, tokens.subspan(split));
    } else {
      WriteStoredTokens(w, *s);
    }
    w.Str("block_size");
    w.Uint(*s->scope.block_size);
    w.Str("lora_id");
    WriteOptInt(w, s->scope.lora_id);
    w.Str("medium");
    WriteMedium(w, s->tier, s->wire.tier_spelling);
    w.Str("lora_name");
    WriteOptStr(w, s->scope.lora_name);
    if (extra) {
      w.Str("extra_keys");
      WriteExtraKeys(w, *s);
    }
    if (s->scope.group) {
      w.Str("group_idx");
      w.Uint(*s->scope.group);
    }
    if (s->wire.spec_kind) {
      w.Str("kv_cache_spec_kind");
      w.Str(*s->wire.spec_kind);
    }
    if (s->wire.sliding_window) {
      w.Str("kv_cache_spec_sliding_window");
      w.Int(*s->wire.sliding_window);
    }
    if (s->wire.locality) {
      w.Str("locality");
      w.Str(*s->wire.locality);
    }
    if (s->wire.mm_keys) {
      w.Str("mm_keys");
      WriteMmKeys(w, *s);
    }
    if (s->wire.ownership) {
      w.Str("ownership");
      w.Str(*s->wire.ownership);
    }
    if (s->wire.session_id) {
      w.Str("session_id");
      w.Str(*s->wire.session_id);
    }
    if (skipped) {
      if (s->parent) {
        w.Str("skipped_parent_block_hash");
        WriteOptHash(w, s->parent, signed_hashes);
      }
      w.Str("skipped_token_ids");
      WriteTokens(w, tokens.first(split));
      w.Str("skipped_extra_keys");
      WriteKeyList(w, s->block_offsets.front(), *s, s->skipped_multimodal,
                   s->scope.salt.has_value());
    }
    if (SaltInMetadata(*s)) {
      w.Str("metadata");
      w.Map(1);
      w.Str("cache_salt");
      w.Str(*s->scope.salt);
    }
    if (offsets) {
      w.Str("block_offsets");
      WriteBlockOffsets(w, s->block_offsets);
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    const size_t n =
        3 + (r->scope.group ? 1 : 0) + (r->wire.locality ? 1 : 0) + (r->wire.ownership ? 1 : 0);
    w.Map(n);
    w.Str("type");
    w.Str("BlockRemoved");
    w.Str("block_hashes");
    WriteHashes(w, r->block_hashes, signed_hashes);
    w.Str("medium");
    WriteMedium(w, r->tier, r->wire.tier_spelling);
    if (r->scope.group) {
      w.Str("group_idx");
      w.Uint(*r->scope.group);
    }
    if (r->wire.locality) {
      w.Str("locality");
      w.Str(*r->wire.locality);
    }
    if (r->wire.ownership) {
      w.Str("ownership");
      w.Str(*r->wire.ownership);
    }
  } else {
    w.Map(1);
    w.Str("type");
    w.Str("AllBlocksCleared");
  }
}

}  // namespace kvindex::codec_internal
