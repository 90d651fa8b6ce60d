// The fields of a map event and the keys they are read from. A map event's family (vLLM/SGLang
// engine or Mooncake RFC #1527) is known only once its last key is read (event_type and
// seq_hashes may come anywhere), so one key loop (vllm_map_decoder.cpp) reads every key either
// family sends into MapFields, and the event is built from the family's fields afterwards.
//
// Thread safety: plain data and a pure lookup.
#ifndef KVINDEX_SRC_CODEC_MAP_EVENT_FIELDS_H_
#define KVINDEX_SRC_CODEC_MAP_EVENT_FIELDS_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

// Every field a map event (vLLM, SGLang or RFC) may carry.
struct MapFields {
  std::optional<std::string> type, event_type;
  bool has_block_hashes = false, has_seq_hashes = false;
  std::vector<EngineHash> block_hashes, seq_hashes;
  std::optional<EngineHash> parent_block_hash, parent_hash;
  std::vector<TokenId> token_ids;
  std::optional<TokenId> eagle_next;
  std::vector<uint32_t> block_offsets;
  // vLLM's skipped context: the key was present (non-nil) and what it held.
  bool has_skipped_parent = false, has_skipped_tokens = false;
  std::optional<EngineHash> skipped_parent;
  std::vector<TokenId> skipped_tokens;
  ExtraKeys skipped_extra;
  std::optional<uint32_t> block_size;
  std::optional<int64_t> lora_id;
  std::optional<Tier> tier;
  std::optional<std::string> tier_spelling;
  std::optional<std::string> lora_name;
  ExtraKeys extra;
  std::optional<uint32_t> group_idx, group_id;
  std::optional<std::string> spec_kind;
  std::optional<int64_t> sliding_window;
  std::optional<std::string> locality, ownership, session_id;
  std::optional<std::string> meta_salt, meta_session;
  std::optional<uint64_t> event_id;
  std::optional<int64_t> timestamp;
  std::optional<std::string> model, salt, tenant, backend_id, object_key;
  std::optional<DpRank> dp_rank;
  std::optional<uint64_t> base_block_idx;
  bool mm_segments = false;  // TensorRT-LLM mm_keys naming a multimodal segment
  std::vector<std::vector<MultimodalKey>> mm_keys;  // per block, as read
};

enum class MapKey : uint8_t {
  kUnknown,
  kType,
  kEventType,
  kBlockHashes,
  kSeqHashes,
  kParentBlockHash,
  kParentHash,
  kTokenIds,
  kBlockSize,
  kLoraId,
  kMedium,
  kLoraName,
  kExtraKeys,
  kGroupIdx,
  kGroupId,
  kSpecKind,
  kSlidingWindow,
  kLocality,
  kOwnership,
  kSessionId,
  kMetadata,
  kEventId,
  kTimestamp,
  kModelName,
  kAdditionalSalt,
  kTenantId,
  kBackendId,
  kDpRank,
  kObjectKey,
  kBaseBlockIdx,
  kBlockOffsets,
  kMmKeys,
  kSkippedParent,
  kSkippedTokens,
  kSkippedExtraKeys,
};

// Returns the key `k` names (exact, case-sensitive), kUnknown for any other.
inline MapKey LookupMapKey(std::string_view k) {
  static constexpr std::pair<std::string_view, MapKey> kKeys[] = {
      {"type", MapKey::kType},
      {"event_type", MapKey::kEventType},
      {"block_hashes", MapKey::kBlockHashes},
      {"seq_hashes", MapKey::kSeqHashes},
      {"parent_block_hash", MapKey::kParentBlockHash},
      {"parent_hash", MapKey::kParentHash},
      {"token_ids", MapKey::kTokenIds},
      {"block_size", MapKey::kBlockSize},
      {"lora_id", MapKey::kLoraId},
      {"medium", MapKey::kMedium},
      {"lora_name", MapKey::kLoraName},
      {"extra_keys", MapKey::kExtraKeys},
      {"group_idx", MapKey::kGroupIdx},
      {"group_id", MapKey::kGroupId},
      {"kv_cache_spec_kind", MapKey::kSpecKind},
      {"kv_cache_spec_sliding_window", MapKey::kSlidingWindow},
      {"locality", MapKey::kLocality},
      {"ownership", MapKey::kOwnership},
      {"session_id", MapKey::kSessionId},
      {"metadata", MapKey::kMetadata},
      {"event_id", MapKey::kEventId},
      {"timestamp", MapKey::kTimestamp},
      {"model_name", MapKey::kModelName},
      {"additional_salt", MapKey::kAdditionalSalt},
      {"tenant_id", MapKey::kTenantId},
      {"backend_id", MapKey::kBackendId},
      {"dp_rank", MapKey::kDpRank},
      {"object_key", MapKey::kObjectKey},
      {"base_block_idx", MapKey::kBaseBlockIdx},
      {"block_offsets", MapKey::kBlockOffsets},
      {"mm_keys", MapKey::kMmKeys},
      {"skipped_parent_block_hash", MapKey::kSkippedParent},
      {"skipped_token_ids", MapKey::kSkippedTokens},
      {"skipped_extra_keys", MapKey::kSkippedExtraKeys},
  };
  for (const auto& [name, key] : kKeys) {
    if (name.size() == k.size() && std::memcmp(name.data(), k.data(), k.size()) == 0) return key;
  }
  return MapKey::kUnknown;
}

// Moves the RFC #1527 fields of `f` into the event's scope and wire details (the engine's keys
// are left unused). Defined in mooncake_rfc_decoder.cpp.
void ApplyRfcMapFields(MapFields& f, EventScopeFields& scope, WireDetails& wire);

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_MAP_EVENT_FIELDS_H_
