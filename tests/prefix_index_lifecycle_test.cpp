// PrefixIndex, the lifetime of what it holds: replicas removed and evicted, DP ranks, Mooncake
// store blocks, clears and instance removal, tokenless events, record reuse. As in
// prefix_index_test.cpp, expected answers are hand-computed token counts (docs/index-rules.md,
// docs/upstream-pitfalls.md), never taken from the index.
#include <atomic>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"

#include "prefix_index_test_util.h"

namespace kvindex {
namespace {

using test::Add;
using test::Apply;
using test::Batch;
using test::Engine;
using test::kPrompt;
using test::MatchOne;
using test::Query;
using test::Removed;
using test::Store;
using test::Stored;

TEST_SUITE("prefix_index") {
  // docs/upstream-pitfalls.md "Removing one replica keeps the others"
  TEST_CASE("Removing rank 0's GPU replica keeps rank 1's and rank 0's CPU replica") {
    PrefixIndex index;
    const SourceId r0 = Add(index, Engine("A", 0));
    const SourceId r1 = Add(index, Engine("A", 1));
    Apply(index, r0,
          Batch({Stored({1}, std::nullopt, {101, 15}, Tier::Gpu()),
                 Stored({1}, std::nullopt, {101, 15}, Tier::Cpu())},
                0));
    Apply(index, r1, Batch({Stored({1}, std::nullopt, {101, 15}, Tier::Gpu())}, 1));
    Apply(index, r0, Batch({Removed({1}, Tier::Gpu())}, 0));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.longest_matched == 2);
    CHECK(m.gpu == 2);  // rank 1 still holds it in GPU
    CHECK(m.cpu == 2);  // rank 0 still holds it in CPU
    CHECK(m.DpRankTokens(0) == 2);
    CHECK(m.DpRankTokens(1) == 2);
    CHECK(index.stats().presences == 2);
  }

  // docs/upstream-pitfalls.md "Replayed stores are idempotent"
  TEST_CASE("The same BlockStored applied 3 times is undone by one BlockRemoved") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    const EventBatch stored = Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55})});
    CHECK(Apply(index, a, stored).stored == 2);
    CHECK(Apply(index, a, stored).duplicates == 2);
    Apply(index, a, stored);
    CHECK(index.stats().presences == 2);
    Apply(index, a, Batch({Removed({1, 2})}));
    CHECK(index.stats().presences == 0);
    CHECK(index.stats().blocks == 0);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "A removed block leaves the eviction order"
  TEST_CASE("Remove then evict never double-counts resident blocks") {
    PrefixIndex index(IndexOptions{.max_blocks = 2});
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55})}));
    Apply(index, a, Batch({Removed({1})}));  // a removed block must leave the LRU order too
    CHECK(index.stats().blocks == 1);
    auto r = Apply(index, a, Batch({Stored({3, 4, 5}, std::nullopt, {1, 1, 2, 2, 3, 3})}));
    const IndexStats s = index.stats();
    CHECK(s.blocks == 2);
    CHECK(r.evicted == 2);  // block 2 (oldest) then block 3
    CHECK(s.evictions == 2);
    CHECK(s.presences == 2);
  }

  // docs/upstream-pitfalls.md "Queries never reorder the LRU list"
  TEST_CASE("Queries touching the LRU order run concurrently with evicting stores") {
    // The upstream mutates its LRU list under a read lock; here queries only write an atomic
    // touch stamp. Run under TSan by scripts/check-all.sh.
    PrefixIndex index(IndexOptions{.max_blocks = 64});
    const SourceId a = Add(index, Engine("A"));
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::thread reader([&] {
      while (!stop.load()) {
        if (!index.MatchTokens(Query(), kPrompt).ok()) failures.fetch_add(1);
      }
    });
    for (uint32_t i = 0; i < 2000; ++i) {
      Apply(index, a, Batch({Stored({1000 + i}, std::nullopt, {i, i + 1})}));
    }
    stop = true;
    reader.join();
    CHECK(failures.load() == 0);
    CHECK(index.stats().blocks == 64);
  }

  // docs/upstream-pitfalls.md "DP ranks of one instance share one index"
  TEST_CASE("Two DP-rank sources of one instance both keep their data in one instance") {
    PrefixIndex index;
    const SourceId r0 = Add(index, Engine("A", 0));
    const SourceId r1 = Add(index, Engine("A", 1));
    Apply(index, r0, Batch({Stored({1}, std::nullopt, {101, 15})}, 0));
    Apply(index, r1, Batch({Stored({5}, std::nullopt, {101, 15}), Stored({6}, 5, {100, 55})}, 1));
    auto m = index.MatchTokens(Query(), kPrompt);
    REQUIRE(m.ok());
    REQUIRE(m->instances.size() == 1);
    CHECK(m->instances[0].longest_matched == 4);
    CHECK(m->instances[0].DpRankTokens(0) == 2);
    CHECK(m->instances[0].DpRankTokens(1) == 4);
    CHECK(index.stats().instances.size() == 1);
  }

  // docs/upstream-pitfalls.md "Every DP rank is reported"
  TEST_CASE("Every DP rank of an instance is reported, with 0 when it matches nothing") {
    PrefixIndex index;
    const SourceId r0 = Add(index, Engine("A", 0));
    const SourceId r1 = Add(index, Engine("A", 1));
    Apply(index, r0, Batch({Stored({1}, std::nullopt, {101, 15})}, 0));
    Apply(index, r1, Batch({Stored({9}, std::nullopt, {7, 7})}, 1));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    REQUIRE(m.dp.size() == 2);
    CHECK(m.dp[0] == DpTokens{0, 2});
    CHECK(m.dp[1] == DpTokens{1, 0});
  }

  // docs/upstream-pitfalls.md "A block size of 0 never divides"
  TEST_CASE("A query with block_size 0, or an instance of unknown block size, never divides by 0") {
    PrefixIndex index;
    SourceConfig c = Engine("A", std::nullopt, 0);
    Add(index, c);
    MatchQuery zero = Query();
    zero.block_size = 0;
    auto bad = index.MatchTokens(zero, kPrompt);
    CHECK_FALSE(bad.ok());
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "Inconsistent events are rejected, not sliced"
  TEST_CASE("One hash with block_size 512 and 5 token ids is rejected, not sliced") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A", std::nullopt, 512));
    BlockStored e = Stored({1}, std::nullopt, {1, 2, 3, 4, 5});
    e.scope.block_size = 512;
    auto r = Apply(index, a, Batch({e}));
    CHECK(r.rejected == 1);
    CHECK(r.stored == 0);
    CHECK(index.stats().blocks == 0);
    // Two hashes and three tokens: inconsistent, rejected too.
    CHECK(Apply(index, a, Batch({Stored({1, 2}, std::nullopt, {1, 2, 3})})).rejected == 1);
  }

  // docs/upstream-pitfalls.md "Eviction counts exactly and leaks nothing"
  TEST_CASE("20000 stores with max_blocks 10 evict exactly 19990 and leak no engine-hash entries") {
    PrefixIndex index(IndexOptions{.max_blocks = 10});
    const SourceId a = Add(index, Engine("A"));
    uint64_t evicted = 0;
    for (uint32_t i = 0; i < 20000; ++i) {
      evicted += Apply(index, a, Batch({Stored({i}, std::nullopt, {i, 7})})).evicted;
    }
    const IndexStats s = index.stats();
    CHECK(evicted == 19990);
    CHECK(s.evictions == 19990);
    CHECK(s.blocks == 10);
    // Entries of evicted blocks are swept in batches of at most max(4096, blocks / 2).
    CHECK(s.engine_hashes <= 10 + 4096);
  }

  TEST_CASE("Eviction takes the least recently touched: a matched block survives") {
    PrefixIndex index(IndexOptions{.max_blocks = 2});
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15})}));
    Apply(index, a, Batch({Stored({2}, std::nullopt, {5, 5})}));
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 2);  // touches block 1
    Apply(index, a, Batch({Stored({3}, std::nullopt, {6, 6})}));         // evicts block 2
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 2);
    CHECK(MatchOne(index, Query(), {5, 5}, "A").longest_matched == 0);
    // An evicted parent makes a later child an orphan.
    auto r = Apply(index, a, Batch({Stored({4}, 2, {7, 7})}));
    CHECK(r.orphans == 1);
  }

  // docs/upstream-pitfalls.md "Mooncake store blocks count in their tier"
  TEST_CASE("Mooncake store blocks count in their replicas' tiers") {
    PrefixIndex index;
    const SourceId s = Add(index, Store("S", {}));
    BlockStored e = Stored({1}, std::nullopt, {101, 15});
    e.wire.object_key = "k1";
    StoreUpdate u{"k1", {Replica{Tier::Cpu(), "tcp://h:1", {}}, Replica{Tier::Disk(), "/f", {}}}};
    Apply(index, s, Batch({e, u}));
    InstanceMatch m = MatchOne(index, Query(), kPrompt, "S");
    CHECK(m.longest_matched == 2);
    CHECK(m.cpu == 2);
    CHECK(m.disk == 2);
    CHECK(m.gpu == 0);
    // A full replica set without disk removes DISK presence only.
    Apply(index, s, Batch({StoreUpdate{"k1", {Replica{Tier::Cpu(), "tcp://h:1", {}}}}}));
    m = MatchOne(index, Query(), kPrompt, "S");
    CHECK(m.cpu == 2);
    CHECK(m.disk == 0);
    // An empty set removes the object; a later update for it is unmapped.
    Apply(index, s, Batch({StoreUpdate{"k1", {}}}));
    CHECK(MatchOne(index, Query(), kPrompt, "S").longest_matched == 0);
    CHECK(Apply(index, s, Batch({StoreUpdate{"k1", {Replica{Tier::Cpu(), "x", {}}}}})).unmapped ==
          1);
    CHECK(
        Apply(index, s, Batch({StoreUpdate{"never", {Replica{Tier::Cpu(), "x", {}}}}})).unmapped ==
        1);
  }

  // docs/upstream-pitfalls.md "A store batch has no DP rank"
  TEST_CASE("A Mooncake batch with dp_rank -1 reports no DP key \"-1\"") {
    PrefixIndex index;
    const SourceId s = Add(index, Store("S", {}));
    Apply(index, s, Batch({Stored({1}, std::nullopt, {101, 15}, Tier::Cpu())}, -1));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "S");
    CHECK(m.longest_matched == 2);
    CHECK(m.dp.empty());
  }

  // docs/upstream-pitfalls.md "A remove for an unknown hash creates nothing"
  TEST_CASE("A BlockRemoved for never-stored hashes creates nothing and is counted unmapped") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    auto r = Apply(index, a, Batch({Removed({1, 2}, Tier::Cpu())}));
    CHECK(r.unmapped == 2);
    const IndexStats s = index.stats();
    CHECK(s.blocks == 0);
    CHECK(s.scopes == 0);
    CHECK(s.unmapped == 2);
  }

  TEST_CASE("AllCleared and ClearSource clear only that source's presence") {
    PrefixIndex index;
    const SourceId r0 = Add(index, Engine("A", 0));
    const SourceId r1 = Add(index, Engine("A", 1));
    const SourceId b = Add(index, Engine("B"));
    for (SourceId s : {r0, r1, b})
      Apply(index, s, Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55})}));
    auto r = Apply(index, r0, Batch({AllCleared{}}));
    CHECK(r.removed == 2);
    InstanceMatch a = MatchOne(index, Query(), kPrompt, "A");
    CHECK(a.longest_matched == 4);
    CHECK(a.DpRankTokens(0) == 0);
    CHECK(a.DpRankTokens(1) == 4);
    CHECK(index.ClearSource(r1).ok());
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 0);
    CHECK(MatchOne(index, Query(), kPrompt, "B").longest_matched == 4);
    // A cleared source's engine hashes are forgotten: its next child of 2 is an orphan.
    CHECK(Apply(index, r0, Batch({Stored({3}, 2, {89, 63})})).orphans == 1);
  }

  TEST_CASE("RemoveInstance purges presence and unlists the instance") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    const SourceId b = Add(index, Engine("B"));
    Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15})}));
    Apply(index, b, Batch({Stored({1}, std::nullopt, {101, 15})}));
    auto r = index.RemoveInstance("A");
    REQUIRE(r.ok());
    CHECK(r->removed == 1);
    auto m = index.MatchTokens(Query(), kPrompt);
    REQUIRE(m.ok());
    REQUIRE(m->instances.size() == 1);
    CHECK(m->instances[0].instance == "B");
    CHECK(index.stats().presences == 1);
    CHECK(index.RemoveInstance("nope").status().code() == StatusCode::kNotFound);
    CHECK_FALSE(index.Apply(a, Batch({})).ok());
  }

  TEST_CASE("Store serves=* counts for every instance of its scope, never with a DP rank") {
    PrefixIndex index;
    Add(index, Engine("A", 0));
    Add(index, Engine("B", 0));
    const SourceId s = Add(index, Store("S", {"*"}));
    Apply(index, s, Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55}, Tier::Disk())}));
    for (const char* name : {"A", "B"}) {
      const InstanceMatch m = MatchOne(index, Query(), kPrompt, name);
      CHECK(m.longest_matched == 4);
      CHECK(m.disk == 4);
      CHECK(m.DpRankTokens(0) == 0);
    }
  }

  TEST_CASE("Tokenless events answer engine-hash queries only, and are counted") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    auto r = Apply(index, a, Batch({Stored({1, 2}, std::nullopt, {}), Stored({3}, 2, {})}));
    CHECK(r.tokenless == 3);
    CHECK(index.stats().tokenless == 3);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 0);
    const std::vector<EngineHash> hashes = {EngineHash{1}, EngineHash{2}, EngineHash{3}};
    auto m = index.MatchEngineHashes(Query(), hashes);
    REQUIRE(m.ok());
    CHECK(m->Find("A")->longest_matched == 6);
    const std::vector<EngineHash> gap = {EngineHash{1}, EngineHash{99}, EngineHash{3}};
    CHECK(index.MatchEngineHashes(Query(), gap)->Find("A")->longest_matched == 2);
    const std::vector<EngineHash> first_missing = {EngineHash{99}, EngineHash{1}};
    CHECK(index.MatchEngineHashes(Query(), first_missing)->Find("A")->longest_matched == 0);
  }

  TEST_CASE("A record freed while another engine hash still maps to it is not reused early") {
    // Engine hashes 100 and 200 both name the block of tokens {1, 2} (same prefix hash). Removing
    // 100 frees the block while 200 still points at its record: that record must not hold the
    // next new block, or a query by 200 would answer with it.
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({100}, std::nullopt, {1, 2})}));
    CHECK(Apply(index, a, Batch({Stored({200}, std::nullopt, {1, 2})})).duplicates == 1);
    CHECK(Apply(index, a, Batch({Removed({100})})).removed == 1);
    CHECK(index.stats().blocks == 0);
    Apply(index, a, Batch({Stored({300}, std::nullopt, {3, 4})}));
    const std::vector<EngineHash> by200 = {EngineHash{200}};
    CHECK(index.MatchEngineHashes(Query(), by200)->Find("A")->longest_matched == 0);
    const std::vector<EngineHash> by300 = {EngineHash{300}};
    CHECK(index.MatchEngineHashes(Query(), by300)->Find("A")->longest_matched == 2);
    // A remove by 200 finds nothing resident, and leaves block {3, 4} alone.
    CHECK(Apply(index, a, Batch({Removed({200})})).unmapped == 1);
    CHECK(MatchOne(index, Query(), {3, 4}, "A").longest_matched == 2);
    // The ordinary case: the only entry goes with the block, and the record is reused at once.
    CHECK(Apply(index, a, Batch({Removed({300})})).removed == 1);
    Apply(index, a, Batch({Stored({400}, std::nullopt, {5, 6})}));
    CHECK(MatchOne(index, Query(), {5, 6}, "A").longest_matched == 2);
    CHECK(index.MatchEngineHashes(Query(), by300)->Find("A")->longest_matched == 0);
    CHECK(index.stats().engine_hashes <= 2);
  }

  TEST_CASE("Queries by prefix hashes and by engine hashes walk like token queries") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({1, 2, 3}, std::nullopt, kPrompt)}));
    const auto prefix = ChainPrefixHashes(kPrompt, 2);
    CHECK(index.MatchPrefixHashes(Query(), prefix)->Find("A")->longest_matched == 6);
    const std::vector<PrefixHash> gap = {prefix[0], PrefixHash{12345}, prefix[2]};
    CHECK(index.MatchPrefixHashes(Query(), gap)->Find("A")->longest_matched == 2);
    const std::vector<EngineHash> engine = {EngineHash{1}, EngineHash{2}};
    CHECK(index.MatchEngineHashes(Query(), engine)->Find("A")->longest_matched == 4);
  }

  TEST_CASE("hash=standard sources use their hashes as prefix hashes, no tokens needed") {
    PrefixIndex index;
    SourceConfig c = Store("S", {});
    c.hash_standard = true;
    const SourceId s = Add(index, c);
    const auto prefix = ChainPrefixHashes(kPrompt, 2);
    Apply(index, s,
          Batch({Stored({prefix[0].value, prefix[1].value}, std::nullopt, {}, Tier::Cpu())}));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "S");
    CHECK(m.longest_matched == 4);
    CHECK(m.cpu == 4);
    CHECK(index.stats().tokenless == 0);
  }

  TEST_CASE("Pages of size 1 accumulate into blocks of the configured size (SGLang)") {
    PrefixIndex index;
    SourceConfig c = Engine("A");
    c.format = "sglang";
    const SourceId a = Add(index, c);
    auto page = [](uint64_t h, std::optional<uint64_t> parent, TokenId t) {
      BlockStored e = Stored({h}, parent, {t});
      e.scope.block_size = 1;
      return e;
    };
    Apply(index, a, Batch({page(1, std::nullopt, 101), page(2, 1, 15), page(3, 2, 100)}));
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 2);  // [100] is partial
    BlockStored rest = Stored({4, 5, 6}, 3, {55, 89, 63});
    rest.scope.block_size = 1;
    Apply(index, a, Batch({rest}));
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 6);
    Apply(index, a, Batch({Removed({6})}));  // the page completing block 3
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 4);
  }

  TEST_CASE("Multimodal keys make an image block differ from a token-only prompt") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    BlockStored e = Stored({1, 2}, std::nullopt, {101, 15, 100, 55});
    e.multimodal = {{}, {MultimodalKey{"img-1", 0}}};
    Apply(index, a, Batch({e}));
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 2);
    const auto prefix = ChainPrefixHashes(std::vector<TokenId>{101, 15}, 2);
    const PrefixHash image =
        ChainPrefixHash(prefix[0], MixMultimodalKeys(HashBlockTokens(std::vector<TokenId>{100, 55}),
                                                     std::vector<MultimodalKey>{{"img-1", 0}}));
    const std::vector<PrefixHash> with_image = {prefix[0], image};
    CHECK(index.MatchPrefixHashes(Query(), with_image)->Find("A")->longest_matched == 4);
  }

  TEST_CASE("A batch rank that differs from the source's label wins and is counted") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A", 0));
    auto r = Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15})}, 3));
    CHECK(r.dp_rank_mismatches == 1);
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.DpRankTokens(3) == 2);
  }

  TEST_CASE("Statistics count presences per instance and tier, and bytes") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a,
          Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55}),
                 Stored({1}, std::nullopt, {101, 15}, Tier::Cpu())}));
    const IndexStats s = index.stats();
    CHECK(s.blocks == 2);
    CHECK(s.presences == 3);
    CHECK(s.bytes > 0);
    REQUIRE(s.instances.size() == 1);
    REQUIRE(s.instances[0].tiers.size() == 2);
    CHECK(s.instances[0].tiers[0].tier == "GPU");
    CHECK(s.instances[0].tiers[0].presences == 2);
    CHECK(s.instances[0].tiers[1].tier == "CPU");
    CHECK(s.instances[0].tiers[1].presences == 1);
  }

  TEST_CASE("Bad calls fail with a Status: unknown source, empty name, serves=* mixed") {
    PrefixIndex index;
    CHECK(index.Apply(SourceId{7}, Batch({})).status().code() == StatusCode::kInvalidArgument);
    CHECK_FALSE(index.AddSource(SourceConfig{}).ok());
    CHECK_FALSE(index.AddSource(Store("S", {"*", "A"})).ok());
  }

  // The query walk guesses that a chain's next block lies in the record next to the previous one
  // (a chain stored by one event gets consecutive records) and verifies the guess. These cases
  // put a wrong, stale or reversed neighbour there; the expected answers are hand-computed.
  TEST_CASE("walk guess: records reused in reverse order, a stale neighbour, a foreign neighbour") {
    // Chains of 40 blocks of 2 tokens: long enough for the walk to guess (it starts guessing once
    // two verified depths lie in adjacent records).
    auto hashes = [](uint64_t first) {
      std::vector<uint64_t> h;
      for (uint64_t i = 0; i < 40; ++i) h.push_back(first + i);
      return h;
    };
    auto tokens = [](TokenId first, size_t count) {
      std::vector<TokenId> t;
      for (size_t i = 0; i < count; ++i) t.push_back(first + static_cast<TokenId>(i));
      return t;
    };
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    const SourceId b = Add(index, Engine("B"));
    const std::vector<TokenId> first = tokens(1, 80);
    const std::vector<TokenId> second = tokens(1001, 80);
    Apply(index, a, Batch({Stored(hashes(1), std::nullopt, first)}));
    CHECK(MatchOne(index, Query(), first, "A").longest_matched == 80);
    // Freed records are reused last-freed first: `second` gets them in descending order.
    Apply(index, a, Batch({Removed(hashes(1))}));
    Apply(index, a, Batch({Stored(hashes(101), std::nullopt, second)}));
    CHECK(MatchOne(index, Query(), second, "A").longest_matched == 80);
    CHECK(MatchOne(index, Query(), first, "A").longest_matched == 0);
    // Remove block 21 of `second`: its record keeps the stale key with no presence, and the walk
    // stops there (20 blocks = 40 tokens) instead of taking the stale record for the block.
    Apply(index, a, Batch({Removed({121})}));
    CHECK(MatchOne(index, Query(), second, "A").longest_matched == 40);
    // Free the last block's record after it and store block 21 again: it gets that record (the
    // last freed), and its old record next to block 20 still carries its key, with no presence.
    Apply(index, a, Batch({Removed({140})}));
    Apply(index, a, Batch({Stored({121}, 120, tokens(1041, 2))}));
    CHECK(MatchOne(index, Query(), second, "A").longest_matched == 78);
    Apply(index, a, Batch({Removed({121})}));
    // B stores `first` as one chain (consecutive records, the freed one first), and A stores
    // block 21 again: a fresh record away from its neighbours.
    Apply(index, b, Batch({Stored(hashes(201), std::nullopt, first)}));
    Apply(index, a, Batch({Stored({121}, 120, tokens(1041, 2))}));
    Apply(index, a, Batch({Stored({140}, 139, tokens(1079, 2))}));
    CHECK(MatchOne(index, Query(), second, "A").longest_matched == 80);
    CHECK(MatchOne(index, Query(), second, "B").longest_matched == 0);
    CHECK(MatchOne(index, Query(), first, "B").longest_matched == 80);
    CHECK(MatchOne(index, Query(), first, "A").longest_matched == 0);
    // A prompt that follows `first` for 20 blocks and then diverges: the record next to block 20
    // is live, in scope, and holds `first`'s block 21, which is not this prompt's block 21.
    std::vector<TokenId> mixed = tokens(1, 40);
    for (TokenId t : tokens(5001, 40)) mixed.push_back(t);
    CHECK(MatchOne(index, Query(), mixed, "B").longest_matched == 40);
  }

  TEST_CASE("one source alternating event scopes (salts) keeps each block in its own scope") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    BlockStored salted = Stored({1, 2}, std::nullopt, {1, 2, 3, 4});
    salted.scope.salt = "s1";
    BlockStored plain = Stored({3}, std::nullopt, {1, 2});
    BlockStored salted2 = Stored({4}, std::nullopt, {5, 6});
    salted2.scope.salt = "s2";
    Apply(index, a, Batch({salted, plain, salted2}));
    MatchQuery s1 = Query();
    s1.salt = "s1";
    MatchQuery s2 = Query();
    s2.salt = "s2";
    CHECK(MatchOne(index, s1, {1, 2, 3, 4}, "A").longest_matched == 4);
    CHECK(MatchOne(index, Query(), {1, 2, 3, 4}, "A").longest_matched == 2);
    CHECK(MatchOne(index, s2, {5, 6}, "A").longest_matched == 2);
    CHECK(MatchOne(index, s2, {1, 2}, "A").longest_matched == 0);
  }
}

}  // namespace
}  // namespace kvindex
