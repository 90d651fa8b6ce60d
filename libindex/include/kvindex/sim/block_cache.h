// BlockCache: one instance's simulated cache tier of a fixed number of blocks, under one eviction
// policy (docs/simulation.md "Policies").
//
// Blocks are dense ids in [0, universe) (PreparedTrace maps a trace's hash ids to them). Every
// operation is O(1), except the prefix-lru policy's eviction order, which is O(log n).
//
// Policies:
//   lru         evict the least recently accessed block;
//   lfu         evict the block with the fewest accesses since it was inserted (an insert counts
//               1, a hit adds 1, the count dies with eviction); ties go to the least recently
//               accessed;
//   fifo        evict the block inserted first; hits change nothing;
//   prefix-lru  evict the least recently accessed *leaf*: a block that is no resident block's
//               parent (its parent is the block before it in the request that inserted it). A
//               prefix is never broken in the middle while a longer one depends on it.
//
// Thread safety: not thread-safe; one cache per simulated instance, used by one thread.
#ifndef KVINDEX_SIM_BLOCK_CACHE_H_
#define KVINDEX_SIM_BLOCK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kvindex::sim {

enum class PolicyKind : uint8_t { kLru, kLfu, kFifo, kPrefixLru };

// The policy named `name` ("lru", "lfu", "fifo", "prefix-lru"), or nullopt.
std::optional<PolicyKind> ParsePolicy(std::string_view name);
std::string_view PolicyName(PolicyKind policy);

// A dense block id; kNoBlock stands for "none".
using BlockIndex = uint32_t;
inline constexpr BlockIndex kNoBlock = UINT32_MAX;
// A capacity that never fills.
inline constexpr uint64_t kInfiniteCapacity = UINT64_MAX;

struct AccessOutcome {
  bool hit = false;
  // The block evicted to make room for this insert, or kNoBlock. (A tiered simulation writes it
  // to the next tier.)
  BlockIndex victim = kNoBlock;
};

class BlockCache {
 public:
  // A cache of `capacity` blocks (>= 1, or kInfiniteCapacity) over ids in [0, universe).
  BlockCache(PolicyKind policy, uint64_t capacity, uint32_t universe);

  // True when `block` is resident. Changes nothing.
  bool Contains(BlockIndex block) const { return resident_[block] != 0; }

  // Touches `block`: a hit refreshes it (per the policy), a miss inserts it, first evicting one
  // victim when the cache is full. `parent` is the block accessed just before it in the same
  // request (kNoBlock for a request's first block); only prefix-lru uses it.
  AccessOutcome Access(BlockIndex block, BlockIndex parent);

  // Accesses blocks[0, n) in order, as Access() would with each block's predecessor as its
  // parent (the first has none). Returns the number of evictions. The simulator's hot loop: the
  // same result as calling Access() n times, without a call per block.
  uint64_t AccessSequence(const BlockIndex* blocks, size_t n);

  uint64_t size() const { return size_; }
  uint64_t capacity() const { return capacity_; }
  PolicyKind policy() const { return policy_; }

 private:
  // An intrusive doubly linked list threaded through links_ by block id: head = most
  // recent, tail = oldest.
  struct List {
    BlockIndex head = kNoBlock;
    BlockIndex tail = kNoBlock;
  };

  void PushFront(List& list, BlockIndex block);
  void Unlink(List& list, BlockIndex block);
  List& Bucket(uint64_t freq);
  void Hit(BlockIndex block);
  BlockIndex Evict();
  void Insert(BlockIndex block, BlockIndex parent);
  void PushLeaf(BlockIndex block);
  void CompactLeaves();

  PolicyKind policy_;
  uint64_t capacity_;
  uint64_t size_ = 0;
  // State is kept per block id in flat arrays (structure of arrays), allocated only for what the
  // policy uses: an access touches a few cache lines and never hashes. Only resident_ is
  // initialised; the other arrays are written when a block is inserted and read only while it is
  // resident, so untouched pages are never faulted in. Memory is about universe × (1 + 8 [lru,
  // fifo] / 16 [lfu] / 16 [prefix-lru]) bytes per cache.
  std::vector<uint8_t> resident_;
  struct Links {
    BlockIndex prev;
    BlockIndex next;
  };
  std::unique_ptr<Links[]> links_;             // lru, fifo, lfu: one cache line per access
  List list_;                                  // lru, fifo
  std::unique_ptr<uint64_t[]> freq_;           // lfu: accesses while resident
  std::vector<List> buckets_;                  // lfu: one list per frequency
  uint64_t min_freq_ = 0;                      // lfu
  std::unique_ptr<uint64_t[]> stamp_;          // prefix-lru: last access time
  std::unique_ptr<BlockIndex[]> parent_;       // prefix-lru
  std::unique_ptr<uint32_t[]> children_;       // prefix-lru: resident blocks with this parent
  uint64_t clock_ = 0;                         // prefix-lru
  // prefix-lru: a min-heap of (stamp, block) over leaves; entries made stale by a later access,
  // a new child or an eviction are skipped when popped and purged when the heap outgrows the
  // cache.
  std::vector<std::pair<uint64_t, BlockIndex>> leaves_;
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_BLOCK_CACHE_H_
