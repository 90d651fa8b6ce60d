// Block records: the 32-byte record of a resident block, its presence array (which holder holds
// it in which tiers), the block table's slot, and the references to a record that outlive it
// (store object keys, the eviction heap). Records live in fixed-size 2 MiB chunks; the layout is
// docs/architecture.md "Index memory layout". Private to the index layer.
//
// Thread safety: none; PrefixIndex guards records with its reader-writer lock (index_impl.h).
#ifndef KVINDEX_SRC_BLOCK_RECORDS_H_
#define KVINDEX_SRC_BLOCK_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <sys/mman.h>

#include "flat_table.h"

namespace kvindex::index_internal {

constexpr uint32_t kNone = UINT32_MAX;  // no record (and no holder, tier or scope id)
constexpr uint32_t kMaxTiers = 16;      // tier bitmask width
constexpr uint32_t kChunkBits = 16;     // a chunk holds 2^kChunkBits records
constexpr uint32_t kChunkSize = 1u << kChunkBits;
constexpr uint16_t kInline = 2;  // presences a record holds without a heap array

// One holder (source at one DP rank) holding a block in the tiers of a bitmask.
struct Presence {
  uint16_t holder;
  uint16_t tiers;
};

// A resident block. `ns` is 0 for blocks keyed by a prefix hash, 1 + instance index for blocks
// keyed by that instance's engine-hash chain (tokenless events). `gen` changes when the record is
// freed, so stale references (the eviction heap, store object keys) are detected. Engine-map
// entries carry no generation: `engine_refs` counts the entries pointing at the record (sticky at
// kStickyRefs), and a record freed while some still do is not reused until every engine map has
// dropped them (MaybeRecycle()); a record freed with no entry left is reusable at once.
constexpr uint8_t kStickyRefs = 255;
struct Block {
  uint64_t hash = 0;
  uint32_t scope = 0;
  uint32_t ns = 0;
  uint32_t gen = 0;
  uint16_t count = 0;
  uint8_t cap_log2 = 1;  // presence capacity 2^cap_log2; kInline (2) = inline
  uint8_t engine_refs = 0;
  union Store {
    Presence inl[kInline];
    Presence* heap;
  } store;

  uint32_t cap() const { return 1u << cap_log2; }
  bool inline_store() const { return cap_log2 <= 1; }
  Presence* data() { return inline_store() ? store.inl : store.heap; }
  const Presence* data() const { return inline_store() ? store.inl : store.heap; }
  void AddRef() {
    if (engine_refs != kStickyRefs) ++engine_refs;
  }
  void DropRef() {
    if (engine_refs != kStickyRefs && engine_refs != 0) --engine_refs;
  }
};
static_assert(kInline == 2, "cap_log2 = 1 is the inline store");
static_assert(sizeof(Block) == 32, "docs/architecture.md documents a 32-byte block record");

// The block table hash of the key (prefix or chain hash, scope id, key space `ns`). The table's
// home bucket and the slot's tag are its high 32 bits.
inline uint64_t KeyHash(uint64_t hash, uint32_t scope, uint32_t ns) {
  return internal::Mix64(hash ^
                         (((static_cast<uint64_t>(scope) << 32) | ns) * 0x9E3779B97F4A7C15ULL));
}

// A block table slot: the high 32 bits of the block's KeyHash() (compared before the record is
// read) and the record index (kNone: empty).
struct BlockSlot {
  uint32_t tag;
  uint32_t idx;
};
struct BlockTraits {
  static bool Empty(const BlockSlot& s) { return s.idx == kNone; }
  static BlockSlot MakeEmpty() { return {0, kNone}; }
  static uint64_t Hash(const BlockSlot& s) { return static_cast<uint64_t>(s.tag) << 32; }
};

// A record as of one generation (store object keys): stale once Block::gen differs.
struct BlockRef {
  uint32_t idx;
  uint32_t gen;
};

// An eviction heap entry: the record's touch stamp when it was queued (a min-heap on `touch`).
struct HeapEntry {
  uint64_t touch;
  uint32_t idx;
  uint32_t gen;
  bool operator>(const HeapEntry& o) const { return touch > o.touch; }
};

// Block records live in 2 MiB chunks mapped at a 2 MiB boundary and advised as transparent huge
// pages: one TLB entry covers a chunk, so a query walking records scattered over a large index
// pays one cache miss per record instead of a cache miss plus a page walk (measured: the 128-block
// match is ~1.4x faster; docs/benchmarks.md). Blocks are trivially destructible.
static_assert(std::is_trivially_destructible_v<Block>);
constexpr size_t kChunkBytes = kChunkSize * sizeof(Block);
static_assert(kChunkBytes == (size_t{2} << 20));
// Frees a chunk of records the way MapChunk() (block_records.cpp) obtained it.
struct UnmapChunk {
  bool mapped = true;  // false: the heap fallback of MapChunk()
  void operator()(Block* p) const {
    if (mapped) {
      munmap(p, kChunkBytes);
    } else {
      delete[] p;
    }
  }
};

}  // namespace kvindex::index_internal

#endif  // KVINDEX_SRC_BLOCK_RECORDS_H_
