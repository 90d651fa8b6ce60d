// The reuse report of a trace (`kvindex replay --reuse`, docs/simulation.md "Reuse"): per request
// class, the share of blocks and how far back their previous use lies, in distinct blocks (the
// LRU stack depth: the smallest single cache that would still hold the block) and in seconds.
//
// Classes, from what the trace formats carry, the first that applies:
//   continuation  a Qwen-Bailian request whose parent_chat_id names a chat of an earlier request;
//   shared-prefix its first block was already used by an earlier request (a shared system prompt,
//                 or in a Mooncake trace, which has no chat ids, also an earlier turn);
//   fresh         neither.
// Distances are taken at lookup (before the request's own accesses), over the whole trace as one
// stream, independent of routing and capacity.
//
// Thread safety: AnalyseReuse() only reads the trace.
#ifndef KVINDEX_SIM_REUSE_H_
#define KVINDEX_SIM_REUSE_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvindex/sim/simulator.h"

namespace kvindex::sim {

enum class RequestClass : uint8_t { kContinuation = 0, kSharedPrefix = 1, kFresh = 2 };
inline constexpr int kRequestClasses = 3;
std::string_view RequestClassName(RequestClass c);

// Nearest-rank percentiles (the value at rank ceil(p/100 × n) of the sorted values); 0 when
// there is no value.
template <typename T>
struct Percentiles {
  T p50 = 0;
  T p90 = 0;
  T p99 = 0;
};

struct ReuseStats {
  uint64_t requests = 0;
  uint64_t blocks = 0;
  // Blocks some earlier request had used (the rest are first uses).
  uint64_t reused_blocks = 0;
  // Over the reused blocks: stack depth in distinct blocks, and seconds since the previous use.
  Percentiles<uint64_t> distance_blocks;
  Percentiles<double> distance_seconds;
};

struct ReuseReport {
  ReuseStats classes[kRequestClasses];  // indexed by RequestClass
  ReuseStats all;
};

// The report of `trace` (borrowed for the call). O(blocks × log blocks).
ReuseReport AnalyseReuse(const PreparedTrace& trace);

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_REUSE_H_
