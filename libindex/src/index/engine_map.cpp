// The engine-hash maps: the sweep that drops an instance's stale entries after a clear. Lookups,
// inserts and erases are inline in index_impl.h (the apply and match paths use them per block).

#include "engine_map.h"

#include <cstdint>
#include <iterator>
#include <vector>

#include "index_impl.h"

namespace kvindex {

// Drops entries whose block is gone or no longer held by the instance, so the map does not grow
// with history (docs/upstream-pitfalls.md "Eviction counts exactly and leaks nothing").
void PrefixIndex::Impl::SweepEngine(uint32_t ii) {
  Instance& inst = *instances[ii];
  std::vector<uint64_t> dead;
  inst.engine.ForEach([&](const EngineSlot& s) {
    const Block& b = block(s.block);
    if (b.count == 0 || !InstanceHolds(b, ii)) dead.push_back(s.key());
  });
  for (uint64_t key : dead) {
    EngineErase(inst, key);
    Tick();
  }
  for (auto it = inst.objects.begin(); it != inst.objects.end();) {
    auto& refs = it->second;
    std::erase_if(refs, [&](const BlockRef& r) {
      const Block& b = block(r.idx);
      return b.gen != r.gen || b.count == 0 || !InstanceHolds(b, ii);
    });
    it = refs.empty() ? inst.objects.erase(it) : std::next(it);
  }
}

}  // namespace kvindex
