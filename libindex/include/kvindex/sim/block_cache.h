// BlockCache: one instance's simulated cache tier of a fixed number of blocks, under one eviction
// policy (SPEC §6, docs/simulation.md).
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

#include <cstdint>
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
  bool Contains(BlockIndex block) const { return slot_[block] != kNoNode; }

  // Touches `block`: a hit refreshes it (per the policy), a miss inserts it, first evicting one
  // victim when the cache is full. `parent` is the block accessed just before it in the same
  // request (kNoBlock for a request's first block); only prefix-lru uses it.
  AccessOutcome Access(BlockIndex block, BlockIndex parent);

  uint64_t size() const { return size_; }
  uint64_t capacity() const { return capacity_; }
  PolicyKind policy() const { return policy_; }

 private:
  static constexpr uint32_t kNoNode = UINT32_MAX;
  struct Node {
    BlockIndex block = kNoBlock;
    uint32_t prev = kNoNode;
    uint32_t next = kNoNode;
    uint64_t freq = 0;        // lfu: accesses while resident
    uint64_t stamp = 0;       // prefix-lru: last access time
    BlockIndex parent = kNoBlock;  // prefix-lru
    uint32_t children = 0;    // prefix-lru: resident blocks whose parent this is
  };
  // An intrusive doubly linked list of nodes: head = most recent, tail = oldest.
  struct List {
    uint32_t head = kNoNode;
    uint32_t tail = kNoNode;
  };

  void PushFront(List& list, uint32_t node);
  void Unlink(List& list, uint32_t node);
  List& Bucket(uint64_t freq);
  uint32_t NewNode(BlockIndex block);
  void Hit(uint32_t node);
  BlockIndex Evict();
  void Insert(BlockIndex block, BlockIndex parent);
  void PushLeaf(uint32_t node);
  void CompactLeaves();

  PolicyKind policy_;
  uint64_t capacity_;
  uint64_t size_ = 0;
  std::vector<uint32_t> slot_;  // block -> node, kNoNode when absent
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_nodes_;
  List list_;                  // lru, fifo
  std::vector<List> buckets_;  // lfu: one list per frequency
  uint64_t min_freq_ = 0;      // lfu
  uint64_t clock_ = 0;         // prefix-lru
  // prefix-lru: a min-heap of (stamp, node) over leaves; entries made stale by a later access or
  // a new child are skipped when popped and purged when the heap outgrows the cache.
  std::vector<std::pair<uint64_t, uint32_t>> leaves_;
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_BLOCK_CACHE_H_
