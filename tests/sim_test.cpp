// The simulator (SPEC §6): the worked example, and hand-computed cases for every policy and
// router. Each case shows its hand computation; the differential test against the naive Python
// simulator is tests/cli/replay_reference.sh.
#include <cstdint>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/request_trace.h"
#include "kvindex/sim/block_cache.h"
#include "kvindex/sim/prng.h"
#include "kvindex/sim/simulator.h"

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

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("The SPEC §6 worked example comes out exactly for lru, lfu and fifo") {
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
}

}  // namespace kvindex::sim
