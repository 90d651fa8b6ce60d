// `kvindex replay TRACE`: a request trace (docs/simulation.md) simulated on a cluster for every configuration
// of the grid (policies x capacities x routers x instance counts x shared tiers), in parallel, or
// counted as the upstream storage benchmark counts (--mode storage-benchmark); the results as a
// table, --json, --csv and --plot.
//
// Thread safety: RunTraceReplay() runs the grid on threads of its own and returns when all end.
#ifndef KVINDEX_TOOLS_REPLAY_TRACE_H_
#define KVINDEX_TOOLS_REPLAY_TRACE_H_

#include "kvindex/core/status.h"

#include "replay_options.h"

namespace kvindex::cli {

// The usage errors CLI11 cannot see in the grid flags (a NaN --window, --plot with nothing to
// draw), found without reading anything: kInvalidArgument naming the flag.
Status CheckGrid(const ReplayOptions& options);

// Runs the trace replay of `options.input`. kInvalidArgument for a bad grid flag; kNotFound /
// kMalformed naming the trace and line for a bad trace, kMalformed for a trace without requests;
// kIoError naming an output that cannot be written.
Status RunTraceReplay(const ReplayOptions& options);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_TRACE_H_
