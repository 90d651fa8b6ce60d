// Tagged map events: vLLM >= 0.24 and SGLang main ({"type": "BlockStored", ...}, defaults
// omitted), and Mooncake RFC #1527 maps, which share the key loop because a map's family is known
// only after its last key (map_event_fields.h). The RFC fields are applied in
// mooncake_rfc_decoder.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

#include "decoder.h"
#include "map_event_fields.h"

namespace kvindex::codec_internal {

bool Decoder::DecodeMapEvent(EventSlots& out) {
  uint32_t n;
  if (!r_.ReadMap(n)) return TypeFail("event", "map");
  flags_.any_map_event = true;
  MapFields f;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    if (!r_.ReadStr(key)) {  // a non-string key: skip it and its value
      if (!Skip("event key", kEventLevel) || !Skip("event", kEventLevel)) return false;
      continue;
    }
    bool ok = true;
    // One line per key: the switch reads as the key table it is.
    // clang-format off
    switch (LookupMapKey(key)) {
      case MapKey::kType: ok = ReadOptStr("type", f.type); break;
      case MapKey::kEventType: ok = ReadOptStr("event_type", f.event_type); break;
      case MapKey::kBlockHashes:
        f.has_block_hashes = !r_.TryNil();
        if (f.has_block_hashes) ok = ReadHashList("block_hashes", f.block_hashes);
        break;
      case MapKey::kSeqHashes:
        f.has_seq_hashes = !r_.TryNil();
        if (f.has_seq_hashes) ok = ReadHashList("seq_hashes", f.seq_hashes);
        flags_.any_rfc_event = true;
        break;
      case MapKey::kParentBlockHash:
        ok = ReadOptHash("parent_block_hash", f.parent_block_hash);
        break;
      case MapKey::kParentHash: ok = ReadOptHash("parent_hash", f.parent_hash); break;
      case MapKey::kTokenIds:
        f.token_ids.clear();
        f.eagle_next.reset();
        if (!r_.TryNil()) ok = ReadStoredTokens("token_ids", f.token_ids, f.eagle_next);
        break;
      case MapKey::kBlockOffsets: ok = ReadBlockOffsets(f.block_offsets); break;
      case MapKey::kMmKeys: ok = ReadMmKeys(f.mm_keys, f.mm_segments); break;
      case MapKey::kSkippedParent:
        ok = ReadOptHash("skipped_parent_block_hash", f.skipped_parent);
        break;
      case MapKey::kSkippedTokens:
        f.has_skipped_tokens = !r_.TryNil();
        if (f.has_skipped_tokens) ok = ReadTokens("skipped_token_ids", f.skipped_tokens);
        break;
      case MapKey::kSkippedExtraKeys:
        f.skipped_extra = ExtraKeys{};
        ok = ReadExtraKeys(f.skipped_extra);
        break;
      case MapKey::kBlockSize: ok = ReadOptU32("block_size", f.block_size); break;
      case MapKey::kLoraId: ok = ReadOptI64("lora_id", f.lora_id); break;
      case MapKey::kMedium: ok = ReadOptTier("medium", f.tier, f.tier_spelling); break;
      case MapKey::kLoraName: ok = ReadOptStr("lora_name", f.lora_name); break;
      case MapKey::kExtraKeys:
        f.extra = ExtraKeys{};
        ok = ReadExtraKeys(f.extra);
        break;
      case MapKey::kGroupIdx: ok = ReadOptU32("group_idx", f.group_idx); break;
      case MapKey::kGroupId: ok = ReadOptU32("group_id", f.group_id); break;
      case MapKey::kSpecKind: ok = ReadOptStr("kv_cache_spec_kind", f.spec_kind); break;
      case MapKey::kSlidingWindow:
        ok = ReadOptI64("kv_cache_spec_sliding_window", f.sliding_window);
        break;
      case MapKey::kLocality: ok = ReadOptStr("locality", f.locality); break;
      case MapKey::kOwnership: ok = ReadOptStr("ownership", f.ownership); break;
      case MapKey::kSessionId: ok = ReadOptStr("session_id", f.session_id); break;
      case MapKey::kMetadata: ok = ReadMetadata(f.meta_salt, f.meta_session); break;
      case MapKey::kEventId: ok = ReadOptU64("event_id", f.event_id); break;
      case MapKey::kTimestamp: ok = ReadOptI64("timestamp", f.timestamp); break;
      case MapKey::kModelName: ok = ReadOptStr("model_name", f.model); break;
      case MapKey::kAdditionalSalt: ok = ReadOptStr("additional_salt", f.salt); break;
      case MapKey::kTenantId: ok = ReadOptTenant("tenant_id", f.tenant); break;
      case MapKey::kBackendId: ok = ReadOptStr("backend_id", f.backend_id); break;
      case MapKey::kDpRank: ok = ReadRank("dp_rank", f.dp_rank); break;
      case MapKey::kObjectKey: ok = ReadOptStr("object_key", f.object_key); break;
      case MapKey::kBaseBlockIdx: ok = ReadOptU64("base_block_idx", f.base_block_idx); break;
      case MapKey::kUnknown: ok = Skip(key, kEventLevel); break;
    }
    // clang-format on
    if (!ok) return false;
  }
  if (f.event_type) flags_.any_rfc_event = true;
  const bool rfc = f.event_type.has_value() || f.has_seq_hashes;
  if (!BuildMapEvent(f, out, rfc)) return false;
  if (rfc) {
    event_family_ = Family::kRfc;
  } else if (!std::holds_alternative<AllCleared>(out.back())) {
    event_family_ = Family::kEngine;
  }
  return true;
}

bool Decoder::ReadMmKeys(std::vector<std::vector<MultimodalKey>>& out, bool& any) {
  any = false;
  out.clear();
  if (r_.TryNil()) return true;
  uint32_t n;
  if (!r_.ReadArray(n)) return TypeFail("mm_keys", "array or nil");
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<MultimodalKey>& keys = out.emplace_back();
    if (r_.TryNil()) continue;
    uint32_t m;
    if (!r_.ReadArray(m)) return TypeFail("mm_keys", "array or nil");
    for (uint32_t j = 0; j < m; ++j) {
      // {"type": "mm_key", "hash": str, "start_offset": int, "uuid": str?}; the uuid is not kept.
      uint32_t k;
      if (!r_.ReadMap(k)) return TypeFail("mm_keys", "map per segment");
      std::optional<std::string> hash;
      std::optional<int64_t> offset;
      for (uint32_t f = 0; f < k; ++f) {
        std::string_view key;
        if (!r_.ReadStr(key)) return TypeFail("mm_keys", "string keys");
        if (Eq(key, "hash")) {
          if (!ReadOptStr("mm_keys.hash", hash)) return false;
        } else if (Eq(key, "start_offset")) {
          int64_t v = 0;
          if (!ReadI64("mm_keys.start_offset", v)) return false;
          offset = v;
        } else if (!Skip("mm_keys", kEventLevel + 3)) {
          return false;
        }
      }
      if (!hash || !offset) {
        return Fail(StatusCode::kMalformed, "mm_keys", "segment without hash or start_offset");
      }
      keys.push_back(MultimodalKey{std::move(*hash), *offset});
      any = true;
    }
  }
  return true;
}

bool Decoder::BuildMapEvent(MapFields& f, EventSlots& out, bool rfc) {
  enum class Kind { kStored, kRemoved, kCleared, kUnknown } kind = Kind::kUnknown;
  std::string_view tag;
  // RFC #1527: event_type wins over the legacy `type` alias.
  if (f.event_type) {
    tag = *f.event_type;
  } else if (f.type) {
    tag = *f.type;
  } else {
    return Fail(StatusCode::kMalformed, "type", "missing (neither event_type nor type)");
  }
  if (Eq(tag, "stored") || Eq(tag, "BlockStored")) {
    kind = Kind::kStored;
  } else if (Eq(tag, "removed") || Eq(tag, "BlockRemoved")) {
    kind = Kind::kRemoved;
  } else if (Eq(tag, "cleared") || Eq(tag, "AllBlocksCleared")) {
    kind = Kind::kCleared;
  }
  if (kind == Kind::kUnknown) {
    return Fail(StatusCode::kUnsupported, f.event_type ? "event_type" : "type",
                "unknown event '" + std::string(tag) + "'");
  }
  if (!rfc && kind == Kind::kCleared) {
    out.push_back(AllCleared{});
    return true;
  }
  const bool has_hashes = f.has_seq_hashes || f.has_block_hashes;
  std::vector<EngineHash>& hashes = f.has_seq_hashes ? f.seq_hashes : f.block_hashes;
  if (kind != Kind::kCleared && !has_hashes) {
    return Fail(StatusCode::kMalformed, "block_hashes", "missing");
  }
  // vLLM and SGLang always send block_size; only RFC #1527 events may leave it out.
  if (kind == Kind::kStored && !rfc && !f.block_size) {
    return Fail(StatusCode::kMalformed, "block_size", "missing");
  }
  // The event is built in its slot; scope and wire fields move straight from the map's fields.
  EventScopeFields* scope;
  WireDetails* wire;
  BlockStored* stored = nullptr;
  if (kind == Kind::kStored) {
    stored = &out.Next<BlockStored>();
    stored->block_hashes = std::move(hashes);
    stored->parent = f.parent_hash ? f.parent_hash : f.parent_block_hash;
    stored->token_ids = std::move(f.token_ids);
    stored->wire.eagle_next = f.eagle_next;
    stored->block_offsets = std::move(f.block_offsets);
    stored->tier = std::move(f.tier);
    scope = &stored->scope;
    wire = &stored->wire;
  } else if (kind == Kind::kRemoved) {
    BlockRemoved& ev = out.Next<BlockRemoved>();
    ev.block_hashes = std::move(hashes);
    ev.tier = std::move(f.tier);
    scope = &ev.scope;
    wire = &ev.wire;
  } else {
    AllCleared& ev = out.Next<AllCleared>();
    ev.tier = std::move(f.tier);
    scope = &ev.scope;
    wire = &ev.wire;
  }
  if (rfc) {
    ApplyRfcMapFields(f, *scope, *wire);
  } else if (kind == Kind::kRemoved) {
    scope->group = f.group_idx;
    wire->locality = std::move(f.locality);
    wire->ownership = std::move(f.ownership);
  } else {
    scope->salt = std::move(f.meta_salt);
    scope->lora_name = std::move(f.lora_name);
    scope->lora_id = f.lora_id;
    scope->block_size = f.block_size;
    scope->group = f.group_idx;
    wire->spec_kind = std::move(f.spec_kind);
    wire->sliding_window = f.sliding_window;
    wire->locality = std::move(f.locality);
    wire->ownership = std::move(f.ownership);
    wire->session_id = f.session_id ? std::move(f.session_id) : std::move(f.meta_session);
  }
  wire->tier_spelling = std::move(f.tier_spelling);
  if (stored != nullptr) {
    ResolveExtraKeys(f.extra, *stored);
    if (!rfc && !ApplyMmKeys(f, *stored)) return false;
    if (!rfc && !ApplySkippedContext(f, *stored)) return false;
    return CheckBlockOffsets(*stored);
  }
  return true;
}

bool Decoder::ApplyMmKeys(MapFields& f, BlockStored& ev) {
  if (!f.mm_segments) return true;  // nil, or only empty lists: nothing to key
  if (!ev.multimodal.empty()) {
    return Fail(StatusCode::kMalformed, "mm_keys", "sent together with multimodal extra_keys");
  }
  if (f.mm_keys.size() != ev.block_hashes.size()) {
    return Fail(StatusCode::kMalformed, "mm_keys",
                std::to_string(f.mm_keys.size()) + " lists for " +
                    std::to_string(ev.block_hashes.size()) + " block hashes");
  }
  ev.multimodal = std::move(f.mm_keys);
  ev.wire.mm_keys = true;
  // extra_keys, when sent, no longer go back with the multimodal keys.
  ev.wire.extra_keys_sent = f.extra.present && !(ev.scope.salt && !ev.block_hashes.empty());
  return true;
}

bool Decoder::ApplySkippedContext(MapFields& f, BlockStored& ev) {
  const bool any = f.has_skipped_tokens || f.skipped_parent || f.skipped_extra.present;
  if (!any) return true;
  if (!f.has_skipped_tokens || f.skipped_tokens.empty()) {
    return Fail(StatusCode::kMalformed, "skipped_token_ids",
                "missing while skipped_parent_block_hash or skipped_extra_keys is set");
  }
  if (!ev.block_offsets.empty()) {
    return Fail(StatusCode::kMalformed, "skipped_token_ids", "sent together with block_offsets");
  }
  if (ev.wire.eagle_next || ev.wire.mm_keys) {
    // Neither SGLang's pairs nor TensorRT-LLM's segments come with vLLM's skipped context.
    return Fail(StatusCode::kUnsupported, "skipped_token_ids",
                ev.wire.mm_keys ? "skipped context with mm_keys"
                                : "skipped context on EAGLE bigram token_ids");
  }
  const uint32_t bs = *ev.scope.block_size;  // BuildMapEvent required it
  const size_t skipped = f.skipped_tokens.size();
  if (bs == 0 || skipped % bs != 0) {
    // vLLM sends a span ending inside a block only for a partial block (hash block size below the
    // group's), which kvindex does not index.
    return Fail(StatusCode::kUnsupported, "skipped_token_ids",
                std::to_string(skipped) + " tokens are not whole blocks of " + std::to_string(bs));
  }
  const size_t chunks = skipped / bs;
  if (ev.block_hashes.empty() || ev.token_ids.size() != ev.block_hashes.size() * bs) {
    return Fail(StatusCode::kMalformed, "token_ids",
                std::to_string(ev.token_ids.size()) + " tokens for " +
                    std::to_string(ev.block_hashes.size()) + " blocks of " + std::to_string(bs) +
                    " after skipped context");
  }
  if (f.skipped_extra.present && f.skipped_extra.count != chunks) {
    return Fail(StatusCode::kMalformed, "skipped_extra_keys",
                std::to_string(f.skipped_extra.count) + " entries for " + std::to_string(chunks) +
                    " skipped blocks");
  }
  // The run's blocks are chunks `chunks`.. of the skipped tokens followed by the run's own.
  ev.wire.skipped_context = true;
  ev.wire.run_parent = ev.parent;
  ev.parent = f.skipped_parent;
  ev.token_ids.insert(ev.token_ids.begin(), f.skipped_tokens.begin(), f.skipped_tokens.end());
  ev.block_offsets.resize(ev.block_hashes.size());
  for (size_t i = 0; i < ev.block_offsets.size(); ++i) {
    ev.block_offsets[i] = static_cast<uint32_t>(chunks + i);
  }
  if (f.skipped_extra.present) {
    ResolveExtraItems(f.skipped_extra, chunks, ev, ev.skipped_multimodal);
  }
  // In this form the salt travels in skipped_extra_keys, so the run's extra_keys are written back
  // whenever they were sent.
  ev.wire.extra_keys_sent = f.extra.present && ev.multimodal.empty();
  return true;
}

}  // namespace kvindex::codec_internal
