#include "kvindex/sim/hit_curve.h"

#include <algorithm>
#include <string>

#include "router.h"
#include "stack_depths.h"

namespace kvindex::sim {

CurveStep HitCurve::At(uint64_t capacity) const {
  auto it = std::upper_bound(steps.begin(), steps.end(), capacity,
                             [](uint64_t c, const CurveStep& s) { return c < s.capacity; });
  return it == steps.begin() ? CurveStep{capacity, 0, 0} : *(it - 1);
}

Status CurveApplies(const SimConfig& config) {
  if (config.policy != PolicyKind::kLru) {
    return Status::InvalidArgument(std::string("policy ") + std::string(PolicyName(config.policy)) +
                                   ": the exact curve needs a stack policy (lru only)");
  }
  if (config.router == RouterKind::kCacheAware) {
    return Status::InvalidArgument(
        "router cache-aware: the curve does not apply (its routing depends on cache contents, so "
        "each capacity routes differently)");
  }
  if (config.cpu_capacity != 0 || config.disk_capacity != 0) {
    return Status::InvalidArgument("shared CPU/disk tiers: the curve covers the GPU tier alone");
  }
  if (config.instances == 0) return Status::InvalidArgument("instances must be at least 1");
  return Status::Ok();
}

Result<HitCurve> LruHitCurve(const PreparedTrace& trace, const SimConfig& config) {
  KVINDEX_RETURN_IF_ERROR(CurveApplies(config));
  const uint32_t n = config.instances;
  const auto& blocks = trace.blocks();
  if (trace.distinct_blocks() >= (uint64_t{1} << 31) || blocks.size() >= (uint64_t{1} << 32)) {
    return Status::LimitExceeded(
        "the curve covers traces of fewer than 2^31 distinct blocks and 2^32 block accesses");
  }

  // Route first: no router used here looks at the caches, so each instance's request stream is
  // the same at every capacity.
  LoadRouter router(trace, config);
  std::vector<uint32_t> instance_of(trace.requests());
  std::vector<uint64_t> accesses(n, 0);
  for (size_t i = 0; i < trace.requests(); ++i) {
    const uint32_t k = router.Route(i);
    const uint64_t len = trace.end(i) - trace.begin(i);
    instance_of[i] = k;
    accesses[k] += len;
    router.Record(i, k, len);
  }

  // diff[d]: how many counts start at capacity d (a block resident for every C >= d); summed over
  // instances, since the cluster's count at C is the sum of its instances' counts at C. Both
  // counts of a depth side by side, 32-bit (no count exceeds the trace's blocks): one cache line
  // per access, half the footprint.
  struct Diff {
    uint32_t prefix;
    uint32_t any;
  };
  std::vector<Diff> diff(static_cast<size_t>(trace.distinct_blocks()) + 2);  // zeroed
  HitCurve curve;
  curve.config = config;
  curve.blocks = blocks.size();
  StackDepths stack(trace.distinct_blocks());
  std::vector<uint64_t> depth;
  depth.reserve(256);
  for (uint32_t k = 0; k < n; ++k) {
    if (accesses[k] == 0) continue;
    stack.Reset();
    for (size_t i = 0; i < trace.requests(); ++i) {
      if (instance_of[i] != k) continue;
      const uint64_t begin = trace.begin(i), end = trace.end(i);
      // Lookup changes nothing: every depth is taken before the request's own accesses (a block
      // repeated in the request has the same depth both times). The prefix is resident at C as
      // long as the running maximum of the depths is <= C; a never-seen block (depth 0) ends it
      // at every capacity.
      depth.clear();
      for (uint64_t b = begin; b < end; ++b) depth.push_back(stack.Depth(blocks[b]));
      uint64_t run_max = 0;
      bool prefix_open = true;
      for (uint64_t d : depth) {
        if (d == 0) {
          prefix_open = false;
          continue;
        }
        ++diff[d].any;
        if (prefix_open) {
          run_max = std::max(run_max, d);
          ++diff[run_max].prefix;
        }
      }
      // Access: in order, so a repeated block sees the stack its first access left.
      for (uint64_t b = begin; b < end; ++b) stack.Touch(blocks[b]);
    }
    curve.working_set = std::max(curve.working_set, stack.distinct());
  }

  CurveStep current;
  curve.steps.push_back(current);  // capacity 1, filled below
  for (uint64_t c = 1; c < diff.size(); ++c) {
    if (diff[c].prefix == 0 && diff[c].any == 0) continue;
    current.prefix_hit_blocks += diff[c].prefix;
    current.any_hit_blocks += diff[c].any;
    current.capacity = c;
    if (c == 1) {
      curve.steps.back() = current;
    } else {
      curve.steps.push_back(current);
    }
  }
  return curve;
}

}  // namespace kvindex::sim
