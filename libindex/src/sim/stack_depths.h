// LRU stack depths of one stream of block accesses (Mattson, Gecsei, Slutz and Traiger, 1970):
// a block's depth is its position in the recency stack, 1 for the block accessed last, i.e. the
// number of distinct blocks accessed since its own last access, itself included. Under LRU a
// block is resident in a cache of C blocks exactly when its depth is at most C, for every C at
// once, which is what makes a whole hit-rate curve computable in one pass.
//
// Kept as one bit per access time, set at each block's latest access: a depth is the number of
// set bits from that access to now, counted by a Fenwick tree of 32-bit counts over the closed
// 64-bit words plus one popcount within the word (the open word, where every new mark lands, is
// counted from its bits alone, so a new mark updates no tree until its word closes). Both arrays
// stay small: when the times run out, the live marks are renumbered 1..distinct in order
// (compaction) if at most half the times are live, else the times double. Bits and tree hold
// about 2 x distinct bits and 2 x distinct / 64 counts, so they sit in L1/L2 where a tree of
// 64-bit counters over every access time would not.
//
// Thread safety: not thread-safe; one per stream.
#ifndef KVINDEX_SRC_SIM_STACK_DEPTHS_H_
#define KVINDEX_SRC_SIM_STACK_DEPTHS_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "kvindex/sim/block_cache.h"

namespace kvindex::sim {

class StackDepths {
 public:
  // Blocks in [0, universe); universe below 2^31 (times stay below 2 x universe + 4096).
  explicit StackDepths(uint32_t universe) : last_(universe, 0) { touched_.reserve(universe); }

  // Starts an empty stream (forgets the previous stream, in time proportional to the blocks it
  // touched).
  void Reset() {
    for (BlockIndex b : touched_) last_[b] = 0;
    touched_.clear();
    now_ = 0;
    marked_ = 0;
    capacity_ = kMinCapacity;
    bits_.assign(capacity_ / 64, 0);
    RebuildTree();
  }

  // The depth of `block` now, or 0 when the stream has not accessed it yet.
  [[gnu::always_inline]] uint64_t Depth(BlockIndex block) const {
    const uint32_t last = last_[block];
    return last == 0 ? 0 : marked_ - MarksBefore(last - 1);
  }

  // Distinct blocks accessed so far (the stream's working set).
  uint64_t distinct() const { return marked_; }

  // Records an access of `block`. Inlined into the callers' loops: it is most of their work.
  [[gnu::always_inline]] void Touch(BlockIndex block) {
    if (now_ == capacity_) MakeRoom();
    const uint32_t last = last_[block];
    if (last != 0) {
      const uint32_t t = last - 1;
      bits_[t >> 6] &= ~(uint64_t{1} << (t & 63));
      if ((t >> 6) < (now_ >> 6)) TreeAdd((t >> 6) + 1, -1);  // a closed word
    } else {
      ++marked_;
      touched_.push_back(block);
    }
    bits_[now_ >> 6] |= uint64_t{1} << (now_ & 63);
    last_[block] = ++now_;
    if ((now_ & 63) == 0) {  // the open word closes: into the tree
      const uint32_t w = (now_ >> 6) - 1;
      TreeAdd(w + 1, static_cast<int32_t>(PopCount(bits_[w])));
    }
  }

 private:
  static constexpr uint32_t kMinCapacity = 4096;

  // Without a popcount instruction in the target (x86-64's baseline has none), the bit trick
  // inline rather than a library call.
  static uint32_t PopCount(uint64_t x) {
#if defined(__POPCNT__) || !(defined(__x86_64__) || defined(__i386__))
    return static_cast<uint32_t>(std::popcount(x));
#else
    x = x - ((x >> 1) & 0x5555555555555555u);
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return static_cast<uint32_t>((x * 0x0101010101010101u) >> 56);
#endif
  }

  // Marks at times < t (t < now_).
  uint32_t MarksBefore(uint32_t t) const {
    const uint32_t w = t >> 6;
    uint32_t n = PopCount(bits_[w] & ((uint64_t{1} << (t & 63)) - 1));
    for (uint32_t i = w; i > 0; i &= i - 1) n += tree_[i];
    return n;
  }

  // Fenwick tree over words, 1-based: tree_[i] covers words (i - lowbit(i), i].
  void TreeAdd(uint32_t i, int32_t delta) {
    const uint32_t size = static_cast<uint32_t>(tree_.size());
    for (; i < size; i += i & (~i + 1)) {
      tree_[i] = static_cast<uint32_t>(static_cast<int32_t>(tree_[i]) + delta);
    }
  }

  // The tree of the closed words (those below now_'s), built in O(words).
  void RebuildTree() {
    tree_.assign(capacity_ / 64 + 1, 0);
    const uint32_t closed = now_ >> 6;
    for (uint32_t w = 0; w < closed; ++w) tree_[w + 1] = PopCount(bits_[w]);
    for (uint32_t i = 1; i < tree_.size(); ++i) {
      const uint32_t parent = i + (i & (~i + 1));
      if (parent < tree_.size()) tree_[parent] += tree_[i];
    }
  }

  // Every time is used: renumber the live marks 1..marked_ in order when at most half the times
  // are live (a block's new time is its rank among the marks), else double the times.
  [[gnu::noinline]] void MakeRoom() {
    if (marked_ * 2 <= capacity_) {
      for (BlockIndex b : touched_) last_[b] = MarksBefore(last_[b] - 1) + 1;
      std::fill(bits_.begin(), bits_.end(), 0);
      for (uint32_t w = 0; w < marked_ / 64; ++w) bits_[w] = ~uint64_t{0};
      if (marked_ % 64 != 0) bits_[marked_ / 64] = (uint64_t{1} << (marked_ % 64)) - 1;
      now_ = static_cast<uint32_t>(marked_);
    } else {
      capacity_ *= 2;
      bits_.resize(capacity_ / 64, 0);
    }
    RebuildTree();
  }

  std::vector<uint32_t> last_;  // per block: the time (from 1) of its latest access, 0 = never
  std::vector<uint64_t> bits_;  // one bit per time 0..capacity_-1: a block's latest access
  std::vector<uint32_t> tree_;  // Fenwick tree over the closed words
  std::vector<BlockIndex> touched_;
  uint32_t now_ = 0;            // times used: 0..now_-1
  uint32_t capacity_ = 0;       // times available (a multiple of 64)
  uint64_t marked_ = 0;
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SRC_SIM_STACK_DEPTHS_H_
