// The exact LRU hit-rate curve of a trace (docs/simulation.md "Hit-rate curves"): the prefix-hit
// and any-hit block counts the simulator would report at every per-instance GPU capacity from 1
// block to the working set, from one pass per instance instead of one simulation per capacity.
//
// Exact because LRU is a stack policy: a cache of C blocks holds exactly the C most recently
// accessed blocks, so a block is resident at lookup for every C at or above its stack depth at
// that moment. The routers must not depend on cache contents (cache-aware does), so that each
// instance sees the same stream at every capacity, and there must be no shared tier.
//
// Thread safety: LruHitCurve() only reads the trace; calls may run in parallel.
#ifndef KVINDEX_SIM_HIT_CURVE_H_
#define KVINDEX_SIM_HIT_CURVE_H_

#include <cstdint>
#include <vector>

#include "kvindex/core/status.h"
#include "kvindex/sim/simulator.h"

namespace kvindex::sim {

// The cluster's counts at every per-instance capacity in [capacity, next step's capacity).
struct CurveStep {
  uint64_t capacity = 1;
  uint64_t prefix_hit_blocks = 0;
  uint64_t any_hit_blocks = 0;
};

struct HitCurve {
  SimConfig config;  // policy, router, instances and seed; capacity and tiers unused
  uint64_t blocks = 0;
  // The largest number of distinct blocks one instance accesses: from this capacity on, every
  // count is the unbounded cache's.
  uint64_t working_set = 0;
  // Ascending capacities, the first 1, one step wherever a count changes; the last step holds the
  // unbounded cache's counts.
  std::vector<CurveStep> steps;

  // The counts at `capacity` (>= 1): those of the last step at or below it.
  CurveStep At(uint64_t capacity) const;
  const CurveStep& Unbounded() const { return steps.back(); }
};

// Ok when the curve of `config` is exact: policy lru, a router that does not look at the caches
// (not cache-aware), no CPU or disk tier. Otherwise kInvalidArgument saying why.
Status CurveApplies(const SimConfig& config);

// The curve of `trace` under `config` (CurveApplies() must hold: else its error). O(blocks ×
// log blocks) time, O(distinct blocks + blocks) memory. `trace` is only borrowed for the call.
Result<HitCurve> LruHitCurve(const PreparedTrace& trace, const SimConfig& config);

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_HIT_CURVE_H_
