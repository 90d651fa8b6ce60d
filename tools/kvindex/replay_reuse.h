// `kvindex replay TRACE --reuse`: the reuse report (docs/simulation.md "Reuse") as a table on
// stdout and under "reuse" in --json: per request class, the share of blocks, the share reused,
// and the reuse-distance percentiles in blocks (stack depth) and in seconds.
//
// Thread safety: RunReuse() runs on the calling thread.
#ifndef KVINDEX_TOOLS_REPLAY_REUSE_H_
#define KVINDEX_TOOLS_REPLAY_REUSE_H_

#include "kvindex/core/status.h"
#include "kvindex/files/request_trace.h"
#include "kvindex/sim/simulator.h"

#include "replay_options.h"

namespace kvindex::cli {

// The usage errors of --reuse, found without reading the trace: kInvalidArgument for --reuse
// with --curve, --window, --csv, --plot or --mode storage-benchmark.
Status CheckReuse(const ReplayOptions& options);

// Analyses `prepared` (read from `trace`; both borrowed for the call) and writes the report.
// kIoError naming an output that cannot be written.
Status RunReuse(const ReplayOptions& options, const Trace& trace,
                const sim::PreparedTrace& prepared);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_REUSE_H_
