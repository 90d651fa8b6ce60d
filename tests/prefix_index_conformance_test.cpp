// Conformance suite: every implementation of an interface passes the same tests, so one
// TEST_CASE_TEMPLATE runs against every PrefixIndex implementation — the real index and the naive
// reference of tests/reference_index.h — through a small adapter each. Expected answers are
// hand-computed.
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "prefix_index_builders.h"
#include "reference_index.h"

namespace kvindex {
namespace {

constexpr uint32_t kBs = 2;

class RealAdapter {
 public:
  int AddSource(const std::string& name, DpRank rank, bool store,
                std::vector<std::string> serves = {}) {
    SourceConfig c;
    c.name = name;
    c.model = "m";
    c.block_size = kBs;
    c.format = store ? "mooncake" : "vllm";
    if (!store) c.dp_rank = rank;
    c.serves = std::move(serves);
    auto id = index_.AddSource(c);
    REQUIRE(id.ok());
    ids_.push_back(*id);
    ranks_.push_back(store ? std::nullopt : std::optional<DpRank>(rank));
    return static_cast<int>(ids_.size() - 1);
  }
  void Store(int s, std::vector<uint64_t> hashes, std::optional<uint64_t> parent,
             std::vector<TokenId> tokens, const std::string& tier, const std::string& lora = "") {
    BlockStored e = test::Stored(std::move(hashes), parent, std::move(tokens), ParseTier(tier));
    if (!lora.empty()) e.scope.lora_name = lora;
    REQUIRE(index_.Apply(ids_[static_cast<size_t>(s)], test::Batch({e}, ranks_[static_cast<size_t>(s)])).ok());
  }
  void Remove(int s, std::vector<uint64_t> hashes, const std::string& tier) {
    REQUIRE(index_.Apply(ids_[static_cast<size_t>(s)],
                         test::Batch({test::Removed(std::move(hashes), ParseTier(tier))},
                                     ranks_[static_cast<size_t>(s)]))
                .ok());
  }
  void Clear(int s) { REQUIRE(index_.ClearSource(ids_[static_cast<size_t>(s)]).ok()); }
  PrefixMatch Match(const std::vector<TokenId>& tokens, const std::string& lora = "") {
    MatchQuery q;
    q.model = "m";
    q.lora = lora;
    auto m = index_.MatchTokens(q, tokens);
    REQUIRE(m.ok());
    return *m;
  }

 private:
  PrefixIndex index_;
  std::vector<SourceId> ids_;
  std::vector<std::optional<DpRank>> ranks_;
};

class ReferenceAdapter {
 public:
  int AddSource(const std::string& name, DpRank rank, bool store,
                std::vector<std::string> serves = {}) {
    return ref_.AddSource({name, rank, store, std::move(serves)});
  }
  void Store(int s, std::vector<uint64_t> hashes, std::optional<uint64_t> parent,
             std::vector<TokenId> tokens, const std::string& tier, const std::string& lora = "") {
    ref_.Store(s, hashes, parent, tokens, tier, lora, "", kBs);
  }
  void Remove(int s, std::vector<uint64_t> hashes, const std::string& tier) {
    ref_.Remove(s, hashes, tier);
  }
  void Clear(int s) { ref_.Clear(s); }
  PrefixMatch Match(const std::vector<TokenId>& tokens, const std::string& lora = "") {
    return ref_.MatchTokens(tokens, lora, "", kBs);
  }

 private:
  test::ReferenceIndex ref_;
};

const std::vector<TokenId> kPrompt = {101, 15, 100, 55, 89, 63};

// A copy: callers pass temporaries, and doctest's CHECK keeps references into its operands.
InstanceMatch Get(const PrefixMatch& m, std::string_view name) {
  const InstanceMatch* im = m.Find(name);
  REQUIRE(im != nullptr);
  return *im;
}

TEST_SUITE("prefix_index") {
  // docs/index-rules.md "Worked example"
  TEST_CASE_TEMPLATE("Conformance: the worked example of the index rules", T, RealAdapter,
                     ReferenceAdapter) {
    T x;
    const int r0 = x.AddSource("A", 0, false);
    const int r1 = x.AddSource("A", 1, false);
    const int s = x.AddSource("S", 0, true, {"A"});
    x.Store(r0, {11, 12}, std::nullopt, {101, 15, 100, 55}, "GPU");
    x.Store(r1, {11}, std::nullopt, {101, 15}, "GPU");
    x.Store(s, {91, 92}, std::nullopt, {101, 15, 100, 55}, "CPU");
    x.Store(s, {91}, std::nullopt, {101, 15}, "DISK");
    x.Store(s, {93}, 92, {89, 63}, "DISK");
    const PrefixMatch m = x.Match(kPrompt);
    const InstanceMatch a = Get(m, "A");
    CHECK(a.longest_matched == 6);
    CHECK(a.gpu == 4);
    CHECK(a.cpu == 4);
    CHECK(a.disk == 4);
    CHECK(a.dp == DpList{{0, 4}, {1, 2}});
  }

  TEST_CASE_TEMPLATE("Conformance: stores are idempotent and one remove undoes them", T, RealAdapter,
                     ReferenceAdapter) {
    T x;
    const int a = x.AddSource("A", 0, false);
    for (int i = 0; i < 3; ++i) x.Store(a, {1, 2}, std::nullopt, {101, 15, 100, 55}, "GPU");
    CHECK(Get(x.Match(kPrompt), "A").longest_matched == 4);
    x.Remove(a, {2}, "GPU");
    CHECK(Get(x.Match(kPrompt), "A").longest_matched == 2);
    x.Remove(a, {1}, "GPU");
    CHECK(Get(x.Match(kPrompt), "A").longest_matched == 0);
  }

  TEST_CASE_TEMPLATE("Conformance: removing one replica keeps the others", T, RealAdapter,
                     ReferenceAdapter) {
    T x;
    const int r0 = x.AddSource("A", 0, false);
    const int r1 = x.AddSource("A", 1, false);
    x.Store(r0, {1}, std::nullopt, {101, 15}, "GPU");
    x.Store(r0, {1}, std::nullopt, {101, 15}, "CPU");
    x.Store(r1, {1}, std::nullopt, {101, 15}, "GPU");
    x.Remove(r0, {1}, "GPU");
    const InstanceMatch a = Get(x.Match(kPrompt), "A");
    CHECK(a.gpu == 2);
    CHECK(a.cpu == 2);
    CHECK(a.dp == DpList{{0, 2}, {1, 2}});
  }

  TEST_CASE_TEMPLATE("Conformance: an orphan is not indexed under a guessed chain", T, RealAdapter,
                     ReferenceAdapter) {
    T x;
    const int a = x.AddSource("A", 0, false);
    x.Store(a, {2}, 777, {101, 15}, "GPU");
    CHECK(Get(x.Match(kPrompt), "A").longest_matched == 0);
  }

  TEST_CASE_TEMPLATE("Conformance: clearing a source leaves other sources' presence", T,
                     RealAdapter, ReferenceAdapter) {
    T x;
    const int a = x.AddSource("A", 0, false);
    const int b = x.AddSource("B", 0, false);
    x.Store(a, {1, 2, 3}, std::nullopt, kPrompt, "GPU");
    x.Store(b, {1, 2}, std::nullopt, {101, 15, 100, 55}, "CPU");
    x.Clear(a);
    const PrefixMatch m = x.Match(kPrompt);
    CHECK(Get(m, "A").longest_matched == 0);
    CHECK(Get(m, "B").longest_matched == 4);
    CHECK(Get(m, "B").cpu == 4);
  }

  TEST_CASE_TEMPLATE("Conformance: LoRA scopes share nothing", T, RealAdapter, ReferenceAdapter) {
    T x;
    const int a = x.AddSource("A", 0, false);
    x.Store(a, {1, 2}, std::nullopt, {101, 15, 100, 55}, "GPU", "L");
    CHECK(Get(x.Match(kPrompt), "A").longest_matched == 0);
    CHECK(Get(x.Match(kPrompt, "L"), "A").longest_matched == 4);
  }

  TEST_CASE_TEMPLATE("Conformance: a store serving every instance counts for each, rankless", T,
                     RealAdapter, ReferenceAdapter) {
    T x;
    x.AddSource("A", 0, false);
    x.AddSource("B", 0, false);
    const int s = x.AddSource("S", 0, true, {"*"});
    x.Store(s, {1, 2}, std::nullopt, {101, 15, 100, 55}, "DISK");
    const PrefixMatch m = x.Match(kPrompt);
    for (const char* name : {"A", "B", "S"}) {
      CHECK(Get(m, name).longest_matched == 4);
      CHECK(Get(m, name).disk == 4);
    }
    CHECK(Get(m, "A").dp == DpList{{0, 0}});
  }
}

}  // namespace
}  // namespace kvindex
