// What the index keeps per instance, per source and per holder (one source at one DP rank), and
// the packed per-instance record queries read instead (InstQuery). Private to the index layer.
//
// Thread safety: none; PrefixIndex guards these with its reader-writer lock (index_impl.h).
#ifndef KVINDEX_SRC_INSTANCE_STATE_H_
#define KVINDEX_SRC_INSTANCE_STATE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/source.h"

#include "block_records.h"
#include "engine_map.h"
#include "flat_table.h"

namespace kvindex::index_internal {

// A page of a source whose pages are smaller than its block size (SGLang page size 1): the tokens
// of the unfinished block so far and the chain before it.
struct Partial {
  uint32_t scope = 0;
  bool has_before = false;
  uint64_t before = 0;
  std::vector<TokenId> tokens;
};

// An instance (the name sources share): its configuration, holders, (tenant, model) memberships,
// engine-hash map, unfinished pages and store object keys. Heap-allocated, so its address is
// stable while instances are added.
struct Instance {
  uint32_t index = 0;  // its position in Impl::instances
  std::string name;
  bool listed = true;
  uint32_t block_size = 0;  // configured, else the first block size seen
  uint64_t seed = kDefaultHashSeed;
  std::vector<uint32_t> sources;
  std::vector<uint16_t> holders;
  std::vector<DpRank> ranks;  // sorted ranks of its own holders
  std::vector<uint32_t> tms;  // (tenant, model) pairs it is known under
  internal::FlatTable<EngineSlot, EngineTraits> engine;
  std::unordered_map<uint64_t, Partial> partials;
  std::unordered_map<std::string, std::vector<BlockRef>> objects;  // Mooncake store keys
  uint64_t orphans = 0;
};

// What a query reads of an instance, packed in one array (Impl::inst_q) so that a query over 64
// instances touches ~2 KB instead of chasing each Instance's vectors. Refreshed by RefreshQuery()
// whenever one of its sources (name, listed, block size, seed, holders, ranks) changes.
constexpr uint16_t kNoHolder = 0xFFFF;
struct InstQuery {
  std::string_view name;  // Instance::name (the Instance is heap-stable)
  uint64_t seed = kDefaultHashSeed;
  uint32_t block_size = 0;
  uint16_t holder = kNoHolder;  // its only holder, or kNoHolder when it has none or several
  bool listed = false;
  bool one_rank = false;  // exactly one holder, with a rank: `rank`
  DpRank rank = 0;
};

// One source at one DP rank: what a presence names. `tier_presences` counts its presences per tier.
struct Holder {
  uint32_t source = 0;
  uint32_t inst = 0;
  bool has_rank = false;
  DpRank rank = 0;
  std::array<uint64_t, kMaxTiers> tier_presences{};
};

// A configured source (AddSource()): its instance and its holders by rank.
struct Source {
  SourceConfig config;
  uint32_t inst = 0;
  std::vector<std::pair<std::optional<DpRank>, uint16_t>> holders;
  std::vector<uint32_t> serves;  // resolved instance indices (when not serves_all)
  // The scope of its last stored event: a stream's events nearly always share their scope
  // fields, and building and hashing a Scope (four strings) per event was a measurable share of
  // live ingest. Scopes are never removed, so the cached id stays valid.
  EventScopeFields last_fields;
  uint32_t last_block_size = 0;
  uint32_t last_scope = kNone;
};

}  // namespace kvindex::index_internal

#endif  // KVINDEX_SRC_INSTANCE_STATE_H_
