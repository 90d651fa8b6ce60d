// The trace simulator: a cluster of instances, each with its own GPU cache tier, optionally backed
// by a shared CPU pool and a shared disk, fed a request trace through a router
// (docs/simulation.md).
//
// Per request, in timestamp order: the router picks an instance; *lookup* counts the longest
// prefix of the request's blocks resident on that instance (in its GPU tier or in a shared tier)
// and the blocks resident on it anywhere, each by the tier that would serve it (GPU first, then
// CPU, then disk); lookup changes nothing. Then *access* touches every block in order: a GPU hit
// is refreshed; a GPU miss first refreshes the block's copy in the highest shared tier holding it
// (if any), then inserts it into the GPU tier. Tiers are inclusive: a GPU victim is written to the
// CPU pool (refreshing it when already there), a CPU victim to the disk, a disk victim is
// dropped; with only one shared tier, GPU victims go to it. That is TierWrite::kVictim; under
// TierWrite::kThrough every access writes (or refreshes) the block in the CPU pool (the disk
// without one), GPU victims are dropped, and CPU victims still go to the disk.
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

#include "kvindex/core/status.h"
#include "kvindex/files/request_trace.h"
#include "kvindex/sim/block_cache.h"

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
  double timestamp_ms(size_t i) const { return timestamp_ms_[i]; }

 private:
  TraceFormat format_ = TraceFormat::kUnknown;
  uint32_t distinct_blocks_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<BlockIndex> blocks_;
  std::vector<uint64_t> input_length_;
  std::vector<int64_t> chat_id_;
  std::vector<int64_t> parent_chat_id_;
  std::vector<double> timestamp_ms_;
};

// The tier that serves a block.
enum Tier : uint8_t { kGpu = 0, kCpu = 1, kDisk = 2 };
inline constexpr int kTiers = 3;
std::string_view TierName(int tier);

// When blocks reach the shared pool (docs/simulation.md "Tiers"): kVictim writes a GPU victim
// down when it is evicted; kThrough writes every block into the pool at every access.
enum class TierWrite : uint8_t { kVictim, kThrough };

// The mode named `name` ("victim", "through"), or nullopt.
std::optional<TierWrite> ParseTierWrite(std::string_view name);
std::string_view TierWriteName(TierWrite mode);

struct SimConfig {
  PolicyKind policy = PolicyKind::kLru;
  uint64_t capacity = kInfiniteCapacity;  // blocks per instance, >= 1
  RouterKind router = RouterKind::kRoundRobin;
  uint32_t instances = 1;       // >= 1
  uint64_t seed = 0;            // the random router's SplitMix64 seed
  uint32_t block_tokens = 512;  // tokens per block, for prefix_token and cache-aware routing
  uint64_t cpu_capacity = 0;    // shared CPU pool, LRU, in blocks; 0 = no CPU tier
  uint64_t disk_capacity = 0;   // shared disk, LRU, in blocks; 0 = no disk tier
  TierWrite tier_write = TierWrite::kThrough;  // only with a shared tier
  double window_ms = 0;  // > 0: also count per time window of this length (SimReport)
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
  uint64_t resident_blocks = 0;    // blocks resident at the end (GPU tier)
  // By the tier that served each block at lookup (index Tier); the sums over tiers are
  // prefix_hit_blocks and any_hit_blocks.
  uint64_t prefix_hit_tier[kTiers] = {0, 0, 0};
  uint64_t any_hit_tier[kTiers] = {0, 0, 0};
  // Shared-tier evictions caused by this instance's accesses.
  uint64_t cpu_evictions = 0;
  uint64_t disk_evictions = 0;

  void Add(const SimCounts& other);

  // Ratios; 0 when the denominator is 0.
  double prefix_block() const { return Ratio(prefix_hit_blocks, blocks); }
  double any_block() const { return Ratio(any_hit_blocks, blocks); }
  double prefix_token() const { return Ratio(prefix_hit_tokens, input_tokens); }
  double prefix_tier(int tier) const { return Ratio(prefix_hit_tier[tier], blocks); }
  double any_tier(int tier) const { return Ratio(any_hit_tier[tier], blocks); }

 private:
  static double Ratio(uint64_t a, uint64_t b) {
    return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
  }
};

// The requests that arrived in [start_ms, start_ms + window_ms), the first window starting at the
// first request's timestamp. Empty windows are kept (all counts 0). resident_blocks is not kept.
struct SimWindow {
  double start_ms = 0;
  SimCounts total;
  std::vector<SimCounts> per_instance;
};

struct SimReport {
  SimConfig config;
  SimCounts total;
  std::vector<SimCounts> per_instance;
  std::vector<SimWindow> windows;  // only with config.window_ms > 0
};

// The upstream storage benchmark's counting (docs/simulation.md "Storage-benchmark mode"): one
// unbounded set of blocks shared by every request, in trace order; a block is a hit (a read) when
// already in the set, a miss (a write) otherwise, and is then added. No prefix rule: prefix_hits =
// read_blocks, as upstream. Also counted: hits not on a request's first block (an earlier upstream
// revision's "prefix hits") and hits before a request's first miss (contiguous prefix).
struct StorageBenchmarkCounts {
  uint64_t requests = 0;
  uint64_t total_blocks = 0;
  uint64_t read_blocks = 0;
  uint64_t write_blocks = 0;
  uint64_t prefix_hits = 0;  // = read_blocks
  uint64_t hits_after_first = 0;
  uint64_t contiguous_prefix_hits = 0;
  double hit_rate() const {
    return total_blocks == 0 ? 0.0
                             : static_cast<double>(read_blocks) / static_cast<double>(total_blocks);
  }
};

StorageBenchmarkCounts StorageBenchmark(const PreparedTrace& trace);

// Runs `trace` through a cluster built from `config`. Fails with kInvalidArgument for a capacity
// or instance count of 0, a block_tokens of 0, a negative window, or more than 10^6 windows.
Result<SimReport> Simulate(const PreparedTrace& trace, const SimConfig& config);

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_SIMULATOR_H_
