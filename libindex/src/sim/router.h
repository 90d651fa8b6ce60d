// The routing rules that do not look at cache contents (round-robin, random, least-loaded,
// session; docs/simulation.md "Routers"), kept in one place so that the cluster simulation and
// the hit-curve computation route every request identically. A router's load is the blocks routed
// to an instance so far, which no capacity changes; cache-aware routing scores instances by their
// caches and is decided by the cluster itself, using load() for its ties.
//
// Thread safety: not thread-safe; one per simulation.
#ifndef KVINDEX_SRC_SIM_ROUTER_H_
#define KVINDEX_SRC_SIM_ROUTER_H_

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvindex/sim/prng.h"
#include "kvindex/sim/simulator.h"

namespace kvindex::sim {

class LoadRouter {
 public:
  // `trace` must outlive the router.
  LoadRouter(const PreparedTrace& trace, const SimConfig& config)
      : trace_(trace),
        router_(config.router),
        instances_(config.instances),
        rng_(config.seed),
        load_(config.instances, 0) {
    for (uint32_t i = 0; i < config.instances; ++i) by_load_.emplace(0, i);
  }

  // The instance of request `i` (requests routed in order, each once, then Record()ed). Not for
  // cache-aware routing, which returns 0 here.
  uint32_t Route(size_t i) {
    switch (router_) {
      case RouterKind::kRoundRobin:
        return static_cast<uint32_t>(i % instances_);
      case RouterKind::kRandom:
        return static_cast<uint32_t>(rng_.Below(instances_));
      case RouterKind::kLeastLoaded:
        return LeastLoaded();
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
      case RouterKind::kCacheAware:
        break;
    }
    return 0;
  }

  // Blocks routed to `instance` so far.
  uint64_t load(uint32_t instance) const { return load_[instance]; }

  // Request `i` of `blocks` blocks went to `instance`.
  void Record(size_t i, uint32_t instance, uint64_t blocks) {
    // The ordered set is kept only for the routers that ask for the least-loaded instance.
    const bool ordered = router_ == RouterKind::kLeastLoaded || router_ == RouterKind::kSession;
    if (ordered) by_load_.erase({load_[instance], instance});
    load_[instance] += blocks;
    if (ordered) by_load_.emplace(load_[instance], instance);
    if (router_ == RouterKind::kSession && trace_.chat_id(i) >= 0) {
      session_[trace_.chat_id(i)] = instance;
    }
  }

 private:
  uint32_t LeastLoaded() const { return by_load_.begin()->second; }

  const PreparedTrace& trace_;
  RouterKind router_;
  uint32_t instances_;
  SplitMix64 rng_;
  std::vector<uint64_t> load_;                       // blocks accessed so far, per instance
  std::set<std::pair<uint64_t, uint32_t>> by_load_;  // (load, instance): least loaded first
  std::unordered_map<int64_t, uint32_t> session_;    // chat id -> instance
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SRC_SIM_ROUTER_H_
