// LRU stack depths of one stream of block accesses (Mattson, Gecsei, Slutz and Traiger, 1970):
// a block's depth is its position in the recency stack, 1 for the block accessed last, i.e. the
// number of distinct blocks accessed since its own last access, itself included. Under LRU a
// block is resident in a cache of C blocks exactly when its depth is at most C, for every C at
// once, which is what makes a whole hit-rate curve computable in one pass.
//
// Kept as a Fenwick tree over access times holding a 1 at each block's latest access: a depth is
// the count of marks from that access to now, O(log n) per query and per access.
//
// Thread safety: not thread-safe; one per stream.
#ifndef KVINDEX_SRC_SIM_STACK_DEPTHS_H_
#define KVINDEX_SRC_SIM_STACK_DEPTHS_H_

#include <cstdint>
#include <vector>

#include "kvindex/sim/block_cache.h"

namespace kvindex::sim {

class StackDepths {
 public:
  // Blocks in [0, universe).
  explicit StackDepths(uint32_t universe) : last_(universe, 0) {}

  // Starts an empty stream of at most `accesses` accesses (forgets the previous stream, in time
  // proportional to the blocks it touched).
  void Reset(uint64_t accesses) {
    for (BlockIndex b : touched_) last_[b] = 0;
    touched_.clear();
    tree_.assign(static_cast<size_t>(accesses) + 1, 0);
    now_ = 0;
    marked_ = 0;
  }

  // The depth of `block` now, or 0 when the stream has not accessed it yet.
  uint64_t Depth(BlockIndex block) const {
    const uint64_t last = last_[block];
    return last == 0 ? 0 : marked_ - PrefixSum(last - 1);
  }

  // Distinct blocks accessed so far (the stream's working set).
  uint64_t distinct() const { return marked_; }

  // Records an access of `block` (at most `accesses` of them since Reset()).
  void Touch(BlockIndex block) {
    const uint64_t last = last_[block];
    if (last != 0) {
      Add(last, -1);
    } else {
      ++marked_;
      touched_.push_back(block);
    }
    last_[block] = ++now_;
    Add(now_, +1);
  }

 private:
  uint64_t PrefixSum(uint64_t pos) const {
    uint64_t sum = 0;
    for (; pos > 0; pos &= pos - 1) sum += tree_[pos];
    return sum;
  }

  void Add(uint64_t pos, int delta) {
    for (; pos < tree_.size(); pos += pos & (~pos + 1)) {
      tree_[pos] = static_cast<uint32_t>(static_cast<int64_t>(tree_[pos]) + delta);
    }
  }

  std::vector<uint64_t> last_;  // per block: the time (from 1) of its latest access, 0 = never
  std::vector<uint32_t> tree_;  // Fenwick tree over times 1..accesses
  std::vector<BlockIndex> touched_;
  uint64_t now_ = 0;
  uint64_t marked_ = 0;
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SRC_SIM_STACK_DEPTHS_H_
