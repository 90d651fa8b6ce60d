#include "kvindex/sim/simulator.h"

#include <algorithm>
#include <utility>

#include "router.h"

namespace kvindex::sim {

std::optional<RouterKind> ParseRouter(std::string_view name) {
  if (name == "round-robin") return RouterKind::kRoundRobin;
  if (name == "random") return RouterKind::kRandom;
  if (name == "least-loaded") return RouterKind::kLeastLoaded;
  if (name == "cache-aware") return RouterKind::kCacheAware;
  if (name == "session") return RouterKind::kSession;
  return std::nullopt;
}

std::string_view RouterName(RouterKind router) {
  switch (router) {
    case RouterKind::kRoundRobin: return "round-robin";
    case RouterKind::kRandom: return "random";
    case RouterKind::kLeastLoaded: return "least-loaded";
    case RouterKind::kCacheAware: return "cache-aware";
    case RouterKind::kSession: return "session";
  }
  return "?";
}

std::optional<TierWrite> ParseTierWrite(std::string_view name) {
  if (name == "victim") return TierWrite::kVictim;
  if (name == "through") return TierWrite::kThrough;
  return std::nullopt;
}

std::string_view TierWriteName(TierWrite mode) {
  return mode == TierWrite::kThrough ? "through" : "victim";
}

std::string_view TierName(int tier) {
  switch (tier) {
    case kGpu: return "gpu";
    case kCpu: return "cpu";
    case kDisk: return "disk";
  }
  return "?";
}

void SimCounts::Add(const SimCounts& o) {
  requests += o.requests;
  blocks += o.blocks;
  prefix_hit_blocks += o.prefix_hit_blocks;
  any_hit_blocks += o.any_hit_blocks;
  evictions += o.evictions;
  input_tokens += o.input_tokens;
  prefix_hit_tokens += o.prefix_hit_tokens;
  resident_blocks += o.resident_blocks;
  for (int t = 0; t < kTiers; ++t) {
    prefix_hit_tier[t] += o.prefix_hit_tier[t];
    any_hit_tier[t] += o.any_hit_tier[t];
  }
  cpu_evictions += o.cpu_evictions;
  disk_evictions += o.disk_evictions;
}

Result<PreparedTrace> PreparedTrace::Prepare(const Trace& trace) {
  PreparedTrace out;
  out.format_ = trace.format;
  size_t total = 0;
  for (const TraceRequest& r : trace.requests) total += r.hash_ids.size();
  out.offsets_.reserve(trace.requests.size() + 1);
  out.blocks_.reserve(total);
  out.input_length_.reserve(trace.requests.size());
  out.chat_id_.reserve(trace.requests.size());
  out.parent_chat_id_.reserve(trace.requests.size());
  out.timestamp_ms_.reserve(trace.requests.size());
  // The public traces number their ids densely from 0, so when the largest id is small
  // compared with the trace, a direct table replaces the hash map (about 10x faster); otherwise
  // a hash map handles arbitrary 64-bit ids.
  uint64_t max_id = 0;
  for (const TraceRequest& r : trace.requests) {
    for (uint64_t id : r.hash_ids) max_id = std::max(max_id, id);
  }
  const bool direct = total > 0 && max_id < 4 * static_cast<uint64_t>(total) + (1u << 20);
  std::vector<BlockIndex> table;
  std::unordered_map<uint64_t, BlockIndex> dense;
  if (direct) {
    table.assign(static_cast<size_t>(max_id) + 1, kNoBlock);
  } else {
    dense.reserve(total);
  }
  uint64_t distinct = 0;
  out.offsets_.push_back(0);
  for (const TraceRequest& r : trace.requests) {
    for (uint64_t id : r.hash_ids) {
      BlockIndex* slot;
      if (direct) {
        slot = &table[static_cast<size_t>(id)];
      } else {
        slot = &dense.try_emplace(id, kNoBlock).first->second;
      }
      if (*slot == kNoBlock) {
        if (distinct + 1 >= kNoBlock) {
          return Status::LimitExceeded(trace.name + ": more than 2^32 - 2 distinct hash ids");
        }
        *slot = static_cast<BlockIndex>(distinct++);
      }
      out.blocks_.push_back(*slot);
    }
    out.offsets_.push_back(out.blocks_.size());
    out.input_length_.push_back(r.input_length);
    out.chat_id_.push_back(r.chat_id.value_or(-1));
    out.parent_chat_id_.push_back(r.parent_chat_id.value_or(-1));
    out.timestamp_ms_.push_back(r.timestamp_ms);
  }
  out.distinct_blocks_ = static_cast<uint32_t>(distinct);
  return out;
}

namespace {

// The simulated cluster: one GPU cache per instance, the shared tiers, and what the routers need.
class Cluster {
 public:
  Cluster(const PreparedTrace& trace, const SimConfig& config)
      : trace_(trace), config_(config), router_(trace, config) {
    caches_.reserve(config.instances);
    for (uint32_t i = 0; i < config.instances; ++i) {
      caches_.emplace_back(config.policy, config.capacity, trace.distinct_blocks());
    }
    if (config.cpu_capacity != 0) {
      cpu_.emplace(PolicyKind::kLru, config.cpu_capacity, trace.distinct_blocks());
    }
    if (config.disk_capacity != 0) {
      disk_.emplace(PolicyKind::kLru, config.disk_capacity, trace.distinct_blocks());
    }
    tiered_ = cpu_.has_value() || disk_.has_value();
    counts_.resize(config.instances);
  }

  void Run() {
    for (size_t i = 0; i < trace_.requests(); ++i) Process(i);
  }

  SimReport Report() {
    SimReport report;
    report.config = config_;
    for (uint32_t i = 0; i < config_.instances; ++i) {
      counts_[i].resident_blocks = caches_[i].size();
      report.total.Add(counts_[i]);
    }
    report.per_instance = counts_;
    for (SimWindow& w : windows_) {
      for (const SimCounts& c : w.per_instance) w.total.Add(c);
    }
    report.windows = std::move(windows_);
    return report;
  }

 private:
  // The tier that would serve `block` on `instance`, or -1 when no tier holds it.
  int Where(uint32_t instance, BlockIndex block) const {
    if (caches_[instance].Contains(block)) return kGpu;
    if (cpu_ && cpu_->Contains(block)) return kCpu;
    if (disk_ && disk_->Contains(block)) return kDisk;
    return -1;
  }

  // Longest prefix of request `i`'s blocks resident on `instance` (any tier).
  uint64_t PrefixBlocks(size_t i, uint32_t instance) const {
    const auto& blocks = trace_.blocks();
    uint64_t n = 0;
    if (!tiered_) {
      const BlockCache& cache = caches_[instance];
      for (uint64_t b = trace_.begin(i); b < trace_.end(i) && cache.Contains(blocks[b]); ++b) ++n;
      return n;
    }
    for (uint64_t b = trace_.begin(i); b < trace_.end(i) && Where(instance, blocks[b]) >= 0; ++b) {
      ++n;
    }
    return n;
  }

  uint64_t PrefixTokens(size_t i, uint64_t prefix_blocks) const {
    return std::min(prefix_blocks * config_.block_tokens, trace_.input_length(i));
  }

  uint32_t Route(size_t i) {
    if (config_.router != RouterKind::kCacheAware) return router_.Route(i);
    // Most matched tokens, then least load, then lowest index: O(instances × prefix).
    uint32_t best = 0;
    uint64_t best_tokens = 0;
    for (uint32_t k = 0; k < config_.instances; ++k) {
      const uint64_t tokens = PrefixTokens(i, PrefixBlocks(i, k));
      if (k == 0 || tokens > best_tokens ||
          (tokens == best_tokens && router_.load(k) < router_.load(best))) {
        best = k;
        best_tokens = tokens;
      }
    }
    return best;
  }

  // Writes a GPU victim down the shared tiers: CPU pool, then disk; a disk victim is dropped.
  void WriteDown(BlockIndex victim, SimCounts& d) {
    if (cpu_) {
      victim = cpu_->Access(victim, kNoBlock).victim;
      if (victim == kNoBlock) return;
      ++d.cpu_evictions;
    }
    if (disk_ && disk_->Access(victim, kNoBlock).victim != kNoBlock) ++d.disk_evictions;
  }

  // Write-through: every access writes (or refreshes) the block in the shared pool, the CPU pool
  // when there is one, else the disk. With both, the disk stays the CPU pool's victim tier: a
  // block the pool lost but the disk holds has its disk copy refreshed first (as a lower-tier hit
  // is), so that the pool's own victim cannot push it off the disk.
  void WriteThrough(BlockIndex block, SimCounts& d) {
    if (!cpu_) {
      if (disk_->Access(block, kNoBlock).victim != kNoBlock) ++d.disk_evictions;
      return;
    }
    if (disk_ && !cpu_->Contains(block) && disk_->Contains(block)) disk_->Access(block, kNoBlock);
    const BlockIndex victim = cpu_->Access(block, kNoBlock).victim;
    if (victim == kNoBlock) return;
    ++d.cpu_evictions;
    if (disk_ && disk_->Access(victim, kNoBlock).victim != kNoBlock) ++d.disk_evictions;
  }

  void Process(size_t i) {
    const uint32_t instance = Route(i);
    BlockCache& cache = caches_[instance];
    const auto& blocks = trace_.blocks();
    const uint64_t begin = trace_.begin(i), end = trace_.end(i);
    SimCounts d;

    // Lookup: changes nothing.
    uint64_t prefix = 0, any = 0;
    if (!tiered_) {
      prefix = PrefixBlocks(i, instance);
      any = prefix;
      for (uint64_t b = begin + prefix; b < end; ++b) any += cache.Contains(blocks[b]) ? 1 : 0;
      d.prefix_hit_tier[kGpu] = prefix;
      d.any_hit_tier[kGpu] = any;
    } else {
      bool in_prefix = true;
      for (uint64_t b = begin; b < end; ++b) {
        const int tier = Where(instance, blocks[b]);
        if (tier < 0) {
          in_prefix = false;
          continue;
        }
        ++any;
        ++d.any_hit_tier[tier];
        if (in_prefix) {
          ++prefix;
          ++d.prefix_hit_tier[tier];
        }
      }
    }

    // Access: every block in order.
    if (!tiered_) {
      d.evictions = cache.AccessSequence(blocks.data() + begin, static_cast<size_t>(end - begin));
    } else if (config_.tier_write == TierWrite::kThrough) {
      // The GPU victim is dropped: its pool copy was written when it was accessed.
      BlockIndex parent = kNoBlock;
      for (uint64_t b = begin; b < end; ++b) {
        const BlockIndex block = blocks[b];
        if (cache.Access(block, parent).victim != kNoBlock) ++d.evictions;
        WriteThrough(block, d);
        parent = block;
      }
    } else {
      BlockIndex parent = kNoBlock;
      for (uint64_t b = begin; b < end; ++b) {
        const BlockIndex block = blocks[b];
        if (!cache.Contains(block)) {
          // A lower-tier hit: refresh the pool copy first, then copy the block into the GPU.
          if (cpu_ && cpu_->Contains(block)) {
            cpu_->Access(block, kNoBlock);
          } else if (disk_ && disk_->Contains(block)) {
            disk_->Access(block, kNoBlock);
          }
        }
        const BlockIndex victim = cache.Access(block, parent).victim;
        if (victim != kNoBlock) {
          ++d.evictions;
          WriteDown(victim, d);
        }
        parent = block;
      }
    }

    const uint64_t n = end - begin;
    d.requests = 1;
    d.blocks = n;
    d.prefix_hit_blocks = prefix;
    d.any_hit_blocks = any;
    d.input_tokens = trace_.input_length(i);
    d.prefix_hit_tokens = PrefixTokens(i, prefix);
    counts_[instance].Add(d);
    if (config_.window_ms > 0) {
      const double offset = trace_.timestamp_ms(i) - trace_.timestamp_ms(0);
      const size_t w = static_cast<size_t>(offset / config_.window_ms);
      while (windows_.size() <= w) {
        SimWindow window;
        window.start_ms = trace_.timestamp_ms(0) +
                          static_cast<double>(windows_.size()) * config_.window_ms;
        window.per_instance.resize(config_.instances);
        windows_.push_back(std::move(window));
      }
      windows_[w].per_instance[instance].Add(d);
    }

    router_.Record(i, instance, n);
  }

  const PreparedTrace& trace_;
  SimConfig config_;
  LoadRouter router_;
  std::vector<BlockCache> caches_;
  std::optional<BlockCache> cpu_;   // shared CPU pool
  std::optional<BlockCache> disk_;  // shared disk
  bool tiered_ = false;
  std::vector<SimCounts> counts_;
  std::vector<SimWindow> windows_;
};

}  // namespace

Result<SimReport> Simulate(const PreparedTrace& trace, const SimConfig& config) {
  if (config.instances == 0) return Status::InvalidArgument("instances must be at least 1");
  if (config.capacity == 0) return Status::InvalidArgument("capacity must be at least 1 block");
  if (config.block_tokens == 0) return Status::InvalidArgument("block tokens must be at least 1");
  if (!(config.window_ms >= 0)) return Status::InvalidArgument("window must not be negative");
  if (config.window_ms > 0 && trace.requests() > 0) {
    const double span = trace.timestamp_ms(trace.requests() - 1) - trace.timestamp_ms(0);
    // Every window keeps counts per instance: bound the cells, not only the windows.
    if (span / config.window_ms * config.instances > 1e6) {
      return Status::InvalidArgument("window too short: more than 10^6 windows x instances");
    }
  }
  Cluster cluster(trace, config);
  cluster.Run();
  return cluster.Report();
}

StorageBenchmarkCounts StorageBenchmark(const PreparedTrace& trace) {
  StorageBenchmarkCounts out;
  std::vector<uint8_t> seen(trace.distinct_blocks(), 0);
  const auto& blocks = trace.blocks();
  for (size_t i = 0; i < trace.requests(); ++i) {
    ++out.requests;
    bool contiguous = true;
    for (uint64_t b = trace.begin(i); b < trace.end(i); ++b) {
      ++out.total_blocks;
      if (seen[blocks[b]] != 0) {
        ++out.read_blocks;
        if (b > trace.begin(i)) ++out.hits_after_first;
        if (contiguous) ++out.contiguous_prefix_hits;
      } else {
        ++out.write_blocks;
        seen[blocks[b]] = 1;
        contiguous = false;
      }
    }
  }
  out.prefix_hits = out.read_blocks;
  return out;
}

}  // namespace kvindex::sim
