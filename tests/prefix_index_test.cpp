// PrefixIndex: the worked example and every rule of docs/index-rules.md, and one regression test
// per upstream conductor indexing bug of docs/upstream-pitfalls.md (named by the behaviour kvindex
// keeps instead, with the pitfall's section cited above it). Expected answers are hand-computed
// token counts, never taken from the index.
#include "kvindex/index/prefix_index.h"

#include <vector>

#include <doctest/doctest.h>

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
  // docs/index-rules.md "Worked example"
  TEST_CASE("The worked example: longest 6, GPU 4, CPU 4, DISK 4, DP {0:4, 1:2}") {
    PrefixIndex index;
    const SourceId r0 = Add(index, Engine("A", 0));
    const SourceId r1 = Add(index, Engine("A", 1));
    const SourceId store = Add(index, Store("S", {"A"}));
    // DP rank 0 holds H1,H2 in GPU; rank 1 holds H1 in GPU.
    Apply(index, r0, Batch({Stored({11, 12}, std::nullopt, {101, 15, 100, 55}, Tier::Gpu())}, 0));
    Apply(index, r1, Batch({Stored({11}, std::nullopt, {101, 15}, Tier::Gpu())}, 1));
    // The store holds H1 in CPU+DISK, H2 in CPU, H3 in DISK.
    Apply(index, store,
          Batch({Stored({91, 92}, std::nullopt, {101, 15, 100, 55}, Tier::Cpu()),
                 Stored({91}, std::nullopt, {101, 15}, Tier::Disk()),
                 Stored({93}, 92, {89, 63}, Tier::Disk())}));
    const InstanceMatch a = MatchOne(index, Query(), kPrompt, "A");
    CHECK(a.longest_matched == 6);
    CHECK(a.gpu == 4);
    CHECK(a.cpu == 4);
    CHECK(a.disk == 4);
    REQUIRE(a.dp.size() == 2);
    CHECK(a.dp[0] == DpTokens{0, 4});
    CHECK(a.dp[1] == DpTokens{1, 2});
    // The store is an instance of its own; its blocks carry no rank.
    const InstanceMatch s = MatchOne(index, Query(), kPrompt, "S");
    CHECK(s.longest_matched == 6);
    CHECK(s.gpu == 0);
    CHECK(s.cpu == 4);
    CHECK(s.disk == 4);
    CHECK(s.dp.empty());
  }

  TEST_CASE("Every instance known in the scope appears, zeros included; instances restrict") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Add(index, Engine("B"));
    SourceConfig other = Engine("C");
    other.model = "other";
    Add(index, other);
    Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15})}));
    auto m = index.MatchTokens(Query(), kPrompt);
    REQUIRE(m.ok());
    REQUIRE(m->instances.size() == 2);
    CHECK(m->instances[0].instance == "A");
    CHECK(m->instances[0].longest_matched == 2);
    CHECK(m->instances[1].instance == "B");
    CHECK(m->instances[1].longest_matched == 0);
    CHECK(m->instances[1].dp == DpList{{0, 0}});  // engine sources default to rank 0
    MatchQuery only_b = Query();
    only_b.instances = {"B", "nope"};
    auto b = index.MatchTokens(only_b, kPrompt);
    REQUIRE(b.ok());
    REQUIRE(b->instances.size() == 1);
    CHECK(b->instances[0].instance == "B");
    auto unknown = index.MatchTokens(Query("unknown-model"), kPrompt);
    REQUIRE(unknown.ok());
    CHECK(unknown->instances.empty());
  }

  // docs/upstream-pitfalls.md "Tier names are case-insensitive"
  TEST_CASE("Tier spellings 'cpu', 'CPU', 'NPU' and 'gpu' all count: tiers are case-insensitive") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a,
          Batch({Stored({1}, std::nullopt, {101, 15}, ParseTier("cpu")),
                 Stored({1}, std::nullopt, {101, 15}, ParseTier("NPU")),
                 Stored({2}, 1, {100, 55}, ParseTier("gpu")),
                 Stored({2}, 1, {100, 55}, ParseTier("CPU"))}));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.longest_matched == 4);
    CHECK(m.gpu == 4);
    CHECK(m.cpu == 4);
  }

  // docs/upstream-pitfalls.md "DISK presence is counted"
  TEST_CASE("A block stored with medium DISK counts under DISK") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55}, ParseTier("DISK"))}));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.longest_matched == 4);
    CHECK(m.disk == 4);
    CHECK(m.gpu == 0);
  }

  // docs/upstream-pitfalls.md "The walk stops at the first missing block"
  TEST_CASE("The walk stops at the first missing block; a block in an unknown tier still counts") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    // H1 in tier "HBM3" (kept as its own tier), H2 missing, H3 present under a known H2' parent.
    Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15}, ParseTier("hbm3"))}));
    const SourceId b = Add(index, Engine("B"));
    Apply(index, b, Batch({Stored({1, 2, 3}, std::nullopt, kPrompt)}));
    Apply(index, a, Batch({Stored({3}, 2, {89, 63})}));  // parent 2 unknown on A: orphan
    Apply(index, b, Batch({Removed({2})}));
    const InstanceMatch ma = MatchOne(index, Query(), kPrompt, "A");
    CHECK(ma.longest_matched == 2);
    REQUIRE(ma.other_tiers.size() == 1);
    CHECK(ma.other_tiers[0].first == "HBM3");
    CHECK(ma.other_tiers[0].second == 2);
    CHECK(ma.TierTokens(ParseTier("HBM3")) == 2);
    const InstanceMatch mb = MatchOne(index, Query(), kPrompt, "B");
    CHECK(mb.longest_matched == 2);  // H3 is still held but H2 is not: no credit for H3
    CHECK(mb.gpu == 2);
  }

  // docs/upstream-pitfalls.md "Parent hash 0 is a hash, not the root"
  TEST_CASE("Parent hash 0 is a valid hash; only a nil parent is the root") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    auto r =
        Apply(index, a, Batch({Stored({0}, std::nullopt, {101, 15}), Stored({7}, 0, {100, 55})}));
    CHECK(r.orphans == 0);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 4);
    // A child of an unknown parent 0 in a fresh instance is an orphan, not a root.
    const SourceId b = Add(index, Engine("B"));
    auto rb = Apply(index, b, Batch({Stored({8}, 0, {101, 15})}));
    CHECK(rb.orphans == 1);
    CHECK(MatchOne(index, Query(), kPrompt, "B").longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "An unknown parent makes an orphan, never a new root"
  TEST_CASE("A BlockStored under an unknown parent is an orphan: not re-rooted, counted") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    // Tokens [101,15] under an unknown parent: re-rooting would falsely match prompt [101,15,...].
    auto r = Apply(index, a, Batch({Stored({1, 2}, 555, {101, 15, 100, 55})}));
    CHECK(r.orphans == 2);
    CHECK(r.replay_wanted());
    CHECK(r.stored == 0);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 0);
    const IndexStats s = index.stats();
    CHECK(s.orphans == 2);
    CHECK(s.blocks == 0);
    REQUIRE(s.instances.size() == 1);
    CHECK(s.instances[0].orphans == 2);
  }

  // docs/upstream-pitfalls.md "Known blocks still advance the chain"
  TEST_CASE("An event [E1 known, E2 new] chains E2 from E1, not from the root") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    Apply(index, a, Batch({Stored({1}, std::nullopt, {101, 15})}));
    Apply(index, a, Batch({Stored({1, 2, 3}, std::nullopt, kPrompt)}));
    const InstanceMatch m = MatchOne(index, Query(), kPrompt, "A");
    CHECK(m.longest_matched == 6);
    // [100,55] as a root prompt must not match (E2 hashed from the root would).
    CHECK(MatchOne(index, Query(), {100, 55}, "A").longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "The tenant is kept on store and remove"
  TEST_CASE("The source's tenant is kept on store and remove; tenant default sees none of it") {
    PrefixIndex index;
    SourceConfig c = Engine("A");
    c.tenant = "t1";
    const SourceId a = Add(index, c);
    Apply(index, a, Batch({Stored({1, 2}, std::nullopt, {101, 15, 100, 55})}));
    MatchQuery t1 = Query();
    t1.tenant = "t1";
    CHECK(MatchOne(index, t1, kPrompt, "A").longest_matched == 4);
    auto d = index.MatchTokens(Query(), kPrompt);
    REQUIRE(d.ok());
    CHECK(d->instances.empty());  // A is not known under tenant "default"
    Apply(index, a, Batch({Removed({2})}));
    CHECK(MatchOne(index, t1, kPrompt, "A").longest_matched == 2);
  }

  // docs/upstream-pitfalls.md "The salt scopes stored blocks too"
  TEST_CASE("A source salt or a root cache_salt scopes the chain, and children inherit it") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    BlockStored root = Stored({1}, std::nullopt, {101, 15});
    root.scope.salt = "s";
    Apply(index, a, Batch({root, Stored({2}, 1, {100, 55})}));
    MatchQuery salted = Query();
    salted.salt = "s";
    CHECK(MatchOne(index, salted, kPrompt, "A").longest_matched == 4);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 0);
    SourceConfig cs = Engine("B");
    cs.salt = "src";
    const SourceId b = Add(index, cs);
    Apply(index, b, Batch({Stored({1}, std::nullopt, {101, 15})}));
    MatchQuery src_salt = Query();
    src_salt.salt = "src";
    CHECK(MatchOne(index, src_salt, kPrompt, "B").longest_matched == 2);
    CHECK(MatchOne(index, Query(), kPrompt, "B").longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "An event's LoRA scopes its blocks"
  TEST_CASE("An event's lora_name or lora_id >= 0 scopes its blocks; lora_id -1 means no LoRA") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A"));
    BlockStored named = Stored({1}, std::nullopt, {101, 15});
    named.scope.lora_name = "L";
    BlockStored by_id = Stored({2}, std::nullopt, {101, 15});
    by_id.scope.lora_id = 3;
    BlockStored none = Stored({3}, std::nullopt, {101, 15});
    none.scope.lora_id = -1;
    Apply(index, a, Batch({named, by_id, none}));
    MatchQuery l = Query();
    l.lora = "L";
    CHECK(MatchOne(index, l, kPrompt, "A").longest_matched == 2);
    l.lora = LoraNameFrom(std::nullopt, 3);
    CHECK(MatchOne(index, l, kPrompt, "A").longest_matched == 2);
    CHECK(MatchOne(index, Query(), kPrompt, "A").longest_matched == 2);
    CHECK(index.stats().scopes == 3);
    // A remove carries no LoRA: it still finds the LoRA block.
    Apply(index, a, Batch({Removed({1})}));
    l.lora = "L";
    CHECK(MatchOne(index, l, kPrompt, "A").longest_matched == 0);
  }

  // docs/upstream-pitfalls.md "A remove finds its block whatever the configured block size"
  TEST_CASE(
      "With configured block size 3 and engine block size 2, a remove still finds its block") {
    PrefixIndex index;
    const SourceId a = Add(index, Engine("A", std::nullopt, 3));
    BlockStored e = Stored({1, 2}, std::nullopt, {101, 15, 100, 55});
    e.scope.block_size = 2;
    Apply(index, a, Batch({e}));
    MatchQuery q = Query();
    q.block_size = 2;
    CHECK(MatchOne(index, q, kPrompt, "A").longest_matched == 4);
    auto r = Apply(index, a, Batch({Removed({1, 2})}));
    CHECK(r.removed == 2);
    CHECK(r.unmapped == 0);
    const IndexStats s = index.stats();
    CHECK(s.blocks == 0);  // the index does not only grow
    CHECK(s.presences == 0);
    CHECK(s.engine_hashes == 0);
  }
}

}  // namespace
}  // namespace kvindex
