// Event builders shared by the prefix index tests (plain event.h values, nothing of the index).
#ifndef KVINDEX_TESTS_PREFIX_INDEX_BUILDERS_H_
#define KVINDEX_TESTS_PREFIX_INDEX_BUILDERS_H_

#include <initializer_list>
#include <optional>
#include <vector>

#include "kvindex/core/event.h"

namespace kvindex::test {

inline BlockStored Stored(std::vector<uint64_t> hashes, std::optional<uint64_t> parent,
                          std::vector<TokenId> tokens, std::optional<Tier> tier = std::nullopt) {
  BlockStored e;
  for (uint64_t h : hashes) e.block_hashes.push_back(EngineHash{h});
  if (parent) e.parent = EngineHash{*parent};
  e.token_ids = std::move(tokens);
  e.tier = std::move(tier);
  return e;
}

inline BlockRemoved Removed(std::vector<uint64_t> hashes, std::optional<Tier> tier = std::nullopt) {
  BlockRemoved e;
  for (uint64_t h : hashes) e.block_hashes.push_back(EngineHash{h});
  e.tier = std::move(tier);
  return e;
}

inline EventBatch Batch(std::vector<Event> events, std::optional<DpRank> rank = std::nullopt) {
  EventBatch b;
  b.dp_rank = rank;
  b.events = std::move(events);
  return b;
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_PREFIX_INDEX_BUILDERS_H_
