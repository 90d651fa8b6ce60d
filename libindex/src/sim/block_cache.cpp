#include "kvindex/sim/block_cache.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace kvindex::sim {

std::optional<PolicyKind> ParsePolicy(std::string_view name) {
  if (name == "lru") return PolicyKind::kLru;
  if (name == "lfu") return PolicyKind::kLfu;
  if (name == "fifo") return PolicyKind::kFifo;
  if (name == "prefix-lru") return PolicyKind::kPrefixLru;
  return std::nullopt;
}

std::string_view PolicyName(PolicyKind policy) {
  switch (policy) {
    case PolicyKind::kLru: return "lru";
    case PolicyKind::kLfu: return "lfu";
    case PolicyKind::kFifo: return "fifo";
    case PolicyKind::kPrefixLru: return "prefix-lru";
  }
  return "?";
}

BlockCache::BlockCache(PolicyKind policy, uint64_t capacity, uint32_t universe)
    : policy_(policy), capacity_(capacity), resident_(universe, 0) {
  assert(capacity >= 1);
  // Default-initialised (not zeroed): see the header.
  if (policy == PolicyKind::kPrefixLru) {
    stamp_.reset(new uint64_t[universe]);
    parent_.reset(new BlockIndex[universe]);
    children_.reset(new uint32_t[universe]);
  } else {
    links_.reset(new Links[universe]);
    if (policy == PolicyKind::kLfu) freq_.reset(new uint64_t[universe]);
  }
}

void BlockCache::PushFront(List& list, BlockIndex block) {
  links_[block].prev = kNoBlock;
  links_[block].next = list.head;
  if (list.head != kNoBlock) links_[list.head].prev = block;
  list.head = block;
  if (list.tail == kNoBlock) list.tail = block;
}

void BlockCache::Unlink(List& list, BlockIndex block) {
  const BlockIndex prev = links_[block].prev, next = links_[block].next;
  if (prev != kNoBlock) {
    links_[prev].next = next;
  } else {
    list.head = next;
  }
  if (next != kNoBlock) {
    links_[next].prev = prev;
  } else {
    list.tail = prev;
  }
  links_[block].prev = links_[block].next = kNoBlock;
}

BlockCache::List& BlockCache::Bucket(uint64_t freq) {
  if (freq >= buckets_.size()) buckets_.resize(static_cast<size_t>(freq) * 2 + 2);
  return buckets_[freq];
}

void BlockCache::PushLeaf(BlockIndex block) {
  leaves_.emplace_back(stamp_[block], block);
  std::push_heap(leaves_.begin(), leaves_.end(), std::greater<>());
  if (leaves_.size() > 2 * size_ + 64) CompactLeaves();
}

// Drops stale heap entries: amortised O(1) per push, since it runs only once the heap holds more
// than twice as many entries as there are resident blocks.
void BlockCache::CompactLeaves() {
  leaves_.erase(std::remove_if(leaves_.begin(), leaves_.end(),
                               [this](const std::pair<uint64_t, BlockIndex>& e) {
                                 return resident_[e.second] == 0 || stamp_[e.second] != e.first ||
                                        children_[e.second] != 0;
                               }),
                leaves_.end());
  std::make_heap(leaves_.begin(), leaves_.end(), std::greater<>());
}

void BlockCache::Hit(BlockIndex block) {
  switch (policy_) {
    case PolicyKind::kLru:
      if (list_.head != block) {
        Unlink(list_, block);
        PushFront(list_, block);
      }
      break;
    case PolicyKind::kFifo:
      break;
    case PolicyKind::kLfu: {
      const uint64_t freq = freq_[block];
      Unlink(Bucket(freq), block);
      if (min_freq_ == freq && Bucket(freq).head == kNoBlock) min_freq_ = freq + 1;
      freq_[block] = freq + 1;
      PushFront(Bucket(freq + 1), block);
      break;
    }
    case PolicyKind::kPrefixLru:
      stamp_[block] = ++clock_;
      if (children_[block] == 0) PushLeaf(block);
      break;
  }
}

BlockIndex BlockCache::Evict() {
  BlockIndex victim = kNoBlock;
  switch (policy_) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
      victim = list_.tail;
      Unlink(list_, victim);
      break;
    case PolicyKind::kLfu:
      victim = Bucket(min_freq_).tail;
      Unlink(Bucket(min_freq_), victim);
      break;
    case PolicyKind::kPrefixLru:
      while (true) {
        assert(!leaves_.empty());
        std::pop_heap(leaves_.begin(), leaves_.end(), std::greater<>());
        const auto [stamp, candidate] = leaves_.back();
        leaves_.pop_back();
        if (resident_[candidate] != 0 && stamp_[candidate] == stamp &&
            children_[candidate] == 0) {
          victim = candidate;
          break;
        }
      }
      if (const BlockIndex parent = parent_[victim]; parent != kNoBlock) {
        assert(resident_[parent] != 0);  // a parent is never evicted before its children
        if (--children_[parent] == 0) PushLeaf(parent);
      }
      break;
  }
  resident_[victim] = 0;
  --size_;
  return victim;
}

void BlockCache::Insert(BlockIndex block, BlockIndex parent) {
  resident_[block] = 1;
  ++size_;
  switch (policy_) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
      PushFront(list_, block);
      break;
    case PolicyKind::kLfu:
      freq_[block] = 1;
      min_freq_ = 1;
      PushFront(Bucket(1), block);
      break;
    case PolicyKind::kPrefixLru:
      stamp_[block] = ++clock_;
      parent_[block] = kNoBlock;
      children_[block] = 0;
      // The parent may have been the victim of this very insert (a cache too small for the
      // chain); the block then starts a new root.
      if (parent != kNoBlock && parent != block && resident_[parent] != 0) {
        parent_[block] = parent;
        ++children_[parent];
      }
      PushLeaf(block);
      break;
  }
}

AccessOutcome BlockCache::Access(BlockIndex block, BlockIndex parent) {
  AccessOutcome outcome;
  if (resident_[block] != 0) {
    outcome.hit = true;
    Hit(block);
    return outcome;
  }
  if (size_ >= capacity_) outcome.victim = Evict();
  Insert(block, parent);
  return outcome;
}

uint64_t BlockCache::AccessSequence(const BlockIndex* blocks, size_t n) {
  uint64_t evictions = 0;
  BlockIndex parent = kNoBlock;
  for (size_t i = 0; i < n; ++i) {
    if (Access(blocks[i], parent).victim != kNoBlock) ++evictions;
    parent = blocks[i];
  }
  return evictions;
}

}  // namespace kvindex::sim
