// The simulator (docs/simulation.md): the worked example, and hand-computed cases for every policy
// and router. Each case shows its hand computation; the differential test against the naive Python
// simulator is tests/cli/replay_reference.sh.
#include <cstdint>
#include <filesystem>
#include <string>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/files/request_trace.h"
#include "kvindex/sim/block_cache.h"
#include "kvindex/sim/prng.h"
#include "kvindex/sim/simulator.h"
#include "test_util.h"

namespace kvindex::sim {
namespace {

struct Req {
  std::vector<uint64_t> ids;
  uint64_t input_length = 0;  // 0 = 512 per id
  int64_t chat = -1;
  int64_t parent = -1;
};

Trace MakeTrace(const std::vector<Req>& reqs, TraceFormat format = TraceFormat::kMooncake) {
  Trace trace;
  trace.name = "test";
  trace.format = format;
  double ts = 0;
  for (const Req& r : reqs) {
    TraceRequest t;
    t.timestamp_ms = ts++;
    t.hash_ids = r.ids;
    t.input_length = r.input_length != 0 ? r.input_length : 512 * r.ids.size();
    if (format == TraceFormat::kBailian) {
      t.chat_id = r.chat;
      t.parent_chat_id = r.parent;
    }
    trace.requests.push_back(t);
  }
  return trace;
}

SimReport Run(const std::vector<Req>& reqs, PolicyKind policy, uint64_t capacity,
              RouterKind router = RouterKind::kRoundRobin, uint32_t instances = 1,
              uint64_t seed = 0, TraceFormat format = TraceFormat::kMooncake) {
  auto prepared = PreparedTrace::Prepare(MakeTrace(reqs, format));
  REQUIRE(prepared.ok());
  SimConfig config;
  config.policy = policy;
  config.capacity = capacity;
  config.router = router;
  config.instances = instances;
  config.seed = seed;
  config.block_tokens = 512;
  auto report = Simulate(*prepared, config);
  REQUIRE(report.ok());
  return *report;
}

void Check(const SimReport& r, uint64_t prefix, uint64_t any, uint64_t evictions) {
  CHECK(r.total.prefix_hit_blocks == prefix);
  CHECK(r.total.any_hit_blocks == any);
  CHECK(r.total.evictions == evictions);
}

const std::vector<Req> kWorkedExample = {{{1, 2, 3}}, {{1, 2, 4}}, {{5}}, {{1, 2, 3}}};

// One instance of LRU GPU capacity `gpu` over shared tiers (0 = none), GPU victims written down.
SimReport RunTiers(const std::vector<Req>& reqs, uint64_t gpu, uint64_t cpu, uint64_t disk,
                   double window_ms = 0, TierWrite tier_write = TierWrite::kVictim) {
  auto prepared = PreparedTrace::Prepare(MakeTrace(reqs));
  REQUIRE(prepared.ok());
  SimConfig config;
  config.capacity = gpu;
  config.cpu_capacity = cpu;
  config.disk_capacity = disk;
  config.window_ms = window_ms;
  config.tier_write = tier_write;
  auto report = Simulate(*prepared, config);
  REQUIRE(report.ok());
  return *report;
}

}  // namespace

TEST_SUITE("sim") {
  // docs/simulation.md "Worked example"
  TEST_CASE("The worked example comes out exactly for lru, lfu and fifo") {
    // Capacity 3, one instance, requests [1,2,3], [1,2,4], [5], [1,2,3]: 10 blocks.
    const SimReport lru = Run(kWorkedExample, PolicyKind::kLru, 3);
    CHECK(lru.total.requests == 4);
    CHECK(lru.total.blocks == 10);
    Check(lru, 2, 3, 5);
    Check(Run(kWorkedExample, PolicyKind::kLfu, 3), 4, 4, 3);
    Check(Run(kWorkedExample, PolicyKind::kFifo, 3), 2, 3, 5);
  }

  TEST_CASE("prefix-lru on the worked example keeps the shared prefix") {
    // [1,2,3]: chain 1<-2<-3, leaf {3}. [1,2,4]: prefix 2, any 2; 4 evicts the only leaf 3
    // (2 becomes a leaf, then 4's parent again). [5]: evicts leaf 4; 2 is a leaf again.
    // [1,2,3]: prefix 2, any 2; 3 evicts the least recent leaf 5 (2 was just touched).
    // Totals: prefix 4, any 4, evictions 3.
    Check(Run(kWorkedExample, PolicyKind::kPrefixLru, 3), 4, 4, 3);
  }

  TEST_CASE("prefix-lru evicts a leaf where lru breaks a chain at its root") {
    // Capacity 3: [1,2], [3], [4], [1,2].
    // lru: [4] evicts 1 (oldest) -> {2,3,4}; [1,2]: lookup prefix 0, any 1 (2);
    //      1 evicts 2, 2 evicts 3: evictions 3.
    // prefix-lru: [4] evicts the oldest leaf 2 (1 is not a leaf) -> {1,3,4}; [1,2]: prefix 1,
    //      any 1; 1 hit; 2 evicts the oldest leaf 3: evictions 2.
    const std::vector<Req> reqs = {{{1, 2}}, {{3}}, {{4}}, {{1, 2}}};
    Check(Run(reqs, PolicyKind::kLru, 3), 0, 1, 3);
    Check(Run(reqs, PolicyKind::kPrefixLru, 3), 1, 1, 2);
  }

  TEST_CASE("lfu evicts the least frequent; lru and fifo the oldest") {
    // Capacity 2: [1], [1], [2], [3], [1].
    // lfu: 1 has 2 accesses, 2 has 1: [3] evicts 2; [1] hits. prefix 1+1 = 2, evictions 1.
    // lru: [3] evicts 1 (accessed at t2, 2 at t3); [1] evicts 2. prefix 1, evictions 2.
    // fifo: [3] evicts 1 (inserted first); [1] evicts 2. prefix 1, evictions 2.
    const std::vector<Req> reqs = {{{1}}, {{1}}, {{2}}, {{3}}, {{1}}};
    Check(Run(reqs, PolicyKind::kLfu, 2), 2, 2, 1);
    Check(Run(reqs, PolicyKind::kLru, 2), 1, 1, 2);
    Check(Run(reqs, PolicyKind::kFifo, 2), 1, 1, 2);
  }

  TEST_CASE("fifo ignores hits where lru refreshes") {
    // Capacity 2: [1], [2], [1], [3], [1].
    // lru: [1] hit refreshes 1; [3] evicts 2; [1] hits. prefix 2, evictions 1.
    // fifo: [1] hit changes nothing; [3] evicts 1; [1] evicts 2. prefix 1, evictions 2.
    const std::vector<Req> reqs = {{{1}}, {{2}}, {{1}}, {{3}}, {{1}}};
    Check(Run(reqs, PolicyKind::kLru, 2), 2, 2, 1);
    Check(Run(reqs, PolicyKind::kFifo, 2), 1, 1, 2);
  }

  TEST_CASE("lfu ties go to the least recently accessed") {
    // Capacity 2: [1], [2], [1], [2], [3], [1].
    // 1 and 2 both reach 2 accesses; [3] evicts 1 (last access t3 < t4). [1] misses and
    // evicts 3 (1 access, fewer than 2's 2). prefix 2, evictions 2.
    Check(Run({{{1}}, {{2}}, {{1}}, {{2}}, {{3}}, {{1}}}, PolicyKind::kLfu, 2), 2, 2, 2);
  }

  TEST_CASE("lfu forgets a block's count when it is evicted") {
    // Capacity 2: [1], [2], [2], [3], [1], [3], [1].
    // [2] hit (2 accesses). [3] evicts 1 (1 access). [1] evicts 3 (1 vs 2's 2). [3] evicts 1:
    // its count restarted at 1 (had it survived eviction it would be 2, tie with 2, and 2 would
    // go as the less recent). [1] evicts 3. prefix 1 ([2]), evictions 4.
    Check(Run({{{1}}, {{2}}, {{2}}, {{3}}, {{1}}, {{3}}, {{1}}}, PolicyKind::kLfu, 2), 1, 1, 4);
  }

  TEST_CASE("lookup counts blocks resident anywhere separately from the prefix") {
    // Infinite capacity: [1,2,3], [9,2,3]: the second request's prefix is 0 (9 is new) but 2
    // blocks are resident: any 2. A repeated id inside a request: [7,7]: lookup sees neither;
    // the access inserts 7, then hits it. No evictions.
    Check(Run({{{1, 2, 3}}, {{9, 2, 3}}}, PolicyKind::kLru, kInfiniteCapacity), 0, 2, 0);
    const SimReport dup = Run({{{7, 7}}, {{7}}}, PolicyKind::kLru, kInfiniteCapacity);
    Check(dup, 1, 1, 0);
    CHECK(dup.total.resident_blocks == 1);
  }

  TEST_CASE("prefix_token caps the prefix at the input length") {
    // 512 tokens per block; [1,2] with 700 input tokens twice: the second hits 2 blocks =
    // 1024 tokens, capped at 700. prefix_token = 700 / 1400 = 0.5; prefix_block = 2/4.
    const SimReport r =
        Run({{{1, 2}, 700}, {{1, 2}, 700}}, PolicyKind::kLru, kInfiniteCapacity);
    CHECK(r.total.prefix_hit_tokens == 700);
    CHECK(r.total.input_tokens == 1400);
    CHECK(r.total.prefix_token() == doctest::Approx(0.5));
    CHECK(r.total.prefix_block() == doctest::Approx(0.5));
  }

  TEST_CASE("round-robin sends request i to instance i mod n") {
    // 2 instances: [1] -> 0, [1] -> 1 (miss there), [1] -> 0 (hit). prefix 1.
    const SimReport r =
        Run({{{1}}, {{1}}, {{1}}}, PolicyKind::kLru, kInfiniteCapacity, RouterKind::kRoundRobin, 2);
    Check(r, 1, 1, 0);
    REQUIRE(r.per_instance.size() == 2);
    CHECK(r.per_instance[0].requests == 2);
    CHECK(r.per_instance[0].prefix_hit_blocks == 1);
    CHECK(r.per_instance[1].requests == 1);
  }

  TEST_CASE("SplitMix64 gives the published sequence for seed 0") {
    // The reference implementation's first outputs from state 0 (also computed by
    // tests/data/sim_reference.py, a separate implementation).
    SplitMix64 rng(0);
    CHECK(rng.Next() == 0xE220A8397B1DCDAFull);
    CHECK(rng.Next() == 0x6E789E6AA1B965F4ull);
    CHECK(rng.Next() == 0x06C45D188009454Full);
  }

  TEST_CASE("random routes by SplitMix64 modulo the instance count") {
    // Seed 0, 2 instances: outputs ...AF, ...F4, ...4F are odd, even, odd -> 1, 0, 1.
    // [1] -> 1, [1] -> 0 (miss), [1] -> 1 (hit). prefix 1; instance 1 has 2 requests.
    const SimReport r = Run({{{1}}, {{1}}, {{1}}}, PolicyKind::kLru, kInfiniteCapacity,
                            RouterKind::kRandom, 2, 0);
    Check(r, 1, 1, 0);
    CHECK(r.per_instance[0].requests == 1);
    CHECK(r.per_instance[1].requests == 2);
    CHECK(r.per_instance[1].prefix_hit_blocks == 1);
  }

  TEST_CASE("least-loaded picks the fewest blocks accessed so far, ties to the lowest index") {
    // 2 instances. [1,2,3] -> 0 (tie 0/0; load 3). [4] -> 1 (load 1). [5] -> 1 (1 < 3; 2).
    // [6,7] -> 1 (2 < 3; 4). [8] -> 0 (3 < 4). Instance 0: 2 requests, 4 blocks; 1: 3, 4.
    const SimReport r = Run({{{1, 2, 3}}, {{4}}, {{5}}, {{6, 7}}, {{8}}}, PolicyKind::kLru,
                            kInfiniteCapacity, RouterKind::kLeastLoaded, 2);
    CHECK(r.per_instance[0].requests == 2);
    CHECK(r.per_instance[0].blocks == 4);
    CHECK(r.per_instance[1].requests == 3);
    CHECK(r.per_instance[1].blocks == 4);
  }

  TEST_CASE("cache-aware picks the most matched tokens, then the least load, then the index") {
    // 2 instances. [1,2] -> 0 (no match anywhere, loads 0/0, index). [3] -> 1 (no match, load
    // 2 vs 0). [1,2,5] -> 0 (2 blocks matched there): prefix 2. [3,1] -> 1 (1 matched): prefix 1.
    const SimReport r = Run({{{1, 2}}, {{3}}, {{1, 2, 5}}, {{3, 1}}}, PolicyKind::kLru,
                            kInfiniteCapacity, RouterKind::kCacheAware, 2);
    Check(r, 3, 3, 0);
    CHECK(r.per_instance[0].requests == 2);
    CHECK(r.per_instance[0].prefix_hit_blocks == 2);
    CHECK(r.per_instance[1].requests == 2);
    CHECK(r.per_instance[1].prefix_hit_blocks == 1);
  }

  TEST_CASE("session keeps a chat on its parent's instance; new chats go least-loaded") {
    // Bailian, 2 instances. chat 1 (no parent) [1] -> 0 (least loaded, index). chat 2 (no
    // parent) [2] -> 1. chat 3 (parent 1) [1,3] -> 0: prefix 1. chat 4 (parent 2) [2,4] -> 1:
    // prefix 1. chat 5 (parent 77, unknown) [9] -> least loaded: loads 3 and 3, tie -> 0.
    const SimReport r = Run({{{1}, 0, 1, -1},
                             {{2}, 0, 2, -1},
                             {{1, 3}, 0, 3, 1},
                             {{2, 4}, 0, 4, 2},
                             {{9}, 0, 5, 77}},
                            PolicyKind::kLru, kInfiniteCapacity, RouterKind::kSession, 2, 0,
                            TraceFormat::kBailian);
    Check(r, 2, 2, 0);
    CHECK(r.per_instance[0].requests == 3);
    CHECK(r.per_instance[1].requests == 2);
  }

  TEST_CASE("Simulate rejects zero instances, capacity or block tokens") {
    auto prepared = PreparedTrace::Prepare(MakeTrace({{{1}}}));
    REQUIRE(prepared.ok());
    SimConfig config;
    config.instances = 0;
    CHECK(Simulate(*prepared, config).status().code() == StatusCode::kInvalidArgument);
    config.instances = 1;
    config.capacity = 0;
    CHECK(Simulate(*prepared, config).status().code() == StatusCode::kInvalidArgument);
    config.capacity = 1;
    config.block_tokens = 0;
    CHECK(Simulate(*prepared, config).status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("Policy and router names round-trip") {
    for (PolicyKind p : {PolicyKind::kLru, PolicyKind::kLfu, PolicyKind::kFifo,
                         PolicyKind::kPrefixLru}) {
      CHECK(ParsePolicy(PolicyName(p)) == p);
    }
    for (RouterKind r : {RouterKind::kRoundRobin, RouterKind::kRandom, RouterKind::kLeastLoaded,
                         RouterKind::kCacheAware, RouterKind::kSession}) {
      CHECK(ParseRouter(RouterName(r)) == r);
    }
    CHECK_FALSE(ParsePolicy("LRU").has_value());
    CHECK_FALSE(ParseRouter("").has_value());
  }

  TEST_CASE("BlockCache reports the victim of each insert") {
    // Capacity 2, lru: 1, 2, 3 -> 3 evicts 1; 1 again evicts 2.
    BlockCache cache(PolicyKind::kLru, 2, 4);
    CHECK(cache.Access(1, kNoBlock).victim == kNoBlock);
    CHECK(cache.Access(2, kNoBlock).victim == kNoBlock);
    const AccessOutcome third = cache.Access(3, kNoBlock);
    CHECK_FALSE(third.hit);
    CHECK(third.victim == 1);
    CHECK(cache.Access(3, kNoBlock).hit);
    CHECK(cache.Access(1, kNoBlock).victim == 2);
    CHECK(cache.size() == 2);
    CHECK(cache.Contains(1));
    CHECK_FALSE(cache.Contains(2));
  }

  TEST_CASE("Tiers: the eviction cascade GPU -> CPU -> disk -> dropped, hits by serving tier") {
    // GPU 1, CPU 1, disk 1 (all LRU), one instance; requests [1] [2] [3] [1] [2,3].
    //   [1]   miss; GPU{1}
    //   [2]   miss; GPU evicts 1 -> CPU{1}; GPU{2}                          (ev 1)
    //   [3]   miss; GPU evicts 2 -> CPU, which evicts 1 -> disk{1}; CPU{2}   (ev 1, cpu_ev 1)
    //   [1]   lookup: 1 on disk -> prefix 1 (disk). Access: refresh disk copy, GPU evicts 3 ->
    //         CPU evicts 2 -> disk evicts 1 (dropped). GPU{1} CPU{3} disk{2}
    //                                                          (ev 1, cpu_ev 1, disk_ev 1)
    //   [2,3] lookup: 2 on disk, 3 in CPU -> prefix 2 (cpu 1, disk 1).
    //         2: GPU evicts 1 -> CPU evicts 3 -> disk evicts 2 (dropped). GPU{2} CPU{1} disk{3}
    //         3: GPU evicts 2 -> CPU evicts 1 -> disk evicts 3 (dropped). GPU{3} CPU{2} disk{1}
    //                                                          (ev 2, cpu_ev 2, disk_ev 2)
    // Totals: blocks 6, prefix 3 (gpu 0, cpu 1, disk 2), any 3, ev 5, cpu_ev 4, disk_ev 3.
    const SimReport r = RunTiers({{{1}}, {{2}}, {{3}}, {{1}}, {{2, 3}}}, 1, 1, 1);
    CHECK(r.total.blocks == 6);
    CHECK(r.total.prefix_hit_blocks == 3);
    CHECK(r.total.any_hit_blocks == 3);
    CHECK(r.total.prefix_hit_tier[kGpu] == 0);
    CHECK(r.total.prefix_hit_tier[kCpu] == 1);
    CHECK(r.total.prefix_hit_tier[kDisk] == 2);
    CHECK(r.total.any_hit_tier[kCpu] == 1);
    CHECK(r.total.any_hit_tier[kDisk] == 2);
    CHECK(r.total.evictions == 5);
    CHECK(r.total.cpu_evictions == 4);
    CHECK(r.total.disk_evictions == 3);
    CHECK(r.total.resident_blocks == 1);
  }

  TEST_CASE("Tiers: a CPU hit refreshes the pool copy before the GPU victim is written") {
    // GPU 1, CPU 2, no disk; requests [1] [2] [3] [1] [2] [3]. CPU lists MRU first.
    //   [1] GPU{1}.  [2] GPU evicts 1 -> CPU[1].  [3] GPU evicts 2 -> CPU[2,1].
    //   [1] CPU hit (prefix 1, cpu). Refresh -> CPU[1,2]; GPU evicts 3 -> CPU full, evicts its
    //       LRU 2 (dropped: no disk) -> CPU[3,1]. Without the refresh 1 would have been lost.
    //   [2] nowhere: miss. GPU evicts 1 -> CPU already holds 1: refreshed, CPU[1,3].
    //   [3] CPU hit (prefix 1, cpu). Refresh -> CPU[3,1]; GPU evicts 2 -> CPU evicts 1.
    // Totals: prefix 2 (cpu 2), any 2, GPU evictions 5, CPU evictions 2, disk 0.
    const SimReport r = RunTiers({{{1}}, {{2}}, {{3}}, {{1}}, {{2}}, {{3}}}, 1, 2, 0);
    CHECK(r.total.prefix_hit_blocks == 2);
    CHECK(r.total.prefix_hit_tier[kCpu] == 2);
    CHECK(r.total.any_hit_blocks == 2);
    CHECK(r.total.evictions == 5);
    CHECK(r.total.cpu_evictions == 2);
    CHECK(r.total.disk_evictions == 0);
  }

  TEST_CASE("Tiers: a GPU hit is served by the GPU even when the pool also holds the block") {
    // GPU 2, CPU 4: [1,2] [3] [1,2]. [3] evicts 1 (LRU) -> CPU{1}; GPU{2,3}.
    // [1,2]: 1 in CPU (prefix), 2 in GPU -> prefix 2: gpu 1, cpu 1.
    // Access 1: refresh CPU, GPU evicts 2 -> CPU{1,2}; access 2: GPU miss, CPU hit -> refresh,
    // GPU evicts 3 -> CPU{1,2,3}. Evictions 3, CPU evictions 0.
    const SimReport r = RunTiers({{{1, 2}}, {{3}}, {{1, 2}}}, 2, 4, 0);
    CHECK(r.total.prefix_hit_blocks == 2);
    CHECK(r.total.prefix_hit_tier[kGpu] == 1);
    CHECK(r.total.prefix_hit_tier[kCpu] == 1);
    CHECK(r.total.evictions == 3);
    CHECK(r.total.cpu_evictions == 0);
  }

  TEST_CASE("Tiers: only a disk tier takes GPU victims directly") {
    // GPU 1, disk 1: [1] [2] [1]: [2] evicts 1 -> disk{1}; [1] disk hit, GPU evicts 2 -> disk
    // evicts 1 (dropped). prefix 1 (disk), evictions 2, disk evictions 1.
    const SimReport r = RunTiers({{{1}}, {{2}}, {{1}}}, 1, 0, 1);
    CHECK(r.total.prefix_hit_tier[kDisk] == 1);
    CHECK(r.total.evictions == 2);
    CHECK(r.total.cpu_evictions == 0);
    CHECK(r.total.disk_evictions == 1);
  }

  TEST_CASE("Windows split the counts by arrival time") {
    // Requests at 0, 1, 2, 3 ms (MakeTrace), window 2 ms: [0,2) holds [1,2] and [1,2] -> blocks 4,
    // prefix 2; [2,4) holds [3] and [1,2] -> blocks 3, prefix 2. Capacity inf, no eviction.
    const SimReport r = RunTiers({{{1, 2}}, {{1, 2}}, {{3}}, {{1, 2}}}, kInfiniteCapacity, 0, 0,
                                 2.0);
    REQUIRE(r.windows.size() == 2);
    CHECK(r.windows[0].start_ms == 0.0);
    CHECK(r.windows[0].total.requests == 2);
    CHECK(r.windows[0].total.blocks == 4);
    CHECK(r.windows[0].total.prefix_hit_blocks == 2);
    CHECK(r.windows[1].start_ms == 2.0);
    CHECK(r.windows[1].total.blocks == 3);
    CHECK(r.windows[1].total.prefix_hit_blocks == 2);
    CHECK(r.windows[1].per_instance.size() == 1);
    CHECK(r.windows[1].per_instance[0].prefix_hit_tier[kGpu] == 2);
  }

  // docs/simulation.md "Storage-benchmark mode"
  TEST_CASE("Storage-benchmark counting: membership, no prefix rule") {
    // [1,2] [2,3,3] [9,1]: 1 w, 2 w | 2 r, 3 w, 3 r | 9 w, 1 r.
    // reads 3, writes 4, hits after the first block: 3 (pos 1 of req 2) and 1 (pos 1 of req 3)
    // = 2; contiguous-prefix hits: req 2 starts with a hit (2), then 3 misses -> 1; req 3
    // starts with a miss -> 0; total 1.
    auto prepared = PreparedTrace::Prepare(MakeTrace({{{1, 2}}, {{2, 3, 3}}, {{9, 1}}}));
    REQUIRE(prepared.ok());
    const StorageBenchmarkCounts c = StorageBenchmark(*prepared);
    CHECK(c.requests == 3);
    CHECK(c.total_blocks == 7);
    CHECK(c.read_blocks == 3);
    CHECK(c.write_blocks == 4);
    CHECK(c.prefix_hits == 3);
    CHECK(c.hits_after_first == 2);
    CHECK(c.contiguous_prefix_hits == 1);
  }

  // docs/simulation.md "Storage-benchmark mode"
  TEST_CASE("Storage-benchmark mode reproduces the reference numbers of the public traces") {
    const std::filesystem::path traces = test::TracesDir() / "mooncake";
    struct Row {
      const char* file;
      uint64_t max_requests;
      uint64_t requests, total, read, write, after_first, contiguous;
    };
    const Row rows[] = {
        {"conversation_trace.jsonl", 100, 100, 3034, 99, 2935, 0, 99},
        {"conversation_trace.jsonl", 1000, 1000, 27305, 5791, 21514, 4792, 5791},
        {"conversation_trace.jsonl", 0, 12031, 288500, 105710, 182790, 93680, 105710},
        {"synthetic_trace.jsonl", 100, 100, 2631, 101, 2530, 96, 101},
        {"synthetic_trace.jsonl", 1000, 1000, 23787, 4007, 19780, 3920, 4007},
        {"synthetic_trace.jsonl", 0, 3993, 121877, 77953, 43924, 76171, 77953},
    };
    for (const Row& row : rows) {
      CAPTURE(row.file);
      CAPTURE(row.max_requests);
      TraceReaderOptions options;
      options.max_requests = row.max_requests;
      auto trace = ReadTrace((traces / row.file).string(), options);
      REQUIRE(trace.ok());
      auto prepared = PreparedTrace::Prepare(*trace);
      REQUIRE(prepared.ok());
      const StorageBenchmarkCounts c = StorageBenchmark(*prepared);
      CHECK(c.requests == row.requests);
      CHECK(c.total_blocks == row.total);
      CHECK(c.read_blocks == row.read);
      CHECK(c.write_blocks == row.write);
      CHECK(c.prefix_hits == row.read);
      CHECK(c.hits_after_first == row.after_first);
      CHECK(c.contiguous_prefix_hits == row.contiguous);
    }
  }
}

}  // namespace kvindex::sim
