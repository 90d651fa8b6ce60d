// The engine-hash map's slot: each instance maps the engine's own block hashes to block records
// (a FlatTable per instance, Instance::engine), so a BlockRemoved, which carries only engine
// hashes, finds its blocks. The map's key is the engine hash with the KV-cache group folded in
// (EngineKey), so the same hash in two groups names two blocks. The map's operations are
// PrefixIndex::Impl's Engine*() (index_impl.h) and SweepEngine() (engine_map.cpp). Private to the
// index layer.
//
// Thread safety: none; PrefixIndex guards the maps with its reader-writer lock.
#ifndef KVINDEX_SRC_ENGINE_MAP_H_
#define KVINDEX_SRC_ENGINE_MAP_H_

#include <cstdint>

#include "block_records.h"

namespace kvindex::index_internal {

// The engine-map hash of an engine hash: one multiplication by 2^64 / golden ratio (Fibonacci
// hashing). The table's home bucket uses only the product's high 32 bits, which depend on every
// bit of the key and spread arithmetic progressions evenly. Cheaper than Mix64 (an erase rehashes
// the members after the erased slot, and the apply path erases once per remove). Like Mix64 (also
// invertible), it is no defence against keys crafted to collide; engine hashes come from the
// configured engines.
inline uint64_t EngineMix(uint64_t key) { return key * 0x9E3779B97F4A7C15ULL; }

// The engine-map key of an engine hash published for KV-cache group `group`: the hash itself in
// group 0 (every engine without groups), else the hash XOR a group-dependent odd constant. XOR
// makes it its own inverse, so a snapshot stores the engine hash (EngineKey of the key) and the
// group comes back from the block's scope. A collision between (hash, group) pairs needs two
// engine hashes differing by exactly that constant, as unlikely as two equal engine hashes.
inline uint64_t EngineKey(uint64_t engine_hash, uint32_t group) {
  if (group == 0) return engine_hash;
  const uint64_t salt =
      (static_cast<uint64_t>(group) * 0xD6E8FEB86659FD93ULL) ^ 0xA0761D6478BD642FULL;
  return engine_hash ^ (salt | 1);
}

// 12 bytes: the engine key as two halves (no 8-byte alignment padding) and the block.
struct EngineSlot {
  uint32_t lo;
  uint32_t hi;
  uint32_t block;
  uint64_t key() const { return (static_cast<uint64_t>(hi) << 32) | lo; }
};
static_assert(sizeof(EngineSlot) == 12);
struct EngineTraits {
  static bool Empty(const EngineSlot& s) { return s.block == kNone; }
  static EngineSlot MakeEmpty() { return {0, 0, kNone}; }
  static uint64_t Hash(const EngineSlot& s) { return EngineMix(s.key()); }
};

}  // namespace kvindex::index_internal

#endif  // KVINDEX_SRC_ENGINE_MAP_H_
