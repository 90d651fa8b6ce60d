// The Mooncake store's seed era (the subscriber guide's layout): ["BlockUpdateEvent", key,
// replicas], ["BlockStoreEvent", key, replicas, model_name, block_size, block_hash,
// parent_block_hash, token_ids] (one BlockStored followed by the StoreUpdate of its replicas) and
// ["RemoveAllEvent"] (event_batch_decoder.cpp). Hashes may be strings, ints or arrays.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

bool Decoder::ReadReplicas(std::vector<Replica>& replicas) {
  uint32_t n;
  if (!r_.ReadArray(n)) return TypeFail("replicas", "array");
  replicas.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t k;
    if (!r_.ReadArray(k)) return TypeFail("replicas", "[type, location] array");
    if (k < 2) return Fail(StatusCode::kMalformed, "replicas", "expected [type, location]");
    std::string_view type;
    if (!r_.ReadStr(type)) return TypeFail("replicas.type", "str");
    Replica replica{ParseTier(type), {}, {}};
    if (type != replica.tier.name()) replica.tier_spelling = std::string(type);
    if (!ReadStr("replicas.location", replica.location)) return false;
    for (uint32_t j = 2; j < k; ++j) {
      if (!Skip("replicas", 5)) return false;
    }
    replicas.push_back(std::move(replica));
  }
  return true;
}

bool Decoder::DecodeStoreUpdateArray(uint32_t n, EventSlots& out) {
  if (n < 3) {
    return Fail(StatusCode::kMalformed, "BlockUpdateEvent",
                "expected [tag, key, replicas], got " + std::to_string(n) + " elements");
  }
  StoreUpdate ev;
  if (!ReadStr("key", ev.key)) return false;
  if (!ReadReplicas(ev.replicas)) return false;
  for (uint32_t i = 3; i < n; ++i) {
    if (!Skip("BlockUpdateEvent", kEventLevel)) return false;
  }
  out.push_back(std::move(ev));
  return true;
}

bool Decoder::ReadSeedHashes(std::string_view field, std::vector<EngineHash>& out) {
  const Type t = r_.PeekType();
  if (t == Type::kNil) {
    r_.TryNil();
    return true;
  }
  if (t == Type::kArray) return ReadHashList(field, out);
  if (t == Type::kStr) {
    std::string_view s;
    if (!r_.ReadStr(s)) return TypeFail(field, "str");
    if (!s.empty()) out.push_back(EngineHash{NormaliseHashString(s)});
    return true;
  }
  EngineHash h;
  if (!ReadHash(field, h)) return false;
  out.push_back(h);
  return true;
}

bool Decoder::DecodeBlockStoreArray(uint32_t n, EventSlots& out) {
  if (n < 8) {
    return Fail(StatusCode::kMalformed, "BlockStoreEvent",
                "expected 8 elements (tag, key, replicas, model_name, block_size, block_hash, "
                "parent_block_hash, token_ids), got " +
                    std::to_string(n));
  }
  BlockStored stored;
  StoreUpdate update;
  if (!ReadStr("key", update.key)) return false;
  if (!ReadReplicas(update.replicas)) return false;
  if (!ReadOptStr("model_name", stored.scope.model)) return false;
  if (!ReadOptU32("block_size", stored.scope.block_size)) return false;
  if (!ReadSeedHashes("block_hash", stored.block_hashes)) return false;
  std::vector<EngineHash> parent;
  if (!ReadSeedHashes("parent_block_hash", parent)) return false;
  if (parent.size() > 1) {
    return Fail(StatusCode::kMalformed, "parent_block_hash", "more than one parent");
  }
  if (!parent.empty()) stored.parent = parent[0];
  if (!ReadOptTokens("token_ids", stored.token_ids)) return false;
  for (uint32_t i = 8; i < n; ++i) {
    if (!Skip("BlockStoreEvent", kEventLevel)) return false;
  }
  stored.wire.object_key = update.key;
  out.push_back(std::move(stored));
  out.push_back(std::move(update));
  return true;
}

}  // namespace kvindex::codec_internal
