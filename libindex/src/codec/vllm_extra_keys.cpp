// vLLM's extra_keys, in both vLLM eras (positional and map events): per block nil or a tuple of
// the LoRA name, (mm identifier, offset) pairs, the cache salt and prompt-embeds digests, or
// (newer vLLM) typed maps. Read as ExtraItems and resolved once the whole event is known.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

bool Decoder::ReadTypedExtraItem(std::vector<ExtraItem>& items, bool first) {
  uint32_t n;
  if (!r_.ReadMap(n)) return TypeFail("extra_keys", "map");
  std::string type, name, salt, hash_str;
  std::optional<int64_t> offset;
  std::span<const uint8_t> digest;
  bool has_digest = false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    if (!r_.ReadStr(key)) {
      if (!Skip("extra_keys", 6) || !Skip("extra_keys", 6)) return false;
      continue;
    }
    if (Eq(key, "type")) {
      if (!ReadStr("extra_keys.type", type)) return false;
    } else if (Eq(key, "name")) {
      if (!ReadStr("extra_keys.name", name)) return false;
    } else if (Eq(key, "salt")) {
      if (!ReadStr("extra_keys.salt", salt)) return false;
    } else if (Eq(key, "block_offset")) {
      int64_t v;
      if (!ReadI64("extra_keys.block_offset", v)) return false;
      offset = v;
    } else if (Eq(key, "hash")) {
      if (r_.PeekType() == Type::kBin) {
        if (!r_.ReadBin(digest)) return TypeFail("extra_keys.hash", "bin");
        has_digest = true;
      } else if (!ReadStr("extra_keys.hash", hash_str)) {
        return false;
      }
    } else if (!Skip("extra_keys", 6)) {
      return false;
    }
  }
  ExtraItem item{ExtraItem::Kind::kStr, first, {}, 0};
  if (type == "lora") {
    item.kind = ExtraItem::Kind::kLora;
    item.text = std::move(name);
  } else if (type == "cache_salt") {
    item.kind = ExtraItem::Kind::kSalt;
    item.text = std::move(salt);
  } else if (type == "mm") {
    item.kind = ExtraItem::Kind::kMm;
    item.text = has_digest ? EmbedsId(digest) : std::move(hash_str);
    item.offset = offset.value_or(0);
  } else if (type == "prompt_embeds") {
    if (!has_digest && hash_str.empty()) {
      return Fail(StatusCode::kMalformed, "extra_keys", "prompt_embeds without a hash");
    }
    item.kind = has_digest ? ExtraItem::Kind::kEmbeds : ExtraItem::Kind::kMm;
    item.text = has_digest ? EmbedsId(digest) : std::move(hash_str);
  } else {
    return true;  // "legacy" and unknown typed keys carry nothing kvindex uses
  }
  items.push_back(std::move(item));
  return true;
}

bool Decoder::ReadExtraKeys(ExtraKeys& extra) {
  if (r_.TryNil()) return true;
  uint32_t n;
  if (!r_.ReadArray(n)) return TypeFail("extra_keys", "array or nil");
  extra.present = true;
  extra.count = n;
  for (uint32_t b = 0; b < n; ++b) {
    const Type t = r_.PeekType();
    if (t == Type::kNil) {
      r_.TryNil();
      continue;
    }
    std::vector<ExtraItem> items;
    if (t == Type::kMap) {
      if (!ReadTypedExtraItem(items, true)) return false;
      if (!items.empty()) extra.blocks.emplace_back(b, std::move(items));
      continue;
    }
    uint32_t m;
    if (!r_.ReadArray(m)) return TypeFail("extra_keys", "array, map or nil per block");
    for (uint32_t i = 0; i < m; ++i) {
      const bool first = i == 0;
      const Type it = r_.PeekType();
      if (it == Type::kStr) {
        ExtraItem item{ExtraItem::Kind::kStr, first, {}, 0};
        if (!ReadStr("extra_keys", item.text)) return false;
        items.push_back(std::move(item));
      } else if (it == Type::kArray) {  // (mm identifier, offset in block)
        uint32_t k;
        if (!r_.ReadArray(k)) return TypeFail("extra_keys", "array");
        if (k < 2) return Fail(StatusCode::kMalformed, "extra_keys", "expected (id, offset)");
        ExtraItem item{ExtraItem::Kind::kMm, first, {}, 0};
        if (!ReadStr("extra_keys.mm_id", item.text)) return false;
        if (!ReadI64("extra_keys.mm_offset", item.offset)) return false;
        for (uint32_t j = 2; j < k; ++j) {
          if (!Skip("extra_keys", 6)) return false;
        }
        items.push_back(std::move(item));
      } else if (it == Type::kBin) {  // prompt-embeds digest
        std::span<const uint8_t> digest;
        if (!r_.ReadBin(digest)) return TypeFail("extra_keys", "bin");
        items.push_back(ExtraItem{ExtraItem::Kind::kEmbeds, first, EmbedsId(digest), 0});
      } else if (it == Type::kMap) {
        if (!ReadTypedExtraItem(items, first)) return false;
      } else if (!Skip("extra_keys", 5)) {  // older lora_int_id and anything unknown
        return false;
      }
    }
    if (!items.empty()) extra.blocks.emplace_back(b, std::move(items));
  }
  return true;
}

bool Decoder::ResolveExtraItems(ExtraKeys& extra, size_t blocks, BlockStored& ev,
                                std::vector<std::vector<MultimodalKey>>& mm_out) {
  std::optional<std::string> salt;
  bool any_mm = false;
  std::vector<std::vector<MultimodalKey>> mm(blocks);
  for (auto& [b, items] : extra.blocks) {
    for (ExtraItem& item : items) {
      switch (item.kind) {
        case ExtraItem::Kind::kStr:
          // A tuple starts with the LoRA name when the request has one; any other string is
          // the cache salt (docs/wire-formats.md "vLLM extra_keys").
          if (item.first && ev.scope.lora_name && item.text == *ev.scope.lora_name) break;
          if (!salt) salt = std::move(item.text);
          break;
        case ExtraItem::Kind::kLora:
          if (!ev.scope.lora_name) ev.scope.lora_name = std::move(item.text);
          break;
        case ExtraItem::Kind::kSalt:
          if (!salt) salt = std::move(item.text);
          break;
        case ExtraItem::Kind::kMm:
        case ExtraItem::Kind::kEmbeds:
          if (b < mm.size()) {
            mm[b].push_back(MultimodalKey{std::move(item.text), item.offset});
            any_mm = true;
          }
          break;
      }
    }
  }
  if (any_mm) {
    // Pairs first, digests last: the order vLLM writes them in (and the encoder does).
    for (auto& keys : mm) {
      std::stable_partition(keys.begin(), keys.end(),
                            [](const MultimodalKey& k) { return !codec_internal::IsEmbedsKey(k); });
    }
    mm_out = std::move(mm);
  }
  if (!salt || ev.scope.salt) return false;
  ev.scope.salt = std::move(salt);
  return true;
}

void Decoder::ResolveExtraKeys(ExtraKeys& extra, BlockStored& ev) {
  if (!extra.present) return;
  const bool salt = ResolveExtraItems(extra, ev.block_hashes.size(), ev, ev.multimodal);
  // The encoder writes extra_keys back for a salt or multimodal keys; anything else sent (nil
  // entries, the LoRA name alone) is remembered so that the bytes come back the same.
  ev.wire.extra_keys_sent = ev.multimodal.empty() && !salt;
}

}  // namespace kvindex::codec_internal
