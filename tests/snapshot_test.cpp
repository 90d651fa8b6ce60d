// Snapshots (kvindex/snapshot/snapshot.h): an index built from random event streams is
// snapshotted and loaded into a fresh index; every query answer and counter must equal the
// original's and the naive reference model's (tests/reference_index.h), and both indexes must go
// on agreeing when the same events follow. Damaged snapshots (truncated at every byte, bit flips
// everywhere) must fail with the file name and a byte offset, never crash or load.
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/sequencer.h"
#include "kvindex/snapshot/snapshot.h"
#include "prefix_index_builders.h"
#include "reference_index.h"

namespace kvindex {
namespace {

constexpr uint32_t kBs = 2;

// A publisher-like engine hash: a chain over the block's tokens and scope, per publisher kind.
uint64_t EngineOf(const std::vector<TokenId>& t, size_t blocks, const std::string& scope,
                  bool store) {
  uint64_t h = store ? 0xA5A5A5A5ULL : 0x77ULL;
  for (char c : scope) h = (h * 131) ^ static_cast<uint8_t>(c);
  for (size_t i = 0; i < blocks * kBs; ++i) h = (h ^ t[i]) * 0x100000001b3ULL;
  return h ^ (h >> 31);
}

struct World {
  struct Src {
    SourceId id;
    int ref = 0;
    bool store = false;
    std::optional<DpRank> rank;
  };
  PrefixIndex index;
  test::ReferenceIndex ref;
  std::vector<Src> sources;
  std::vector<std::pair<size_t, EventBatch>> log;  // what was applied, for the copy

  void Add(PrefixIndex& into, const std::string& name, std::optional<DpRank> rank, bool store,
           const std::vector<std::string>& serves, bool with_ref) {
    SourceConfig c;
    c.name = name;
    c.model = "m";
    c.block_size = kBs;
    c.format = store ? "mooncake" : "vllm";
    c.dp_rank = rank;
    c.serves = serves;
    auto id = into.AddSource(c);
    REQUIRE(id.ok());
    if (!with_ref) return;
    sources.push_back({*id, ref.AddSource({name, rank.value_or(0), store, serves}), store, rank});
  }
  void Define(PrefixIndex& into, bool with_ref) {
    Add(into, "A", 0, false, {}, with_ref);
    Add(into, "A", 1, false, {}, with_ref);
    Add(into, "B", 0, false, {}, with_ref);
    Add(into, "C", 0, false, {}, with_ref);
    Add(into, "S", std::nullopt, true, {"*"}, with_ref);
  }
};

std::vector<TokenId> Prompt(std::mt19937_64& rng) {
  std::vector<TokenId> t((1 + rng() % 4) * kBs);
  for (auto& x : t) x = static_cast<TokenId>(1 + rng() % 3);
  return t;
}

// Applies `steps` random events to w.index and w.ref (and to `also`, when given).
void Drive(World& w, std::mt19937_64& rng, int steps, PrefixIndex* also = nullptr) {
  const char* kLoras[] = {"", "L"};
  for (int step = 0; step < steps; ++step) {
    const size_t si = rng() % w.sources.size();
    const World::Src& src = w.sources[si];
    const std::string lora = kLoras[rng() % 2];
    const std::vector<TokenId> prompt = Prompt(rng);
    const size_t n = prompt.size() / kBs;
    const std::string tier = src.store ? (rng() % 2 ? "CPU" : "DISK") : (rng() % 5 ? "GPU" : "CPU");
    const int op = static_cast<int>(rng() % 100);
    EventBatch batch;
    if (op < 55) {
      const size_t k = rng() % n;
      std::vector<uint64_t> hashes;
      for (size_t b = k; b < n; ++b) hashes.push_back(EngineOf(prompt, b + 1, lora, src.store));
      std::optional<uint64_t> parent;
      if (k > 0) parent = EngineOf(prompt, k, lora, src.store);
      std::vector<TokenId> tokens(prompt.begin() + static_cast<long>(k * kBs), prompt.end());
      BlockStored e = test::Stored(hashes, parent, tokens, ParseTier(tier));
      if (!lora.empty()) e.scope.lora_name = lora;
      batch = test::Batch({e}, src.rank);
      w.ref.Store(src.ref, hashes, parent, tokens, tier, lora, "", kBs);
    } else if (op < 85) {
      std::vector<uint64_t> hashes;
      for (size_t b = 0; b < n; ++b) {
        if (rng() % 2) hashes.push_back(EngineOf(prompt, b + 1, lora, src.store));
      }
      batch = test::Batch({test::Removed(hashes, ParseTier(tier))}, src.rank);
      w.ref.Remove(src.ref, hashes, tier);
    } else if (op < 88) {
      batch = test::Batch({AllCleared{}}, src.rank);
      w.ref.Clear(src.ref);
    } else {
      continue;
    }
    REQUIRE(w.index.Apply(src.id, batch).ok());
    if (also != nullptr) REQUIRE(also->Apply(src.id, batch).ok());
  }
}

void SameMatch(const PrefixMatch& a, const PrefixMatch& b) {
  REQUIRE(a.instances.size() == b.instances.size());
  for (size_t i = 0; i < a.instances.size(); ++i) {
    CAPTURE(b.instances[i].instance);
    REQUIRE(a.instances[i].instance == b.instances[i].instance);
    CHECK(a.instances[i].longest_matched == b.instances[i].longest_matched);
    CHECK(a.instances[i].gpu == b.instances[i].gpu);
    CHECK(a.instances[i].cpu == b.instances[i].cpu);
    CHECK(a.instances[i].disk == b.instances[i].disk);
    CHECK(a.instances[i].dp == b.instances[i].dp);
  }
}

// Every prompt of up to 4 blocks over tokens {1, 2, 3}... sampled: answers of `a` equal `b`'s and
// the reference model's.
int CompareAll(const PrefixIndex& a, const PrefixIndex& b, const World& w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int hits = 0;
  for (int q = 0; q < 300; ++q) {
    const std::vector<TokenId> prompt = Prompt(rng);
    for (const std::string lora : {"", "L"}) {
      MatchQuery mq;
      mq.model = "m";
      mq.lora = lora;
      auto ma = a.MatchTokens(mq, prompt);
      auto mb = b.MatchTokens(mq, prompt);
      REQUIRE(ma.ok());
      REQUIRE(mb.ok());
      SameMatch(*ma, *mb);
      SameMatch(*ma, w.ref.MatchTokens(prompt, lora, "", kBs));
      std::vector<EngineHash> engine;
      std::vector<uint64_t> raw;
      for (size_t i = 0; i < prompt.size() / kBs; ++i) {
        raw.push_back(EngineOf(prompt, i + 1, lora, false));
        engine.push_back(EngineHash{raw.back()});
      }
      auto ea = a.MatchEngineHashes(mq, engine);
      auto eb = b.MatchEngineHashes(mq, engine);
      REQUIRE(ea.ok());
      REQUIRE(eb.ok());
      SameMatch(*ea, *eb);
      SameMatch(*ea, w.ref.MatchEngine(raw, lora, "", kBs));
      for (const auto& m : ma->instances) hits += m.longest_matched > 0;
    }
  }
  const IndexStats sa = a.stats();
  const IndexStats sb = b.stats();
  CHECK(sa.blocks == sb.blocks);
  CHECK(sa.presences == sb.presences);
  CHECK(sa.engine_hashes == sb.engine_hashes);
  CHECK(sa.orphans == sb.orphans);
  CHECK(sa.unmapped == sb.unmapped);
  CHECK(sa.presences == w.ref.presences());
  CHECK(sa.blocks == w.ref.blocks());
  return hits;
}

std::string Snap(const PrefixIndex& index, std::vector<SourceSeqState> seq = {}) {
  std::string out;
  auto n = WriteSnapshot(index.CopyState(), seq, 1234, [&](std::string_view c) {
    out.append(c);
    return true;
  });
  REQUIRE(n.ok());
  REQUIRE(*n == out.size());
  return out;
}

// Loads `bytes` in pieces of random sizes.
Result<SnapshotInfo> Load(std::string_view bytes, PrefixIndex* into, uint64_t seed = 1) {
  SnapshotReader reader("mem.kvsnap", into);
  std::mt19937_64 rng(seed);
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1 + rng() % 700);
    if (Status st = reader.Feed(bytes.substr(0, n)); !st.ok()) return st;
    bytes.remove_prefix(n);
  }
  return reader.Finish();
}

// Records a sequencer's decisions.
struct SeqSink {
  std::vector<uint64_t> applied;
  std::vector<uint64_t> requests;
  uint64_t lost = 0;
  int clears = 0;
  void Apply(uint64_t seq, int&&) { applied.push_back(seq); }
  void Reapply(uint64_t, int&&) {}
  void Clear() { ++clears; }
  void RequestReplay(uint64_t from) { requests.push_back(from); }
  void Lost(uint64_t, uint64_t count) { lost += count; }
};

TEST_SUITE("snapshot") {
  TEST_CASE("A seeded sequencer continues from the stored watermark") {
    SeqSink sink;
    SourceSequencer<int> seq;
    seq.Seed(19);
    CHECK(seq.watermark() == std::optional<uint64_t>(19));
    seq.OnLive(20, 0, sink);  // the next one: applied, no gap
    CHECK(sink.applied == std::vector<uint64_t>{20});
    seq.OnLive(25, 0, sink);  // a gap from the watermark: replay from 21
    CHECK(sink.requests == std::vector<uint64_t>{21});
    seq.OnReplayEnd(sink);  // nothing came: 21..24 lost, 25 applied
    CHECK(sink.lost == 4);
    CHECK(sink.applied.back() == 25);
    seq.OnLive(0, 0, sink);  // the publisher restarted
    CHECK(sink.clears == 1);
    SourceSequencer<int> late;
    late.OnLive(3, 0, sink);
    late.Seed(100);  // after the first batch: no effect
    CHECK(late.watermark() == std::optional<uint64_t>(3));
  }


  TEST_CASE("Round trip: a loaded snapshot answers as the original and the reference model") {
    int hits = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      CAPTURE(seed);
      World w;
      w.Define(w.index, true);
      std::mt19937_64 rng(seed);
      Drive(w, rng, 1500);
      std::vector<SourceSeqState> seq(w.sources.size());
      seq[1].watermark = 41;
      seq[1].publisher = "tcp://127.0.0.1:5557";
      seq[2].lost = 7;
      seq[2].trust = {.exact = false, .lost_batches = 3, .since_ns = -9, .last_loss_ns = -5,
                      .reason = TrustReason::kLateJoin};
      const std::string bytes = Snap(w.index, seq);
      PrefixIndex loaded;
      auto info = Load(bytes, &loaded, seed);
      REQUIRE_MESSAGE(info.ok(), info.status().ToString());
      CHECK(info->seq == seq);
      CHECK(info->sources.size() == w.sources.size());
      CHECK(info->created_ns == 1234);
      CHECK(info->presences == w.index.stats().presences);
      CHECK(info->bytes == bytes.size());
      hits += CompareAll(loaded, w.index, w, seed);
      // A snapshot of the loaded index is the same bytes.
      CHECK(Snap(loaded, seq) == bytes);
      // Both go on alike: the loaded engine maps and holders take the same events.
      Drive(w, rng, 500, &loaded);
      hits += CompareAll(loaded, w.index, w, seed + 100);
    }
    CHECK(hits > 500);
  }

  TEST_CASE("Empty index, and loading into a non-empty index is refused") {
    PrefixIndex empty;
    const std::string bytes = Snap(empty);
    PrefixIndex loaded;
    auto info = Load(bytes, &loaded);
    REQUIRE(info.ok());
    CHECK(info->blocks == 0);
    World w;
    w.Define(w.index, true);
    const std::string some = Snap(w.index);
    REQUIRE(Load(some, &loaded).ok());
    auto again = Load(some, &loaded);
    CHECK_FALSE(again.ok());
  }

  TEST_CASE("Damage: truncation at every byte and bit flips fail with name and offset") {
    World w;
    w.Define(w.index, true);
    std::mt19937_64 rng(7);
    Drive(w, rng, 60);
    const std::string bytes = Snap(w.index);
    REQUIRE(bytes.size() > 200);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      CAPTURE(cut);
      PrefixIndex into;
      auto r = Load(std::string_view(bytes).substr(0, cut), &into, cut);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message().find("mem.kvsnap: byte ") == 0);
    }
    for (size_t at = 0; at < bytes.size(); ++at) {
      for (int bit : {0, 5}) {
        CAPTURE(at);
        std::string bad = bytes;
        bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
        PrefixIndex into;
        auto r = Load(bad, &into, at);
        REQUIRE_FALSE(r.ok());
        CHECK(r.status().message().find("mem.kvsnap: byte ") == 0);
      }
    }
    std::string extra = bytes + "x";
    PrefixIndex into;
    CHECK_FALSE(Load(extra, &into).ok());
  }

  TEST_CASE("IndexLoader: a duplicate block fails the load, in one run or across runs") {
    for (const bool across : {false, true}) {
      CAPTURE(across);
      PrefixIndex index;
      auto loader = IndexLoader::Begin(index);
      REQUIRE(loader.ok());
      IndexLoader& l = **loader;
      SourceConfig c;
      c.name = "a";
      c.model = "m";
      c.block_size = kBs;
      c.format = "vllm";
      REQUIRE(l.AddSource(c).ok());
      REQUIRE(l.AddHolder({0, std::nullopt}).ok());
      Scope scope;
      scope.model = "m";
      scope.block_size = kBs;
      REQUIRE(l.AddScope(scope).ok());
      for (const char* tier : {"GPU", "CPU", "DISK"}) REQUIRE(l.AddTier(tier).ok());
      REQUIRE(l.BeginBlocks(4).ok());
      const StatePresence held[] = {{0, 1}};
      const uint64_t first[] = {11, 12, 13};
      const uint64_t dup_same_run[] = {14, 14};
      const uint64_t dup_other_run[] = {12};
      Status status = l.AddRun(0, 0, held, across ? std::span<const uint64_t>(first) :
                                                    std::span<const uint64_t>(first).first(2),
                               {});
      if (status.ok()) {
        status = l.AddRun(0, 0, held,
                          across ? std::span<const uint64_t>(dup_other_run)
                                 : std::span<const uint64_t>(dup_same_run),
                          {});
      }
      if (status.ok()) status = l.Finish({});
      CHECK(status.code() == StatusCode::kCorrupt);
      CHECK(status.message().find("duplicate block") != std::string::npos);
    }
  }

  TEST_CASE("Files: atomic write, read, listing and pruning") {
    World w;
    w.Define(w.index, true);
    std::mt19937_64 rng(3);
    Drive(w, rng, 200);
    const std::string dir = "snapshot_test_dir";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directory(dir);
    for (int64_t t : {300, 100, 200}) {
      auto n = WriteSnapshotFile(SnapshotPath(dir, t), w.index.CopyState(), {}, t);
      REQUIRE(n.ok());
    }
    const std::vector<std::string> all = ListSnapshots(dir);
    REQUIRE(all.size() == 3);
    CHECK(all[0] == SnapshotPath(dir, 300));
    PrefixIndex loaded;
    auto info = ReadSnapshotFile(all[0], &loaded);
    REQUIRE(info.ok());
    CHECK(info->created_ns == 300);
    CompareAll(loaded, w.index, w, 9);
    PruneSnapshots(dir, 2);
    CHECK(ListSnapshots(dir).size() == 2);
    auto missing = ReadSnapshotFile(dir + "/none.kvsnap", nullptr);
    CHECK(missing.status().code() == StatusCode::kNotFound);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace kvindex
