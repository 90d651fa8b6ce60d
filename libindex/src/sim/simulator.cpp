#include "kvindex/sim/simulator.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>

#include "kvindex/sim/prng.h"

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
  }
  out.distinct_blocks_ = static_cast<uint32_t>(distinct);
  return out;
}

namespace {

// The simulated cluster: one cache per instance plus what the routers need.
class Cluster {
 public:
  Cluster(const PreparedTrace& trace, const SimConfig& config)
      : trace_(trace), config_(config), rng_(config.seed), load_(config.instances, 0) {
    caches_.reserve(config.instances);
    for (uint32_t i = 0; i < config.instances; ++i) {
      caches_.emplace_back(config.policy, config.capacity, trace.distinct_blocks());
      by_load_.emplace(0, i);
    }
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
      SimCounts& t = report.total;
      const SimCounts& c = counts_[i];
      t.requests += c.requests;
      t.blocks += c.blocks;
      t.prefix_hit_blocks += c.prefix_hit_blocks;
      t.any_hit_blocks += c.any_hit_blocks;
      t.evictions += c.evictions;
      t.input_tokens += c.input_tokens;
      t.prefix_hit_tokens += c.prefix_hit_tokens;
      t.resident_blocks += c.resident_blocks;
    }
    report.per_instance = counts_;
    return report;
  }

 private:
  // Longest resident prefix of request `i`'s blocks on `instance`.
  uint64_t PrefixBlocks(size_t i, uint32_t instance) const {
    const BlockCache& cache = caches_[instance];
    const auto& blocks = trace_.blocks();
    uint64_t n = 0;
    for (uint64_t b = trace_.begin(i); b < trace_.end(i) && cache.Contains(blocks[b]); ++b) ++n;
    return n;
  }

  uint64_t PrefixTokens(size_t i, uint64_t prefix_blocks) const {
    return std::min(prefix_blocks * config_.block_tokens, trace_.input_length(i));
  }

  uint32_t LeastLoaded() const { return by_load_.begin()->second; }

  uint32_t Route(size_t i) {
    const uint32_t n = config_.instances;
    switch (config_.router) {
      case RouterKind::kRoundRobin:
        return static_cast<uint32_t>(i % n);
      case RouterKind::kRandom:
        return static_cast<uint32_t>(rng_.Below(n));
      case RouterKind::kLeastLoaded:
        return LeastLoaded();
      case RouterKind::kCacheAware: {
        // Most matched tokens, then least load, then lowest index: O(instances × prefix).
        uint32_t best = 0;
        uint64_t best_tokens = 0;
        for (uint32_t k = 0; k < n; ++k) {
          const uint64_t tokens = PrefixTokens(i, PrefixBlocks(i, k));
          if (k == 0 || tokens > best_tokens ||
              (tokens == best_tokens && load_[k] < load_[best])) {
            best = k;
            best_tokens = tokens;
          }
        }
        return best;
      }
      case RouterKind::kSession: {
        // A chat follows its parent chat's instance; a chat whose parent is unknown (no parent,
        // or a parent outside the trace) starts on the least-loaded instance. Mooncake traces
        // have no chat ids, so every request is a new chat: the router is then least-loaded.
        const int64_t parent = trace_.parent_chat_id(i);
        if (parent >= 0) {
          if (auto it = session_.find(parent); it != session_.end()) return it->second;
        }
        return LeastLoaded();
      }
    }
    return 0;
  }

  void Process(size_t i) {
    const uint32_t instance = Route(i);
    BlockCache& cache = caches_[instance];
    SimCounts& c = counts_[instance];
    const auto& blocks = trace_.blocks();
    const uint64_t begin = trace_.begin(i), end = trace_.end(i);

    // Lookup: changes nothing.
    const uint64_t prefix = PrefixBlocks(i, instance);
    uint64_t any = prefix;
    for (uint64_t b = begin + prefix; b < end; ++b) any += cache.Contains(blocks[b]) ? 1 : 0;

    // Access: every block in order.
    c.evictions += cache.AccessSequence(blocks.data() + begin, static_cast<size_t>(end - begin));

    const uint64_t n = end - begin;
    ++c.requests;
    c.blocks += n;
    c.prefix_hit_blocks += prefix;
    c.any_hit_blocks += any;
    c.input_tokens += trace_.input_length(i);
    c.prefix_hit_tokens += PrefixTokens(i, prefix);

    // The ordered set is kept only for the routers that ask for the least-loaded instance.
    const bool ordered = config_.router == RouterKind::kLeastLoaded ||
                         config_.router == RouterKind::kSession;
    if (ordered) by_load_.erase({load_[instance], instance});
    load_[instance] += n;
    if (ordered) by_load_.emplace(load_[instance], instance);
    if (config_.router == RouterKind::kSession && trace_.chat_id(i) >= 0) {
      session_[trace_.chat_id(i)] = instance;
    }
  }

  const PreparedTrace& trace_;
  SimConfig config_;
  SplitMix64 rng_;
  std::vector<BlockCache> caches_;
  std::vector<SimCounts> counts_;
  std::vector<uint64_t> load_;  // blocks accessed so far, per instance
  std::set<std::pair<uint64_t, uint32_t>> by_load_;  // (load, instance): least loaded first
  std::unordered_map<int64_t, uint32_t> session_;   // chat id -> instance
};

}  // namespace

Result<SimReport> Simulate(const PreparedTrace& trace, const SimConfig& config) {
  if (config.instances == 0) return Status::InvalidArgument("instances must be at least 1");
  if (config.capacity == 0) return Status::InvalidArgument("capacity must be at least 1 block");
  if (config.block_tokens == 0) return Status::InvalidArgument("block tokens must be at least 1");
  Cluster cluster(trace, config);
  cluster.Run();
  return cluster.Report();
}

}  // namespace kvindex::sim
