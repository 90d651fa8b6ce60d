// The event encoder: EventBatch -> the bytes each publisher writes (event_codec.h).
//
// Byte rules (msgspec, checked on the captures in vllm-wire.md §3): array_like structs write every
// field of their version (nil for None); map structs omit fields that hold their default; ints use
// the narrowest form and non-negative values are always unsigned; ts is float64. SGLang hashes are
// signed int64. Mooncake RFC #1527 maps carry every key of the store publisher (nil when absent).
//
// Before writing, CheckEncodable() refuses a batch holding anything the format cannot carry, so
// decode(encode(batch)) == batch whenever encoding succeeds.
#include <cmath>
#include <cstdio>
#include <string>

#include "hash_value.h"
#include "kvindex/codec/event_codec.h"
#include "msgpack_writer.h"

namespace kvindex {
namespace {

using codec_internal::IsEmbedsKey;
using codec_internal::kEmbedsPrefix;
using msgpack_writer::Writer;

// ---------------------------------------------------------------------------------------------
// What each format can carry.

Status Cannot(size_t index, std::string_view what, WireFormat format) {
  return Status::Unsupported("event " + std::to_string(index) + ": " + std::string(what) +
                             " cannot be carried by " + std::string(WireFormatName(format)));
}

// Fields of EventScopeFields / WireDetails, as bits, so each format states what it allows.
enum Field : uint32_t {
  kModel = 1u << 0, kTenant = 1u << 1, kSalt = 1u << 2, kLoraName = 1u << 3, kLoraId = 1u << 4,
  kBlockSize = 1u << 5, kGroup = 1u << 6, kDpRank = 1u << 7, kEventId = 1u << 8,
  kTimestamp = 1u << 9, kBackendId = 1u << 10, kBaseBlockIdx = 1u << 11, kObjectKey = 1u << 12,
  kSpecKind = 1u << 13, kSlidingWindow = 1u << 14, kLocality = 1u << 15, kOwnership = 1u << 16,
  kSessionId = 1u << 17, kTier = 1u << 18, kMultimodal = 1u << 19,
};

struct FieldName {
  uint32_t bit;
  const char* name;
};
constexpr FieldName kFieldNames[] = {
    {kModel, "model"}, {kTenant, "tenant"}, {kSalt, "salt"}, {kLoraName, "lora_name"},
    {kLoraId, "lora_id"}, {kBlockSize, "block_size"}, {kGroup, "group"}, {kDpRank, "dp_rank"},
    {kEventId, "event_id"}, {kTimestamp, "timestamp"}, {kBackendId, "backend_id"},
    {kBaseBlockIdx, "base_block_idx"}, {kObjectKey, "object_key"}, {kSpecKind, "spec_kind"},
    {kSlidingWindow, "sliding_window"}, {kLocality, "locality"}, {kOwnership, "ownership"},
    {kSessionId, "session_id"}, {kTier, "tier"}, {kMultimodal, "multimodal keys"},
};

uint32_t PresentFields(const EventScopeFields& s, const WireDetails& w,
                       const std::optional<Tier>& tier) {
  uint32_t bits = 0;
  if (s.model) bits |= kModel;
  if (s.tenant) bits |= kTenant;
  if (s.salt) bits |= kSalt;
  if (s.lora_name) bits |= kLoraName;
  if (s.lora_id) bits |= kLoraId;
  if (s.block_size) bits |= kBlockSize;
  if (s.group) bits |= kGroup;
  if (s.dp_rank) bits |= kDpRank;
  if (w.event_id) bits |= kEventId;
  if (w.timestamp_ms) bits |= kTimestamp;
  if (w.backend_id) bits |= kBackendId;
  if (w.base_block_idx) bits |= kBaseBlockIdx;
  if (w.object_key) bits |= kObjectKey;
  if (w.spec_kind) bits |= kSpecKind;
  if (w.sliding_window) bits |= kSlidingWindow;
  if (w.locality) bits |= kLocality;
  if (w.ownership) bits |= kOwnership;
  if (w.session_id) bits |= kSessionId;
  if (tier) bits |= kTier;
  return bits;
}

Status CheckAllowed(size_t index, uint32_t present, uint32_t allowed, WireFormat format) {
  const uint32_t extra = present & ~allowed;
  if (extra == 0) return Status::Ok();
  for (const FieldName& f : kFieldNames) {
    if (extra & f.bit) return Cannot(index, f.name, format);
  }
  return Cannot(index, "a field", format);
}

// A tier spelling must name its tier and differ from the tier's own name (event.h).
Status CheckSpelling(size_t index, const std::optional<Tier>& tier,
                     const std::optional<std::string>& spelling) {
  if (!spelling) return Status::Ok();
  if (!tier || ParseTier(*spelling) != *tier || *spelling == tier->name()) {
    return Status::InvalidArgument("event " + std::to_string(index) + ": tier_spelling '" +
                                   *spelling + "' does not spell the event's tier");
  }
  return Status::Ok();
}

// extra_keys hold one entry per block: multimodal keys need one list per block, a salt needs a
// first block, and an all-empty list would decode as no keys.
Status CheckExtraKeys(size_t index, const BlockStored& ev, bool salt_elsewhere) {
  if (ev.scope.salt && ev.block_hashes.empty() && !salt_elsewhere) {
    return Status::InvalidArgument("event " + std::to_string(index) +
                                   ": a salt needs at least one block to travel in extra_keys");
  }
  if (ev.multimodal.empty()) return Status::Ok();
  if (ev.multimodal.size() != ev.block_hashes.size()) {
    return Status::InvalidArgument("event " + std::to_string(index) + ": " +
                                   std::to_string(ev.multimodal.size()) +
                                   " multimodal lists for " +
                                   std::to_string(ev.block_hashes.size()) + " blocks");
  }
  bool any = false;
  for (const auto& keys : ev.multimodal) {
    any |= !keys.empty();
    bool seen_embeds = false;
    for (const MultimodalKey& key : keys) {
      const bool embeds = IsEmbedsKey(key);
      if (seen_embeds && !embeds) {
        return Status::InvalidArgument("event " + std::to_string(index) +
                                       ": a multimodal key after a prompt-embeds digest");
      }
      seen_embeds |= embeds;
    }
  }
  if (any) return Status::Ok();
  return Status::InvalidArgument("event " + std::to_string(index) +
                                 ": multimodal lists are all empty (use an empty vector)");
}

Status RequireBlockSize(size_t index, const BlockStored& ev, WireFormat format) {
  if (ev.scope.block_size) return Status::Ok();
  return Status::InvalidArgument("event " + std::to_string(index) + ": " +
                                 std::string(WireFormatName(format)) +
                                 " BlockStored needs block_size");
}

constexpr uint32_t kRfcOnly = kModel | kTenant | kDpRank | kEventId | kTimestamp | kBackendId |
                              kBaseBlockIdx | kObjectKey;

Status CheckEvent(const EventBatch& batch, size_t i, WireFormat format, bool& pairs_next) {
  const Event& event = batch.events[i];
  pairs_next = false;
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    uint32_t present = PresentFields(s->scope, s->wire, s->tier);
    if (!s->multimodal.empty()) present |= kMultimodal;
    KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, s->tier, s->wire.tier_spelling));
    switch (format) {
      case WireFormat::kVllmV09:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present, kBlockSize | kLoraId, format));
        return RequireBlockSize(i, *s, format);
      case WireFormat::kVllm:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present,
                                             kBlockSize | kLoraId | kTier | kLoraName | kSalt |
                                                 kMultimodal | kGroup | kSpecKind | kSlidingWindow,
                                             format));
        KVINDEX_RETURN_IF_ERROR(RequireBlockSize(i, *s, format));
        return CheckExtraKeys(i, *s, format == WireFormat::kVllmMap);
      case WireFormat::kVllmMap:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(
            i, present,
            kBlockSize | kLoraId | kTier | kLoraName | kSalt | kMultimodal | kGroup | kSpecKind |
                kSlidingWindow | kLocality | kOwnership | kSessionId,
            format));
        KVINDEX_RETURN_IF_ERROR(RequireBlockSize(i, *s, format));
        return CheckExtraKeys(i, *s, format == WireFormat::kVllmMap);
      case WireFormat::kSglang:
        KVINDEX_RETURN_IF_ERROR(
            CheckAllowed(i, present, kBlockSize | kLoraId | kTier | kSalt | kSessionId, format));
        return RequireBlockSize(i, *s, format);
      case WireFormat::kMooncake:
        return CheckAllowed(i, present,
                            kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier, format);
      case WireFormat::kMooncakeSeed: {
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present, kModel | kBlockSize | kObjectKey, format));
        const StoreUpdate* next = i + 1 < batch.events.size()
                                      ? std::get_if<StoreUpdate>(&batch.events[i + 1])
                                      : nullptr;
        if (!s->wire.object_key || next == nullptr || next->key != *s->wire.object_key) {
          return Cannot(i, "a BlockStored not followed by the StoreUpdate of its object_key",
                        format);
        }
        pairs_next = true;
        return Status::Ok();
      }
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    const uint32_t present = PresentFields(r->scope, r->wire, r->tier);
    KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, r->tier, r->wire.tier_spelling));
    switch (format) {
      case WireFormat::kVllmV09: return CheckAllowed(i, present, 0, format);
      case WireFormat::kVllm: return CheckAllowed(i, present, kTier | kGroup, format);
      case WireFormat::kVllmMap:
        return CheckAllowed(i, present, kTier | kGroup | kLocality | kOwnership, format);
      case WireFormat::kSglang: return CheckAllowed(i, present, kTier, format);
      case WireFormat::kMooncake:
        return CheckAllowed(i, present,
                            kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier, format);
      case WireFormat::kMooncakeSeed: return Cannot(i, "BlockRemoved", format);
    }
  } else if (const auto* c = std::get_if<AllCleared>(&event)) {
    const uint32_t present = PresentFields(c->scope, c->wire, c->tier);
    KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, c->tier, c->wire.tier_spelling));
    if (format == WireFormat::kMooncake) {
      return CheckAllowed(i, present,
                          kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier, format);
    }
    return CheckAllowed(i, present, 0, format);
  } else if (const auto* u = std::get_if<StoreUpdate>(&event)) {
    if (format != WireFormat::kMooncakeSeed) return Cannot(i, "StoreUpdate", format);
    for (const Replica& replica : u->replicas) {
      KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, replica.tier, replica.tier_spelling));
    }
    return Status::Ok();
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Writing.

std::string_view TierSpelling(const Tier& tier, const std::optional<std::string>& spelling) {
  return spelling ? std::string_view(*spelling) : tier.name();
}

void WriteOptStr(Writer& w, const std::optional<std::string>& s) {
  if (s) {
    w.Str(*s);
  } else {
    w.Nil();
  }
}
template <typename T>
void WriteOptUint(Writer& w, const std::optional<T>& v) {
  if (v) {
    w.Uint(static_cast<uint64_t>(*v));
  } else {
    w.Nil();
  }
}
template <typename T>
void WriteOptInt(Writer& w, const std::optional<T>& v) {
  if (v) {
    w.Int(static_cast<int64_t>(*v));
  } else {
    w.Nil();
  }
}
void WriteMedium(Writer& w, const std::optional<Tier>& tier,
                 const std::optional<std::string>& spelling) {
  if (tier) {
    w.Str(TierSpelling(*tier, spelling));
  } else {
    w.Nil();
  }
}

void WriteHashes(Writer& w, const std::vector<EngineHash>& hashes, bool is_signed) {
  w.Array(hashes.size());
  for (EngineHash h : hashes) {
    if (is_signed) {
      w.Int(static_cast<int64_t>(h.value));
    } else {
      w.Uint(h.value);
    }
  }
}
void WriteOptHash(Writer& w, const std::optional<EngineHash>& h, bool is_signed) {
  if (!h) {
    w.Nil();
  } else if (is_signed) {
    w.Int(static_cast<int64_t>(h->value));
  } else {
    w.Uint(h->value);
  }
}
void WriteTokens(Writer& w, const std::vector<TokenId>& tokens) {
  w.Array(tokens.size());
  w.Reserve(5 * tokens.size());
  for (TokenId t : tokens) w.Uint(t);
}

void WriteEmbeds(Writer& w, const std::string& id) {
  std::vector<uint8_t> digest;
  digest.reserve((id.size() - kEmbedsPrefix.size()) / 2);
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = kEmbedsPrefix.size(); i + 1 < id.size(); i += 2) {
    digest.push_back(static_cast<uint8_t>((nibble(id[i]) << 4) | nibble(id[i + 1])));
  }
  w.Bin(digest);
}

bool HasExtraKeys(const BlockStored& ev) {
  return (ev.scope.salt && !ev.block_hashes.empty()) || !ev.multimodal.empty();
}
// A salt on an event without blocks cannot travel in extra_keys; vllm-map then sends it as
// SGLang's metadata map (a kvindex choice: vLLM itself never salts an empty event).
bool SaltInMetadata(const BlockStored& ev) { return ev.scope.salt && ev.block_hashes.empty(); }

// vLLM's raw extra_keys: per block nil or (lora_name?, (mm_id, offset)..., cache_salt on the
// first block); prompt-embeds keys go back to bin digests.
void WriteExtraKeys(Writer& w, const BlockStored& ev) {
  const size_t blocks = ev.block_hashes.size();
  w.Array(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const bool salt = b == 0 && ev.scope.salt.has_value();
    const size_t mm = ev.multimodal.empty() ? 0 : ev.multimodal[b].size();
    const size_t count = (ev.scope.lora_name ? 1 : 0) + mm + (salt ? 1 : 0);
    if (count == 0) {
      w.Nil();
      continue;
    }
    w.Array(count);
    if (ev.scope.lora_name) w.Str(*ev.scope.lora_name);
    for (size_t k = 0; k < mm; ++k) {
      const MultimodalKey& key = ev.multimodal[b][k];
      if (IsEmbedsKey(key)) continue;
      w.Array(2);
      w.Str(key.id);
      w.Int(key.offset);
    }
    if (salt) w.Str(*ev.scope.salt);
    for (size_t k = 0; k < mm; ++k) {
      const MultimodalKey& key = ev.multimodal[b][k];
      if (IsEmbedsKey(key)) WriteEmbeds(w, key.id);
    }
  }
}

void WriteVllmArrayEvent(Writer& w, const Event& event, bool v09) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    w.Array(v09 ? 6 : 12);
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

void WriteVllmMapEvent(Writer& w, const Event& event) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const bool extra = HasExtraKeys(*s);
    const size_t n = 8 + (extra ? 1 : 0) + (s->scope.group ? 1 : 0) + (s->wire.spec_kind ? 1 : 0) +
                     (s->wire.sliding_window ? 1 : 0) + (s->wire.locality ? 1 : 0) +
                     (s->wire.ownership ? 1 : 0) + (s->wire.session_id ? 1 : 0) +
                     (SaltInMetadata(*s) ? 1 : 0);
    w.Map(n);
    w.Str("type");
    w.Str("BlockStored");
    w.Str("block_hashes");
    WriteHashes(w, s->block_hashes, false);
    w.Str("parent_block_hash");
    WriteOptHash(w, s->parent, false);
    w.Str("token_ids");
    WriteTokens(w, s->token_ids);
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
    if (s->wire.ownership) {
      w.Str("ownership");
      w.Str(*s->wire.ownership);
    }
    if (s->wire.session_id) {
      w.Str("session_id");
      w.Str(*s->wire.session_id);
    }
    if (SaltInMetadata(*s)) {
      w.Str("metadata");
      w.Map(1);
      w.Str("cache_salt");
      w.Str(*s->scope.salt);
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    const size_t n = 3 + (r->scope.group ? 1 : 0) + (r->wire.locality ? 1 : 0) +
                     (r->wire.ownership ? 1 : 0);
    w.Map(n);
    w.Str("type");
    w.Str("BlockRemoved");
    w.Str("block_hashes");
    WriteHashes(w, r->block_hashes, false);
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

// SGLang: the shortest era carrying the event — 6 elements (early), 7 with medium, 8 with the
// metadata map (BlockStoredWithMetadata).
void WriteSglangEvent(Writer& w, const Event& event) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const bool metadata = s->scope.salt || s->wire.session_id;
    const bool medium = metadata || s->tier;
    w.Array(metadata ? 8 : medium ? 7 : 6);
    w.Str("BlockStored");
    WriteHashes(w, s->block_hashes, true);
    WriteOptHash(w, s->parent, true);
    WriteTokens(w, s->token_ids);
    w.Uint(*s->scope.block_size);
    WriteOptInt(w, s->scope.lora_id);
    if (medium) WriteMedium(w, s->tier, s->wire.tier_spelling);
    if (metadata) {
      w.Map((s->scope.salt ? 1 : 0) + (s->wire.session_id ? 1 : 0));
      if (s->scope.salt) {
        w.Str("cache_salt");
        w.Str(*s->scope.salt);
      }
      if (s->wire.session_id) {
        w.Str("session_id");
        w.Str(*s->wire.session_id);
      }
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    w.Array(r->tier ? 3 : 2);
    w.Str("BlockRemoved");
    WriteHashes(w, r->block_hashes, true);
    if (r->tier) WriteMedium(w, r->tier, r->wire.tier_spelling);
  } else {
    w.Array(1);
    w.Str("AllBlocksCleared");
  }
}

// Mooncake RFC #1527: every key the store publisher writes, in its order, nil when absent.
void WriteMooncakeEvent(Writer& w, const Event& event) {
  const EventScopeFields* scope;
  const WireDetails* wire;
  const std::optional<Tier>* tier;
  const std::vector<EngineHash>* hashes = nullptr;
  const BlockStored* stored = std::get_if<BlockStored>(&event);
  const char* event_type;
  const char* type;
  if (stored != nullptr) {
    scope = &stored->scope;
    wire = &stored->wire;
    tier = &stored->tier;
    hashes = &stored->block_hashes;
    event_type = "stored";
    type = "BlockStored";
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    scope = &r->scope;
    wire = &r->wire;
    tier = &r->tier;
    hashes = &r->block_hashes;
    event_type = "removed";
    type = "BlockRemoved";
  } else {
    const auto& c = std::get<AllCleared>(event);
    scope = &c.scope;
    wire = &c.wire;
    tier = &c.tier;
    event_type = "cleared";
    type = "AllBlocksCleared";
  }
  w.Map(20);
  w.Str("event_id");
  WriteOptUint(w, wire->event_id);
  w.Str("timestamp");
  WriteOptInt(w, wire->timestamp_ms);
  w.Str("event_type");
  w.Str(event_type);
  w.Str("type");
  w.Str(type);
  w.Str("model_name");
  WriteOptStr(w, scope->model);
  w.Str("block_size");
  WriteOptUint(w, scope->block_size);
  w.Str("additional_salt");
  WriteOptStr(w, scope->salt);
  w.Str("lora_name");
  WriteOptStr(w, scope->lora_name);
  w.Str("tenant_id");
  WriteOptStr(w, scope->tenant);
  w.Str("backend_id");
  WriteOptStr(w, wire->backend_id);
  w.Str("group_id");
  WriteOptUint(w, scope->group);
  w.Str("medium");
  WriteMedium(w, *tier, wire->tier_spelling);
  w.Str("dp_rank");
  WriteOptInt(w, scope->dp_rank);
  w.Str("object_key");
  WriteOptStr(w, wire->object_key);
  w.Str("seq_hashes");
  if (hashes) {
    WriteHashes(w, *hashes, false);
  } else {
    w.Nil();
  }
  w.Str("block_hashes");  // the legacy alias, signed as the store publisher writes it
  if (hashes) {
    WriteHashes(w, *hashes, true);
  } else {
    w.Nil();
  }
  w.Str("base_block_idx");
  WriteOptUint(w, wire->base_block_idx);
  const std::optional<EngineHash> none;
  const std::optional<EngineHash>& parent = stored ? stored->parent : none;
  w.Str("parent_hash");
  WriteOptHash(w, parent, false);
  w.Str("token_ids");
  if (stored && !stored->token_ids.empty()) {
    WriteTokens(w, stored->token_ids);
  } else {
    w.Nil();
  }
  w.Str("parent_block_hash");  // legacy alias
  WriteOptHash(w, parent, false);
}

void WriteSeedHash(Writer& w, uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(h));
  w.Str(buf);
}

void WriteReplicas(Writer& w, const std::vector<Replica>& replicas) {
  w.Array(replicas.size());
  for (const Replica& r : replicas) {
    w.Array(2);
    w.Str(TierSpelling(r.tier, r.tier_spelling));
    w.Str(r.location);
  }
}

// Returns how many events were written (a BlockStoreEvent consumes its StoreUpdate too).
size_t WriteSeedEvent(Writer& w, const EventBatch& batch, size_t i) {
  const Event& event = batch.events[i];
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const auto& update = std::get<StoreUpdate>(batch.events[i + 1]);
    w.Array(8);
    w.Str("BlockStoreEvent");
    w.Str(update.key);
    WriteReplicas(w, update.replicas);
    WriteOptStr(w, s->scope.model);
    WriteOptUint(w, s->scope.block_size);
    if (s->block_hashes.empty()) {
      w.Str("");
    } else if (s->block_hashes.size() == 1) {
      WriteSeedHash(w, s->block_hashes[0].value);
    } else {
      WriteHashes(w, s->block_hashes, false);
    }
    if (s->parent) {
      WriteSeedHash(w, s->parent->value);
    } else {
      w.Str("");
    }
    WriteTokens(w, s->token_ids);
    return 2;
  }
  if (const auto* u = std::get_if<StoreUpdate>(&event)) {
    w.Array(3);
    w.Str("BlockUpdateEvent");
    w.Str(u->key);
    WriteReplicas(w, u->replicas);
    return 1;
  }
  w.Array(1);
  w.Str("RemoveAllEvent");
  return 1;
}

size_t CountSeedEvents(const EventBatch& batch) {
  size_t n = 0;
  for (size_t i = 0; i < batch.events.size(); ++i, ++n) {
    if (std::holds_alternative<BlockStored>(batch.events[i])) ++i;
  }
  return n;
}

// True when ts is a whole number of milliseconds within ±2^48 ms (exact through int ms).
bool WholeMilliseconds(double ts) {
  const double ms = ts * 1000.0;
  return std::fabs(ms) <= static_cast<double>(int64_t{1} << 48) &&
         static_cast<double>(std::llround(ms)) / 1000.0 == ts;
}

size_t EstimateSize(const EventBatch& batch) {
  size_t bytes = 32;
  for (const Event& e : batch.events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      bytes += 160 + 9 * s->block_hashes.size() + 5 * s->token_ids.size();
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      bytes += 160 + 9 * r->block_hashes.size();
    } else {
      bytes += 160;
    }
  }
  return bytes;
}

}  // namespace

Status CheckEncodable(const EventBatch& batch, WireFormat format) {
  if (batch.dp_rank && format == WireFormat::kVllmV09) {
    return Status::Unsupported("batch: dp_rank cannot be carried by " +
                               std::string(WireFormatName(format)));
  }
  if (!std::isfinite(batch.ts)) return Status::InvalidArgument("batch: ts is not finite");
  if (batch.events.size() > kMaxEventsPerBatch) {
    return Status::LimitExceeded("batch: more than " + std::to_string(kMaxEventsPerBatch) +
                                 " events");
  }
  for (size_t i = 0; i < batch.events.size(); ++i) {
    bool pairs_next = false;
    KVINDEX_RETURN_IF_ERROR(CheckEvent(batch, i, format, pairs_next));
    if (pairs_next) ++i;
  }
  return Status::Ok();
}

Status EncodeEventBatch(const EventBatch& batch, WireFormat format, std::vector<std::byte>& out) {
  KVINDEX_RETURN_IF_ERROR(CheckEncodable(batch, format));
  out.clear();
  Writer w(out);
  w.Reserve(EstimateSize(batch));
  switch (format) {
    case WireFormat::kVllmV09:
    case WireFormat::kVllm:
    case WireFormat::kVllmMap: {
      const bool v09 = format == WireFormat::kVllmV09;
      w.Array(v09 ? 2 : 3);
      w.Float64(batch.ts);
      w.Array(batch.events.size());
      for (const Event& e : batch.events) {
        if (format == WireFormat::kVllmMap) {
          WriteVllmMapEvent(w, e);
        } else {
          WriteVllmArrayEvent(w, e, v09);
        }
      }
      if (!v09) WriteOptInt(w, batch.dp_rank);
      break;
    }
    case WireFormat::kSglang:
      w.Array(batch.dp_rank ? 3 : 2);
      w.Float64(batch.ts);
      w.Array(batch.events.size());
      for (const Event& e : batch.events) WriteSglangEvent(w, e);
      if (batch.dp_rank) w.Int(*batch.dp_rank);
      break;
    case WireFormat::kMooncake:
      w.Array(3);
      if (WholeMilliseconds(batch.ts)) {
        w.Int(std::llround(batch.ts * 1000.0));
      } else {  // kept exact as float64 seconds, the engines' envelope (the decoder takes both)
        w.Float64(batch.ts);
      }
      w.Array(batch.events.size());
      for (const Event& e : batch.events) WriteMooncakeEvent(w, e);
      WriteOptInt(w, batch.dp_rank);
      break;
    case WireFormat::kMooncakeSeed:
      // The seed batch has no rank; a rank, when set, goes in a third element (kvindex's choice,
      // as every engine envelope does).
      w.Array(batch.dp_rank ? 3 : 2);
      w.Float64(batch.ts);
      w.Array(CountSeedEvents(batch));
      for (size_t i = 0; i < batch.events.size();) i += WriteSeedEvent(w, batch, i);
      if (batch.dp_rank) w.Int(*batch.dp_rank);
      break;
  }
  w.Finish();
  return Status::Ok();
}

}  // namespace kvindex
