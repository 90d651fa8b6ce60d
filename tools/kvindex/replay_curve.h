// `kvindex replay TRACE --curve`: the exact LRU hit-rate curve (docs/simulation.md "Hit-rate
// curves") for each router × instance count of the grid: a table at log-spaced capacities, the
// capacities that reach 50/80/90/95/99% of the unbounded cache's hits, and the whole step
// function in --json / --csv, drawn by --plot.
//
// Thread safety: RunCurve() runs on the calling thread.
#ifndef KVINDEX_TOOLS_REPLAY_CURVE_H_
#define KVINDEX_TOOLS_REPLAY_CURVE_H_

#include <cstdint>

#include "kvindex/core/status.h"
#include "kvindex/files/request_trace.h"
#include "kvindex/sim/simulator.h"

#include "replay_options.h"

namespace kvindex::cli {

// The rows of the --curve table when --curve-points is not given.
inline constexpr uint64_t kDefaultCurvePoints = 16;

// The usage errors of --curve and --curve-points, found without reading the trace:
// kInvalidArgument naming the flag (a policy other than lru, the cache-aware router, shared
// tiers, --capacity, --window, --mode storage-benchmark, --curve-points without --curve).
Status CheckCurve(const ReplayOptions& options);

// Computes and writes the curves of `prepared` (read from `trace`; both borrowed for the call).
// kIoError naming an output that cannot be written.
Status RunCurve(const ReplayOptions& options, const Trace& trace,
                const sim::PreparedTrace& prepared, uint32_t block_tokens);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_CURVE_H_
