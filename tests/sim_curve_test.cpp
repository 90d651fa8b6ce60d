// The exact LRU curve, write-through tiers and the reuse report of the simulator layer
// (docs/simulation.md "Hit-rate curves", "Tiers", "Reuse"), on hand-computed traces. The
// comparisons against plain simulations and an independent Python LRU on real traces are
// tests/cli/replay_curve_exact.sh and replay_curve_public.sh.
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/files/request_trace.h"
#include "kvindex/sim/hit_curve.h"
#include "kvindex/sim/reuse.h"
#include "kvindex/sim/simulator.h"

namespace kvindex::sim {
namespace {

PreparedTrace Prepare(const std::vector<std::vector<uint64_t>>& requests) {
  Trace trace;
  trace.name = "test";
  trace.format = TraceFormat::kMooncake;
  double ts = 0;
  for (const auto& ids : requests) {
    TraceRequest r;
    r.timestamp_ms = ts++;
    r.hash_ids = ids;
    r.input_length = 512 * ids.size();
    trace.requests.push_back(r);
  }
  auto prepared = PreparedTrace::Prepare(trace);
  REQUIRE(prepared.ok());
  return std::move(prepared).value();
}

}  // namespace

TEST_SUITE("sim_curve") {
  TEST_CASE("The worked example's curve, from the stack depths at lookup") {
    // [1,2,3] [1,2,4] [5] [1,2,3]. Depths at lookup: [1,2,4]: 3, 2, new; [1,2,3]: 4, 3, 5.
    // Running maxima 3, 3 and 4, 4, 5 give prefix 2 from C=3, +2 from C=4, +1 from C=5.
    const PreparedTrace t = Prepare({{1, 2, 3}, {1, 2, 4}, {5}, {1, 2, 3}});
    SimConfig config;
    auto curve = LruHitCurve(t, config);
    REQUIRE(curve.ok());
    CHECK(curve->blocks == 10);
    CHECK(curve->working_set == 5);
    REQUIRE(curve->steps.size() == 5);
    const uint64_t prefix[] = {0, 0, 2, 4, 5}, any[] = {0, 1, 3, 4, 5};
    for (uint64_t c = 1; c <= 5; ++c) {
      CHECK(curve->steps[c - 1].capacity == c);
      CHECK(curve->At(c).prefix_hit_blocks == prefix[c - 1]);
      CHECK(curve->At(c).any_hit_blocks == any[c - 1]);
    }
    CHECK(curve->At(1000).prefix_hit_blocks == 5);
    // The same at capacity 3 as the simulator (docs: prefix 2, any 3).
    config.capacity = 3;
    auto sim = Simulate(t, config);
    REQUIRE(sim.ok());
    CHECK(sim->total.prefix_hit_blocks == curve->At(3).prefix_hit_blocks);
    CHECK(sim->total.any_hit_blocks == curve->At(3).any_hit_blocks);
  }

  TEST_CASE("A long stream: renumbered and doubled access times keep the curve exact") {
    // 6,000 requests over a pool that grows to about 5,000 blocks, with heavy reuse: the access
    // times run out many times, with few live marks (renumbered in order) and with many (the
    // times double). At each capacity the curve equals the plain simulator's counts.
    uint64_t x = 12345;
    auto next = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    std::vector<std::vector<uint64_t>> requests;
    for (uint64_t i = 0; i < 6000; ++i) {
      const uint64_t pool = i < 3000 ? 300 : 300 + (i - 3000) * 2;
      std::vector<uint64_t> ids;
      const uint64_t shared = next() % 4, len = 1 + next() % 12;
      for (uint64_t j = 0; j < len; ++j) ids.push_back(j < shared ? j : next() % pool);
      requests.push_back(ids);
    }
    const PreparedTrace t = Prepare(requests);
    for (uint32_t instances : {1u, 3u}) {
      SimConfig config;
      config.instances = instances;
      auto curve = LruHitCurve(t, config);
      REQUIRE(curve.ok());
      for (uint64_t capacity : {1, 2, 5, 17, 64, 200, 511, 1000, 2047, 2048, 3000, 4500, 10000}) {
        config.capacity = capacity;
        auto sim = Simulate(t, config);
        REQUIRE(sim.ok());
        CAPTURE(instances);
        CAPTURE(capacity);
        CHECK(curve->At(capacity).prefix_hit_blocks == sim->total.prefix_hit_blocks);
        CHECK(curve->At(capacity).any_hit_blocks == sim->total.any_hit_blocks);
      }
    }
  }

  TEST_CASE("The curve refuses what it cannot compute exactly") {
    const PreparedTrace t = Prepare({{1}});
    SimConfig config;
    config.router = RouterKind::kCacheAware;
    CHECK(LruHitCurve(t, config).status().code() == StatusCode::kInvalidArgument);
    config.router = RouterKind::kRoundRobin;
    config.policy = PolicyKind::kPrefixLru;
    CHECK(LruHitCurve(t, config).status().code() == StatusCode::kInvalidArgument);
    config.policy = PolicyKind::kLru;
    config.cpu_capacity = 4;
    CHECK(LruHitCurve(t, config).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("Write-through: every access writes the pool; GPU victims are dropped") {
    // 2 instances round-robin, GPU 1, CPU 1, disk 2; [1] [2] [1] [2] [2] [1] (docs/simulation.md
    // "Tiers", worked example): prefix 4 (gpu 2, cpu 1, disk 1), evictions 2, CPU evictions 4.
    const PreparedTrace t = Prepare({{1}, {2}, {1}, {2}, {2}, {1}});
    SimConfig config;
    config.instances = 2;
    config.capacity = 1;
    config.cpu_capacity = 1;
    config.disk_capacity = 2;
    auto through = Simulate(t, config);
    REQUIRE(through.ok());
    CHECK(through->total.prefix_hit_blocks == 4);
    CHECK(through->total.prefix_hit_tier[kGpu] == 2);
    CHECK(through->total.prefix_hit_tier[kCpu] == 1);
    CHECK(through->total.prefix_hit_tier[kDisk] == 1);
    CHECK(through->total.evictions == 2);
    CHECK(through->total.cpu_evictions == 4);
    CHECK(through->total.disk_evictions == 0);
    config.tier_write = TierWrite::kVictim;
    auto victim = Simulate(t, config);
    REQUIRE(victim.ok());
    CHECK(victim->total.prefix_hit_blocks == 3);
    CHECK(victim->total.prefix_hit_tier[kDisk] == 0);
    CHECK(victim->total.cpu_evictions == 1);
  }

  TEST_CASE("Reuse: classes and nearest-rank percentiles") {
    // [1,2,3] [1,2,4] [5] [1,2,3] at 0..3 ms: two shared-prefix requests, depths 3 2 4 3 5.
    const ReuseReport r = AnalyseReuse(Prepare({{1, 2, 3}, {1, 2, 4}, {5}, {1, 2, 3}}));
    const ReuseStats& shared = r.classes[static_cast<int>(RequestClass::kSharedPrefix)];
    CHECK(shared.requests == 2);
    CHECK(shared.reused_blocks == 5);
    CHECK(shared.distance_blocks.p50 == 3);
    CHECK(shared.distance_blocks.p90 == 5);
    CHECK(r.classes[static_cast<int>(RequestClass::kFresh)].requests == 2);
    CHECK(r.all.blocks == 10);
  }
}

}  // namespace kvindex::sim
