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
    : policy_(policy), capacity_(capacity), slot_(universe, kNoNode) {
  assert(capacity >= 1);
  // Nodes are recycled, so a finite cache never holds more than `capacity` of them.
  nodes_.reserve(static_cast<size_t>(std::min<uint64_t>(capacity, universe)));
}

void BlockCache::PushFront(List& list, uint32_t node) {
  Node& n = nodes_[node];
  n.prev = kNoNode;
  n.next = list.head;
  if (list.head != kNoNode) nodes_[list.head].prev = node;
  list.head = node;
  if (list.tail == kNoNode) list.tail = node;
}

void BlockCache::Unlink(List& list, uint32_t node) {
  Node& n = nodes_[node];
  if (n.prev != kNoNode) {
    nodes_[n.prev].next = n.next;
  } else {
    list.head = n.next;
  }
  if (n.next != kNoNode) {
    nodes_[n.next].prev = n.prev;
  } else {
    list.tail = n.prev;
  }
  n.prev = n.next = kNoNode;
}

BlockCache::List& BlockCache::Bucket(uint64_t freq) {
  if (freq >= buckets_.size()) buckets_.resize(static_cast<size_t>(freq) * 2 + 2);
  return buckets_[freq];
}

uint32_t BlockCache::NewNode(BlockIndex block) {
  uint32_t node;
  if (!free_nodes_.empty()) {
    node = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    node = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[node] = Node{};
  nodes_[node].block = block;
  slot_[block] = node;
  return node;
}

void BlockCache::PushLeaf(uint32_t node) {
  leaves_.emplace_back(nodes_[node].stamp, node);
  std::push_heap(leaves_.begin(), leaves_.end(), std::greater<>());
  if (leaves_.size() > 2 * size_ + 64) CompactLeaves();
}

// Drops stale heap entries: amortised O(1) per push, since it runs only once the heap holds more
// than twice as many entries as there are resident blocks.
void BlockCache::CompactLeaves() {
  leaves_.erase(std::remove_if(leaves_.begin(), leaves_.end(),
                               [this](const std::pair<uint64_t, uint32_t>& e) {
                                 const Node& n = nodes_[e.second];
                                 return n.block == kNoBlock || n.stamp != e.first ||
                                        n.children != 0;
                               }),
                leaves_.end());
  std::make_heap(leaves_.begin(), leaves_.end(), std::greater<>());
}

void BlockCache::Hit(uint32_t node) {
  Node& n = nodes_[node];
  switch (policy_) {
    case PolicyKind::kLru:
      Unlink(list_, node);
      PushFront(list_, node);
      break;
    case PolicyKind::kFifo:
      break;
    case PolicyKind::kLfu: {
      const uint64_t freq = n.freq;
      Unlink(Bucket(freq), node);
      if (min_freq_ == freq && Bucket(freq).head == kNoNode) min_freq_ = freq + 1;
      n.freq = freq + 1;
      PushFront(Bucket(freq + 1), node);
      break;
    }
    case PolicyKind::kPrefixLru:
      n.stamp = ++clock_;
      if (n.children == 0) PushLeaf(node);
      break;
  }
}

BlockIndex BlockCache::Evict() {
  uint32_t node = kNoNode;
  switch (policy_) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
      node = list_.tail;
      Unlink(list_, node);
      break;
    case PolicyKind::kLfu:
      node = Bucket(min_freq_).tail;
      Unlink(Bucket(min_freq_), node);
      break;
    case PolicyKind::kPrefixLru:
      while (true) {
        assert(!leaves_.empty());
        std::pop_heap(leaves_.begin(), leaves_.end(), std::greater<>());
        const auto [stamp, candidate] = leaves_.back();
        leaves_.pop_back();
        const Node& n = nodes_[candidate];
        if (n.block != kNoBlock && n.stamp == stamp && n.children == 0) {
          node = candidate;
          break;
        }
      }
      if (const BlockIndex parent = nodes_[node].parent; parent != kNoBlock) {
        const uint32_t p = slot_[parent];
        assert(p != kNoNode);  // a parent is never evicted before its children
        if (--nodes_[p].children == 0) PushLeaf(p);
      }
      break;
  }
  const BlockIndex victim = nodes_[node].block;
  slot_[victim] = kNoNode;
  nodes_[node].block = kNoBlock;
  free_nodes_.push_back(node);
  --size_;
  return victim;
}

void BlockCache::Insert(BlockIndex block, BlockIndex parent) {
  const uint32_t node = NewNode(block);
  ++size_;
  switch (policy_) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
      PushFront(list_, node);
      break;
    case PolicyKind::kLfu:
      nodes_[node].freq = 1;
      min_freq_ = 1;
      PushFront(Bucket(1), node);
      break;
    case PolicyKind::kPrefixLru: {
      Node& n = nodes_[node];
      n.stamp = ++clock_;
      // The parent may have been the victim of this very insert (a cache too small for the
      // chain); the block then starts a new root.
      if (parent != kNoBlock && parent != block && slot_[parent] != kNoNode) {
        n.parent = parent;
        ++nodes_[slot_[parent]].children;
      }
      PushLeaf(node);
      break;
    }
  }
}

AccessOutcome BlockCache::Access(BlockIndex block, BlockIndex parent) {
  AccessOutcome outcome;
  const uint32_t node = slot_[block];
  if (node != kNoNode) {
    outcome.hit = true;
    Hit(node);
    return outcome;
  }
  if (size_ >= capacity_) outcome.victim = Evict();
  Insert(block, parent);
  return outcome;
}

}  // namespace kvindex::sim
