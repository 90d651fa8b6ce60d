// CheckEncodable: what each wire format can carry. Before writing, EncodeEventBatch() refuses a
// batch holding anything the format cannot carry (nothing is dropped silently), so
// decode(encode(batch)) == batch whenever encoding succeeds; the decoder also asks it which
// format reproduces a decoded batch.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

#include "hash_value.h"

namespace kvindex {
namespace {

using codec_internal::IsEmbedsKey;

Status Cannot(size_t index, std::string_view what, WireFormat format) {
  return Status::Unsupported("event " + std::to_string(index) + ": " + std::string(what) +
                             " cannot be carried by " + std::string(WireFormatName(format)));
}

// Fields of EventScopeFields / WireDetails, as bits, so each format states what it allows.
enum Field : uint32_t {
  kModel = 1u << 0,
  kTenant = 1u << 1,
  kSalt = 1u << 2,
  kLoraName = 1u << 3,
  kLoraId = 1u << 4,
  kBlockSize = 1u << 5,
  kGroup = 1u << 6,
  kDpRank = 1u << 7,
  kEventId = 1u << 8,
  kTimestamp = 1u << 9,
  kBackendId = 1u << 10,
  kBaseBlockIdx = 1u << 11,
  kObjectKey = 1u << 12,
  kSpecKind = 1u << 13,
  kSlidingWindow = 1u << 14,
  kLocality = 1u << 15,
  kOwnership = 1u << 16,
  kSessionId = 1u << 17,
  kTier = 1u << 18,
  kMultimodal = 1u << 19,
  kEagleNext = 1u << 20,
  kBlockOffsets = 1u << 21,
  kSkipped = 1u << 22,
  kExtraKeysSent = 1u << 23,
  kMmKeys = 1u << 24,
};

struct FieldName {
  uint32_t bit;
  const char* name;
};
constexpr FieldName kFieldNames[] = {
    {kModel, "model"},
    {kTenant, "tenant"},
    {kSalt, "salt"},
    {kLoraName, "lora_name"},
    {kLoraId, "lora_id"},
    {kBlockSize, "block_size"},
    {kGroup, "group"},
    {kDpRank, "dp_rank"},
    {kEventId, "event_id"},
    {kTimestamp, "timestamp"},
    {kBackendId, "backend_id"},
    {kBaseBlockIdx, "base_block_idx"},
    {kObjectKey, "object_key"},
    {kSpecKind, "spec_kind"},
    {kSlidingWindow, "sliding_window"},
    {kLocality, "locality"},
    {kOwnership, "ownership"},
    {kSessionId, "session_id"},
    {kTier, "tier"},
    {kMultimodal, "multimodal keys"},
    {kEagleNext, "EAGLE bigram token_ids"},
    {kBlockOffsets, "block_offsets"},
    {kSkipped, "skipped context"},
    {kExtraKeysSent, "extra_keys without keys"},
    {kMmKeys, "mm_keys segments"},
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
  if (w.eagle_next) bits |= kEagleNext;
  if (w.extra_keys_sent) bits |= kExtraKeysSent;
  if (w.mm_keys) bits |= kMmKeys;
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

Status Invalid(size_t index, const std::string& what) {
  return Status::InvalidArgument("event " + std::to_string(index) + ": " + what);
}

// Multimodal lists, one per block (or skipped chunk): digests last (unless `any_order`: mm_keys
// segments are written as they come), not all empty (an all-empty list would decode as no keys).
Status CheckMultimodalLists(size_t index, const std::vector<std::vector<MultimodalKey>>& lists,
                            size_t count, std::string_view what, bool any_order = false) {
  if (lists.empty()) return Status::Ok();
  if (lists.size() != count) {
    return Invalid(index, std::to_string(lists.size()) + " multimodal lists for " +
                              std::to_string(count) + " " + std::string(what));
  }
  bool any = false;
  for (const auto& keys : lists) {
    any |= !keys.empty();
    bool seen_embeds = false;
    for (const MultimodalKey& key : keys) {
      const bool embeds = IsEmbedsKey(key);
      if (seen_embeds && !embeds && !any_order) {
        return Invalid(index, "a multimodal key after a prompt-embeds digest");
      }
      seen_embeds |= embeds;
    }
  }
  if (any) return Status::Ok();
  return Invalid(index, "multimodal lists are all empty (use an empty vector)");
}

// extra_keys hold one entry per block: multimodal keys need one list per block, a salt needs a
// first block.
Status CheckExtraKeys(size_t index, const BlockStored& ev, bool salt_elsewhere) {
  if (ev.scope.salt && ev.block_hashes.empty() && !salt_elsewhere) {
    return Invalid(index, "a salt needs at least one block to travel in extra_keys");
  }
  return CheckMultimodalLists(index, ev.multimodal, ev.block_hashes.size(), "blocks",
                              ev.wire.mm_keys);
}

// vLLM's skipped-context form (event.h): a run of consecutive chunks after `k` skipped ones,
// every token of both sent, the skipped chunks' multimodal lists one per chunk.
Status CheckSkipped(size_t index, const BlockStored& ev) {
  if (!ev.wire.skipped_context) {
    if (ev.skipped_multimodal.empty() && !ev.wire.run_parent) return Status::Ok();
    return Invalid(index, "skipped multimodal keys or run_parent without skipped_context");
  }
  const std::vector<uint32_t>& offsets = ev.block_offsets;
  if (offsets.empty() || offsets.size() != ev.block_hashes.size() || offsets.front() == 0) {
    return Invalid(index, "skipped_context needs one block offset per hash, the first above 0");
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] != offsets[i - 1] + 1) {
      return Invalid(index, "skipped_context needs consecutive block offsets");
    }
  }
  const size_t chunks = size_t{offsets.back()} + 1;
  if (ev.token_ids.size() != chunks * *ev.scope.block_size || ev.wire.eagle_next) {
    return Invalid(index, "skipped_context needs every chunk's tokens, as plain token ids");
  }
  return CheckMultimodalLists(index, ev.skipped_multimodal, offsets.front(), "skipped blocks");
}

// sglang-eagle writes every token list as bigram pairs, which needs the token after the last block.
Status RequireEagleNext(size_t index, const BlockStored& ev) {
  if (ev.token_ids.empty() || ev.wire.eagle_next) return Status::Ok();
  return Status::InvalidArgument("event " + std::to_string(index) +
                                 ": sglang-eagle BlockStored needs the token after its last block "
                                 "(eagle_next) to write bigram pairs");
}

Status RequireBlockSize(size_t index, const BlockStored& ev, WireFormat format) {
  if (ev.scope.block_size) return Status::Ok();
  return Status::InvalidArgument("event " + std::to_string(index) + ": " +
                                 std::string(WireFormatName(format)) +
                                 " BlockStored needs block_size");
}

constexpr uint32_t kRfcOnly =
    kModel | kTenant | kDpRank | kEventId | kTimestamp | kBackendId | kBaseBlockIdx | kObjectKey;

Status CheckEvent(const EventBatch& batch, size_t i, WireFormat format, bool& pairs_next) {
  const Event& event = batch.events[i];
  pairs_next = false;
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    uint32_t present = PresentFields(s->scope, s->wire, s->tier);
    if (!s->multimodal.empty()) present |= kMultimodal;
    if (!s->block_offsets.empty()) present |= kBlockOffsets;
    if (s->wire.skipped_context || s->wire.run_parent || !s->skipped_multimodal.empty()) {
      present |= kSkipped;
    }
    // An event with an EAGLE next token and no tokens cannot write it.
    if (s->wire.eagle_next && s->token_ids.empty()) {
      return Status::InvalidArgument("event " + std::to_string(i) +
                                     ": eagle_next without token_ids");
    }
    KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, s->tier, s->wire.tier_spelling));
    switch (format) {
      case WireFormat::kVllmV09:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present, kBlockSize | kLoraId, format));
        return RequireBlockSize(i, *s, format);
      case WireFormat::kVllm:
      case WireFormat::kLmcache:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present,
                                             kBlockSize | kLoraId | kTier | kLoraName | kSalt |
                                                 kMultimodal | kGroup | kSpecKind | kSlidingWindow |
                                                 kBlockOffsets | kExtraKeysSent,
                                             format));
        KVINDEX_RETURN_IF_ERROR(RequireBlockSize(i, *s, format));
        return CheckExtraKeys(i, *s, false);
      case WireFormat::kTrtllm:
        // TensorRT-LLM's tagged maps: vLLM's fields up to locality, no SGLang metadata map.
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present,
                                             kBlockSize | kLoraId | kTier | kLoraName | kSalt |
                                                 kMultimodal | kGroup | kSpecKind | kSlidingWindow |
                                                 kLocality | kExtraKeysSent | kMmKeys,
                                             format));
        KVINDEX_RETURN_IF_ERROR(RequireBlockSize(i, *s, format));
        if (s->wire.mm_keys && s->multimodal.empty()) {
          return Invalid(i, "mm_keys without multimodal keys");
        }
        return CheckExtraKeys(i, *s, false);
      case WireFormat::kVllmMap:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present,
                                             kBlockSize | kLoraId | kTier | kLoraName | kSalt |
                                                 kMultimodal | kGroup | kSpecKind | kSlidingWindow |
                                                 kLocality | kOwnership | kSessionId |
                                                 kBlockOffsets | kEagleNext | kSkipped |
                                                 kExtraKeysSent,
                                             format));
        KVINDEX_RETURN_IF_ERROR(RequireBlockSize(i, *s, format));
        KVINDEX_RETURN_IF_ERROR(CheckSkipped(i, *s));
        return CheckExtraKeys(i, *s, true);
      case WireFormat::kSglang:
        KVINDEX_RETURN_IF_ERROR(
            CheckAllowed(i, present, kBlockSize | kLoraId | kTier | kSalt | kSessionId, format));
        return RequireBlockSize(i, *s, format);
      case WireFormat::kSglangEagle:
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(
            i, present, kBlockSize | kLoraId | kTier | kSalt | kSessionId | kEagleNext, format));
        KVINDEX_RETURN_IF_ERROR(RequireEagleNext(i, *s));
        return RequireBlockSize(i, *s, format);
      case WireFormat::kMooncake:
        return CheckAllowed(i, present, kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier,
                            format);
      case WireFormat::kMooncakeSeed: {
        KVINDEX_RETURN_IF_ERROR(CheckAllowed(i, present, kModel | kBlockSize | kObjectKey, format));
        const StoreUpdate* next =
            i + 1 < batch.events.size() ? std::get_if<StoreUpdate>(&batch.events[i + 1]) : nullptr;
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
      case WireFormat::kVllmV09:
        return CheckAllowed(i, present, 0, format);
      case WireFormat::kVllm:
      case WireFormat::kLmcache:
        return CheckAllowed(i, present, kTier | kGroup, format);
      case WireFormat::kTrtllm:
        return CheckAllowed(i, present, kTier | kGroup | kLocality, format);
      case WireFormat::kVllmMap:
        return CheckAllowed(i, present, kTier | kGroup | kLocality | kOwnership, format);
      case WireFormat::kSglang:
      case WireFormat::kSglangEagle:
        return CheckAllowed(i, present, kTier, format);
      case WireFormat::kMooncake:
        return CheckAllowed(i, present, kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier,
                            format);
      case WireFormat::kMooncakeSeed:
        return Cannot(i, "BlockRemoved", format);
    }
  } else if (const auto* c = std::get_if<AllCleared>(&event)) {
    const uint32_t present = PresentFields(c->scope, c->wire, c->tier);
    KVINDEX_RETURN_IF_ERROR(CheckSpelling(i, c->tier, c->wire.tier_spelling));
    if (format == WireFormat::kMooncake) {
      return CheckAllowed(i, present, kRfcOnly | kSalt | kLoraName | kBlockSize | kGroup | kTier,
                          format);
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

}  // namespace kvindex
