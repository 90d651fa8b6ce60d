// Differential test: seeded random event streams go to both PrefixIndex and the naive
// ReferenceIndex (tests/reference_index.h), and every query answer is compared. Streams mix stores
// (root and child events, several tiers, LoRA and salted scopes), orphans (unknown parents),
// removes (known and unknown hashes), duplicates (replayed batches), clears (AllCleared and
// ClearSource), several instances with two DP ranks, and a Mooncake store serving instances.
// The seed is printed on failure.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "prefix_index_builders.h"
#include "reference_index.h"

namespace kvindex {
namespace {

constexpr uint32_t kBlockSize = 2;

struct Src {
  SourceId real;
  int ref;
  bool store;
  std::optional<DpRank> rank;
};

// An engine hash as a publisher would derive it: a function of the prefix and its scope (vLLM
// hashes are chained over tokens and include LoRA / salt), different for the store's publisher.
uint64_t EngineHashOf(const std::vector<TokenId>& tokens, size_t blocks, const std::string& lora,
                      const std::string& salt, bool store) {
  uint64_t h = store ? 0x5151515151515151ULL : 0x1234567ULL;
  for (char c : lora + "|" + salt) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  for (size_t i = 0; i < blocks * kBlockSize; ++i) h = (h ^ tokens[i]) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

// How many compared answers had a non-zero match (the stream must exercise hits, not only misses).
int g_hits = 0;
int g_compared = 0;

void CompareMatches(const PrefixMatch& real, const PrefixMatch& ref, uint64_t seed, int step,
                    const char* what) {
  CAPTURE(seed);
  CAPTURE(step);
  const std::string kind = what;
  CAPTURE(kind);
  REQUIRE(real.instances.size() == ref.instances.size());
  for (size_t i = 0; i < ref.instances.size(); ++i) {
    const InstanceMatch& a = real.instances[i];
    const InstanceMatch& b = ref.instances[i];
    CAPTURE(b.instance);
    REQUIRE(a.instance == b.instance);
    REQUIRE(a.longest_matched == b.longest_matched);
    REQUIRE(a.gpu == b.gpu);
    REQUIRE(a.cpu == b.cpu);
    REQUIRE(a.disk == b.disk);
    REQUIRE(a.dp == b.dp);
    ++g_compared;
    if (b.longest_matched > 0) ++g_hits;
  }
}

void RunStream(uint64_t seed, int steps) {
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };

  PrefixIndex real;
  test::ReferenceIndex ref;
  std::vector<Src> sources;
  auto add = [&](const std::string& name, std::optional<DpRank> rank, bool store,
                 std::vector<std::string> serves) {
    SourceConfig c;
    c.name = name;
    c.model = "m";
    c.block_size = kBlockSize;
    c.format = store ? "mooncake" : "vllm";
    c.dp_rank = rank;
    c.serves = serves;
    auto id = real.AddSource(c);
    REQUIRE(id.ok());
    const int r = ref.AddSource({name, rank.value_or(0), store, serves});
    sources.push_back({*id, r, store, rank});
  };
  add("A", 0, false, {});
  add("A", 1, false, {});
  add("B", 0, false, {});
  add("C", 0, false, {});
  add("S", std::nullopt, true, (seed % 2 == 0) ? std::vector<std::string>{"A"}
                                               : std::vector<std::string>{"*"});

  const char* kTiers[] = {"GPU", "CPU", "DISK"};
  const char* kLoras[] = {"", "L"};
  const char* kSalts[] = {"", "s"};
  auto random_prompt = [&] {
    std::vector<TokenId> t(static_cast<size_t>(1 + uniform(4)) * kBlockSize);
    for (auto& x : t) x = static_cast<TokenId>(1 + uniform(3));
    return t;
  };
  std::vector<std::pair<size_t, EventBatch>> history;

  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    const int op = uniform(100);
    const size_t si = static_cast<size_t>(uniform(static_cast<int>(sources.size())));
    const Src& src = sources[si];
    const std::string lora = kLoras[uniform(2)];
    const std::string salt = kSalts[uniform(2)];
    const std::vector<TokenId> prompt = random_prompt();
    const size_t nblocks = prompt.size() / kBlockSize;
    std::string tier = src.store ? kTiers[1 + uniform(2)] : kTiers[uniform(4) == 0 ? 1 : 0];
    if (op < 45) {  // store: blocks [k, n) of the prompt, child of block k-1
      const size_t k = static_cast<size_t>(uniform(static_cast<int>(nblocks)));
      std::vector<uint64_t> hashes;
      for (size_t b = k; b < nblocks; ++b) {
        hashes.push_back(EngineHashOf(prompt, b + 1, lora, salt, src.store));
      }
      std::optional<uint64_t> parent;
      if (k > 0) parent = EngineHashOf(prompt, k, lora, salt, src.store);
      std::vector<TokenId> tokens(prompt.begin() + static_cast<long>(k * kBlockSize), prompt.end());
      BlockStored e = test::Stored(hashes, parent, tokens, ParseTier(tier));
      if (!lora.empty()) e.scope.lora_name = lora;
      if (!salt.empty()) e.scope.salt = salt;
      EventBatch batch = test::Batch({e}, src.rank);
      REQUIRE(real.Apply(src.real, batch).ok());
      ref.Store(src.ref, hashes, parent, tokens, tier, lora, salt, kBlockSize);
      history.emplace_back(si, std::move(batch));
    } else if (op < 52) {  // orphan: a parent nobody stored
      const uint64_t parent = rng() | 1;
      const std::vector<uint64_t> hashes = {rng(), rng()};
      std::vector<TokenId> tokens(prompt.begin(), prompt.begin() + 2 * kBlockSize > prompt.end()
                                                      ? prompt.end()
                                                      : prompt.begin() + 2 * kBlockSize);
      if (tokens.size() != 2 * kBlockSize) continue;
      auto r = real.Apply(src.real, test::Batch({test::Stored(hashes, parent, tokens,
                                                              ParseTier(tier))},
                                                src.rank));
      REQUIRE(r.ok());
      CHECK(r->orphans == 2);
      ref.Store(src.ref, hashes, parent, tokens, tier, "", "", kBlockSize);
    } else if (op < 72) {  // remove some blocks (known or not)
      std::vector<uint64_t> hashes;
      for (size_t b = 0; b < nblocks; ++b) {
        if (uniform(2) == 0) hashes.push_back(EngineHashOf(prompt, b + 1, lora, salt, src.store));
      }
      if (uniform(8) == 0) hashes.push_back(rng());
      REQUIRE(real.Apply(src.real, test::Batch({test::Removed(hashes, ParseTier(tier))}, src.rank))
                  .ok());
      ref.Remove(src.ref, hashes, tier);
    } else if (op < 78) {  // duplicate: replay an earlier batch
      if (history.empty()) continue;
      const auto& [hi, batch] = history[static_cast<size_t>(uniform(static_cast<int>(history.size())))];
      REQUIRE(real.Apply(sources[hi].real, batch).ok());
      const BlockStored& e = std::get<BlockStored>(batch.events[0]);
      std::vector<uint64_t> hashes;
      for (const EngineHash& h : e.block_hashes) hashes.push_back(h.value);
      std::optional<uint64_t> parent;
      if (e.parent) parent = e.parent->value;
      ref.Store(sources[hi].ref, hashes, parent, e.token_ids, std::string(e.tier->name()),
                e.scope.lora_name.value_or(""), e.scope.salt.value_or(""), kBlockSize);
    } else if (op < 81) {  // clear one source
      if (uniform(2) == 0) {
        REQUIRE(real.Apply(src.real, test::Batch({AllCleared{}}, src.rank)).ok());
      } else {
        REQUIRE(real.ClearSource(src.real).ok());
      }
      ref.Clear(src.ref);
    } else {  // queries
      MatchQuery q;
      q.model = "m";
      q.lora = lora;
      q.salt = salt;
      auto m = real.MatchTokens(q, prompt);
      REQUIRE(m.ok());
      CompareMatches(*m, ref.MatchTokens(prompt, lora, salt, kBlockSize), seed, step, "tokens");
      std::vector<uint64_t> hashes;
      std::vector<EngineHash> engine;
      const bool store_hashes = uniform(3) == 0;
      for (size_t b = 0; b < nblocks; ++b) {
        hashes.push_back(EngineHashOf(prompt, b + 1, lora, salt, store_hashes));
        engine.push_back(EngineHash{hashes.back()});
      }
      auto me = real.MatchEngineHashes(q, engine);
      REQUIRE(me.ok());
      CompareMatches(*me, ref.MatchEngine(hashes, lora, salt, kBlockSize), seed, step, "engine");
    }
  }
  const IndexStats s = real.stats();
  CHECK(s.presences == ref.presences());
  CHECK(s.blocks == ref.blocks());
  CHECK(s.orphans == ref.orphans);
  CHECK(s.unmapped == ref.unmapped);
}

TEST_SUITE("prefix_index") {
  TEST_CASE("Differential: random event streams agree with the naive reference index") {
    // Fixed seeds for reproducibility; KVINDEX_DIFF_SEED runs one more.
    for (uint64_t seed = 1; seed <= 40; ++seed) RunStream(seed, 3000);
    MESSAGE("compared " << g_compared << " instance answers, " << g_hits << " with hits");
    CHECK(g_hits * 10 > g_compared);  // at least 10% of answers are hits
    if (const char* extra = std::getenv("KVINDEX_DIFF_SEED")) {
      RunStream(std::strtoull(extra, nullptr, 10), 20000);
    }
  }
}

}  // namespace
}  // namespace kvindex
