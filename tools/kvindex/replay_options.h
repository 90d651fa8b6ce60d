// The options of `kvindex replay INPUT...` (docs/cli.md) as the command line sets them: the
// trace-replay grid and outputs, and the capture-replay flags. Filled once by the command, then
// only read.
//
// Thread safety: a plain value.
#ifndef KVINDEX_TOOLS_REPLAY_OPTIONS_H_
#define KVINDEX_TOOLS_REPLAY_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvindex/sim/block_cache.h"

namespace kvindex::cli {

struct ReplayOptions {
  std::string input;                // the first input; a trace has exactly one
  std::vector<std::string> inputs;  // a capture may be several files (rotation), in order
  bool dump = false;
  std::string queries;
  uint64_t max_blocks = 0;
  uint32_t block_tokens = 0;  // 0 = the trace format's own
  uint64_t max_requests = 0;  // 0 = all
  bool skip_bad = false;
  std::vector<uint64_t> capacities{sim::kInfiniteCapacity};
  std::vector<std::string> policies{"lru"};         // names sim::ParsePolicy() accepts
  std::vector<std::string> routers{"round-robin"};  // names sim::ParseRouter() accepts
  std::vector<uint32_t> instances{1};
  uint64_t seed = 0;
  uint32_t threads = 0;                      // 0 = hardware concurrency
  std::string json;                          // empty = none; "-" = stdout
  std::vector<uint64_t> cpu_capacities{0};   // 0 = no CPU tier
  std::vector<uint64_t> disk_capacities{0};  // 0 = no disk tier
  std::string mode = "simulate";
  double window_s = 0;                 // 0 = no windows
  std::string csv;                     // empty = none; "-" = stdout
  std::string plot;                    // empty = none
  std::string to_trace;                // capture only: derive a request trace into FILE
  std::string write_snapshot;          // capture only: write the rebuilt index as a snapshot
  std::string tier_write = "through";  // names sim::ParseTierWrite() accepts
  bool curve = false;                  // --curve: the exact LRU hit-rate curve
  uint64_t curve_points = 0;           // rows of the --curve table; 0 = not given (16)
  bool reuse = false;                  // --reuse: the reuse report instead of the grid
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_OPTIONS_H_
