// Eviction under --max-blocks: the least recently touched block goes first. Every block has a
// touch stamp (stored or matched); the heap holds (stamp, record) entries, and an entry whose
// stamp is stale is requeued at the record's real stamp instead of evicting it.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <vector>

#include "index_impl.h"

namespace kvindex {

void PrefixIndex::Impl::QueueForEviction(uint32_t idx) {
  const uint64_t now = clock.fetch_add(1, std::memory_order_relaxed);
  touch(idx).store(now, std::memory_order_relaxed);
  heap.push_back({now, idx, block(idx).gen});
  std::push_heap(heap.begin(), heap.end(), std::greater<>());
}

void PrefixIndex::Impl::EvictBlock(uint32_t idx) {
  Block& b = block(idx);
  const Presence* p = b.data();
  for (uint16_t i = 0; i < b.count; ++i) {
    Holder& h = holders[p[i].holder];
    for (uint16_t m = p[i].tiers; m != 0; m &= static_cast<uint16_t>(m - 1)) {
      --h.tier_presences[std::countr_zero(m)];
      --presences;
    }
  }
  FreeBlock(idx);
  ++evictions;
}

void PrefixIndex::Impl::MaybeEvict(ApplyResult& r) {
  if (!evicting()) return;
  while (live_blocks > options.max_blocks && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const HeapEntry e = heap.back();
    heap.pop_back();
    Block& b = block(e.idx);
    if (b.gen != e.gen || b.count == 0) continue;  // freed since
    const uint64_t last = touch(e.idx).load(std::memory_order_relaxed);
    if (last != e.touch) {  // touched since it was queued: requeue at its real time
      heap.push_back({last, e.idx, e.gen});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
      continue;
    }
    EvictBlock(e.idx);
    ++r.evicted;
    Tick();
  }
  // Stale heap entries of removed blocks: rebuild when they dominate.
  if (heap.size() > 2 * live_blocks + 1024) {
    std::vector<HeapEntry> fresh;
    fresh.reserve(live_blocks);
    for (const HeapEntry& e : heap) {
      const Block& b = block(e.idx);
      if (b.gen == e.gen && b.count > 0) fresh.push_back(e);
    }
    std::make_heap(fresh.begin(), fresh.end(), std::greater<>());
    heap.swap(fresh);
  }
}

}  // namespace kvindex
