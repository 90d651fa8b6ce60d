// The trace simulator: a cluster of instances, each with one cache tier, fed a request trace
// through a router (SPEC §6, docs/simulation.md).
//
// Per request, in timestamp order: the router picks an instance; *lookup* counts the longest
// prefix of the request's blocks resident on that instance and the blocks resident on it anywhere
// (lookup changes nothing); then *access* touches every block in order (BlockCache::Access).
//
// Thread safety: a PreparedTrace is immutable after Prepare() and may be shared by many threads,
// each running its own Simulate() (the replay grid does this).
#ifndef KVINDEX_SIM_SIMULATOR_H_
#define KVINDEX_SIM_SIMULATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/request_trace.h"
#include "kvindex/sim/block_cache.h"
#include "kvindex/status.h"

namespace kvindex::sim {

enum class RouterKind : uint8_t { kRoundRobin, kRandom, kLeastLoaded, kCacheAware, kSession };

// The router named `name` ("round-robin", "random", "least-loaded", "cache-aware", "session").
std::optional<RouterKind> ParseRouter(std::string_view name);
std::string_view RouterName(RouterKind router);

// A trace in the simulator's form: hash ids mapped to dense block indices (first appearance
// order), blocks of all requests in one array.
class PreparedTrace {
 public:
  // Fails with kLimitExceeded when the trace has 2^32 - 1 or more distinct blocks.
  static Result<PreparedTrace> Prepare(const Trace& trace);

  size_t requests() const { return input_length_.size(); }
  uint32_t distinct_blocks() const { return distinct_blocks_; }
  TraceFormat format() const { return format_; }
  // Blocks of request `i`, as [begin, end) into blocks().
  uint64_t begin(size_t i) const { return offsets_[i]; }
  uint64_t end(size_t i) const { return offsets_[i + 1]; }
  const std::vector<BlockIndex>& blocks() const { return blocks_; }
  uint64_t input_length(size_t i) const { return input_length_[i]; }
  // Bailian chat ids (-1 when absent).
  int64_t chat_id(size_t i) const { return chat_id_[i]; }
  int64_t parent_chat_id(size_t i) const { return parent_chat_id_[i]; }

 private:
  TraceFormat format_ = TraceFormat::kUnknown;
  uint32_t distinct_blocks_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<BlockIndex> blocks_;
  std::vector<uint64_t> input_length_;
  std::vector<int64_t> chat_id_;
  std::vector<int64_t> parent_chat_id_;
};

struct SimConfig {
  PolicyKind policy = PolicyKind::kLru;
  uint64_t capacity = kInfiniteCapacity;  // blocks per instance, >= 1
  RouterKind router = RouterKind::kRoundRobin;
  uint32_t instances = 1;  // >= 1
  uint64_t seed = 0;       // the random router's SplitMix64 seed
  uint32_t block_tokens = 512;  // tokens per block, for prefix_token and cache-aware routing
};

// Counts of one instance, or of the whole cluster.
struct SimCounts {
  uint64_t requests = 0;
  uint64_t blocks = 0;             // blocks accessed
  uint64_t prefix_hit_blocks = 0;  // Σ longest resident prefix at lookup
  uint64_t any_hit_blocks = 0;     // Σ blocks resident at lookup
  uint64_t evictions = 0;
  uint64_t input_tokens = 0;       // Σ input_length
  uint64_t prefix_hit_tokens = 0;  // Σ min(prefix hit blocks × block_tokens, input_length)
  uint64_t resident_blocks = 0;    // blocks resident at the end

  // Ratios; 0 when the denominator is 0.
  double prefix_block() const { return Ratio(prefix_hit_blocks, blocks); }
  double any_block() const { return Ratio(any_hit_blocks, blocks); }
  double prefix_token() const { return Ratio(prefix_hit_tokens, input_tokens); }

 private:
  static double Ratio(uint64_t a, uint64_t b) {
    return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
  }
};

struct SimReport {
  SimConfig config;
  SimCounts total;
  std::vector<SimCounts> per_instance;
};

// Runs `trace` through a cluster built from `config`. Fails with kInvalidArgument for a capacity
// or instance count of 0 or a block_tokens of 0.
Result<SimReport> Simulate(const PreparedTrace& trace, const SimConfig& config);

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_SIMULATOR_H_
