// Snapshot copies taken while the writer goes on (PrefixIndex::BeginCopy(), StateCopy): the copy
// must be the state at its point, checked against an index and the naive reference model
// (tests/reference_index.h) that received only the events applied before the point; the eviction
// order a snapshot stores must make a restored index evict the same blocks next; snapshots of
// the previous format version must still load.
#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/snapshot/snapshot.h"

#include "prefix_index_builders.h"
#include "reference_index.h"

namespace kvindex {
namespace {

constexpr uint32_t kBs = 4;

SourceConfig Engine(const std::string& name) {
  SourceConfig c;
  c.name = name;
  c.model = "m";
  c.block_size = kBs;
  return c;
}

std::string Snap(const IndexState& state) {
  std::string out;
  auto n = WriteSnapshot(state, {}, 77, [&](std::string_view c) {
    out.append(c);
    return true;
  });
  REQUIRE(n.ok());
  return out;
}

// One event, as the index and the reference model each take it.
struct Op {
  size_t source = 0;
  int kind = 0;  // 0 store, 1 remove, 2 clear
  std::vector<uint64_t> hashes;
  std::vector<TokenId> tokens;
};

// A stream over 4 instances: root prompts of 1-8 blocks from a wide token space (so the index
// grows to many record segments), removals of half of an earlier prompt, an earlier prompt stored
// again by another instance, and rare clears (1 in 8,000).
class Stream {
 public:
  explicit Stream(uint64_t seed) : rng_(seed) {}
  Op Next() {
    Op op;
    op.source = rng_() % 4;
    const int roll = static_cast<int>(rng_() % 8000);
    if (roll < 1) {
      op.kind = 2;
      return op;
    }
    if (roll < 2800 && !stored_.empty()) {
      const Op& old = stored_[rng_() % stored_.size()];
      op.source = old.source;
      op.kind = 1;
      for (uint64_t h : old.hashes) {
        if (rng_() % 2) op.hashes.push_back(h);
      }
      return op;
    }
    if (roll < 3600 && !stored_.empty()) {
      op = stored_[rng_() % stored_.size()];
      op.source = rng_() % 4;
      return op;
    }
    const size_t n = 1 + rng_() % 8;
    for (size_t b = 0; b < n; ++b) {
      for (uint32_t t = 0; t < kBs; ++t)
        op.tokens.push_back(static_cast<TokenId>(rng_() % 1000000));
      op.hashes.push_back(rng_() | 1);
    }
    stored_.push_back(op);
    return op;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<Op> stored_;
};

struct Target {
  PrefixIndex* index;
  std::vector<SourceId> ids;
  test::ReferenceIndex* ref = nullptr;
  std::vector<int> ref_ids;
};

Target Define(PrefixIndex& index, test::ReferenceIndex* ref) {
  Target t{&index, {}, ref, {}};
  for (const char* name : {"A", "B", "C", "D"}) {
    auto id = index.AddSource(Engine(name));
    REQUIRE(id.ok());
    t.ids.push_back(*id);
    if (ref != nullptr) t.ref_ids.push_back(ref->AddSource({name, 0, false, {}}));
  }
  return t;
}

void Apply(Target& t, const Op& op) {
  EventBatch batch;
  if (op.kind == 0) {
    batch = test::Batch({test::Stored(op.hashes, std::nullopt, op.tokens, Tier::Gpu())});
  } else if (op.kind == 1) {
    batch = test::Batch({test::Removed(op.hashes, Tier::Gpu())});
  } else {
    batch = test::Batch({AllCleared{}});
  }
  REQUIRE(t.index->Apply(t.ids[op.source], batch).ok());
  if (t.ref == nullptr) return;
  const int s = t.ref_ids[op.source];
  if (op.kind == 0) {
    t.ref->Store(s, op.hashes, std::nullopt, op.tokens, "GPU", "", "", kBs);
  } else if (op.kind == 1) {
    t.ref->Remove(s, op.hashes, "GPU");
  } else {
    t.ref->Clear(s);
  }
}

void SameMatch(const PrefixMatch& a, const PrefixMatch& b) {
  REQUIRE(a.instances.size() == b.instances.size());
  for (size_t i = 0; i < a.instances.size(); ++i) {
    CHECK(a.instances[i].instance == b.instances[i].instance);
    CHECK(a.instances[i].longest_matched == b.instances[i].longest_matched);
    CHECK(a.instances[i].gpu == b.instances[i].gpu);
  }
}

// The same snapshot in format version 1: the version field, and the meta frame without the
// per-instance engine entry counts (its checksum recomputed).
std::string AsVersion1(const std::string& v2) {
  auto le = [](uint64_t v, int n) {
    std::string b;
    for (int i = 0; i < n; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
    return b;
  };
  REQUIRE(v2.size() > 21);
  REQUIRE(v2[16] == 'M');
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t{static_cast<uint8_t>(v2[17 + i])} << (8 * i);
  const std::string payload = v2.substr(21, len);
  size_t at = 0;
  for (int field = 0; field < 9; ++field) {  // created and the 8 counts
    while (static_cast<uint8_t>(payload.at(at)) & 0x80) ++at;
    ++at;
  }
  const std::string trimmed = payload.substr(0, at);
  std::string out = v2.substr(0, 8) + le(1, 4) + v2.substr(12, 4);
  out += "M" + le(trimmed.size(), 4) + trimmed +
         le(XXH3_64bits_withSeed(trimmed.data(), trimmed.size(), 'M'), 8);
  return out + v2.substr(21 + len + 8);
}

// Instance A's longest match for `tokens`.
uint64_t LongestOfA(const PrefixIndex& index, const std::vector<TokenId>& tokens) {
  MatchQuery mq;
  mq.model = "m";
  auto m = index.MatchTokens(mq, tokens);
  REQUIRE(m.ok());
  for (const auto& im : m->instances) {
    if (im.instance == "A") return im.longest_matched;
  }
  return 0;
}

Result<SnapshotInfo> Load(std::string_view bytes, PrefixIndex* into) {
  SnapshotReader reader("mem.kvsnap", into);
  if (Status st = reader.Feed(bytes); !st.ok()) return st;
  return reader.Finish();
}

TEST_SUITE("snapshot") {
  TEST_CASE("A copy is the state at its point while the writer goes on changing it") {
    constexpr int kBefore = 20000;   // applied before the point (about 15 record segments)
    constexpr int kChanging = 1500;  // applied after the point, before the copy is finished
    constexpr int kDuring = 3000;    // applied while it is finished
    for (uint64_t seed : {1, 2, 3}) {
      CAPTURE(seed);
      PrefixIndex live;
      PrefixIndex at_point;  // receives only the events before the point
      test::ReferenceIndex ref;
      Target lt = Define(live, nullptr);
      Target pt = Define(at_point, &ref);
      Stream stream(seed);
      std::vector<Op> after;
      for (int i = 0; i < kBefore; ++i) {
        const Op op = stream.Next();
        Apply(lt, op);
        Apply(pt, op);
      }
      for (int i = 0; i < kChanging + kDuring; ++i) after.push_back(stream.Next());
      REQUIRE(live.stats().blocks > 4 * kCopySegment);

      // The writer thread takes the point itself (as the subscriber does between two messages),
      // changes the index, then goes on while this thread finishes the copy.
      std::atomic<bool> changed{false};
      std::optional<StateCopy> copy;
      std::thread writer([&] {
        copy.emplace(live.BeginCopy());
        for (int i = 0; i < kChanging; ++i) Apply(lt, after[static_cast<size_t>(i)]);
        changed.store(true);
        for (int i = kChanging; i < kChanging + kDuring; ++i) {
          Apply(lt, after[static_cast<size_t>(i)]);
        }
      });
      while (!changed.load()) std::this_thread::yield();
      const IndexState state = copy->Finish();
      writer.join();
      CHECK(state.writer_copies > 0);  // the changes before Finish() made the writer copy pieces
      CHECK(state.blocks == at_point.stats().blocks);
      CHECK(state.presences == ref.presences());

      const std::string bytes = Snap(state);
      CHECK(bytes == Snap(at_point.CopyState()));
      PrefixIndex loaded;
      auto info = Load(bytes, &loaded);
      REQUIRE_MESSAGE(info.ok(), info.status().ToString());
      CHECK(loaded.stats().blocks == ref.blocks());
      CHECK(loaded.stats().presences == ref.presences());
      // The prompts of the stream answer as the reference model at the point does.
      Stream again(seed);
      MatchQuery mq;
      mq.model = "m";
      for (int i = 0; i < 400; ++i) {
        const Op op = again.Next();
        if (op.tokens.empty()) continue;
        auto m = loaded.MatchTokens(mq, op.tokens);
        REQUIRE(m.ok());
        SameMatch(*m, ref.MatchTokens(op.tokens, "", "", kBs));
      }
      // The live index is untouched by the copy: it equals a single-threaded build of every event.
      PrefixIndex all;
      Target at = Define(all, nullptr);
      Stream replay(seed);
      for (int i = 0; i < kBefore; ++i) Apply(at, replay.Next());
      for (const Op& op : after) Apply(at, op);
      CHECK(Snap(live.CopyState()) == Snap(all.CopyState()));
    }
  }

  TEST_CASE("An engine map of many segments is copied at its point through removals and a grow") {
    // One instance whose engine map spans several of the copy's 65,536-slot segments. After the
    // point the writer changes the map before the copy is finished: removals all over it (each
    // copies only the segments it changes), and a grow (the old slot array goes to the copy, and
    // the segments not copied yet are read from it).
    const auto stored = [](uint64_t first, uint64_t count) {  // blocks first+1 .. first+count
      std::vector<uint64_t> hashes;
      std::vector<TokenId> tokens;
      for (uint64_t b = first; b < first + count; ++b) {
        hashes.push_back(b + 1);
        for (uint32_t t = 0; t < kBs; ++t) tokens.push_back(static_cast<TokenId>(b * kBs + t));
      }
      return test::Batch({test::Stored(hashes, std::nullopt, tokens)});
    };
    // The map's capacities as it grows (16, then x1.5, growing before the insert that would pass
    // a load of 0.8): at the point it holds `at_point` entries, 2 inserts below its next grow.
    size_t cap = 0;
    for (size_t n = 1; cap < 6 * 65536; ++n) {
      if (n * 5 > cap * 4) cap = cap < 16 ? 16 : cap + cap / 2;
    }
    const uint64_t grow_at = cap * 4 / 5 + 1;  // the insert that grows it
    for (const bool removals_first : {true, false}) {
      CAPTURE(removals_first);
      const uint64_t held = removals_first ? 200000 : grow_at - 3;
      PrefixIndex live;
      PrefixIndex at_point;
      const SourceId ls = *live.AddSource(Engine("A"));
      const SourceId ps = *at_point.AddSource(Engine("A"));
      for (uint64_t b = 0; b < held; b += 1000) {
        const EventBatch batch = stored(b, std::min<uint64_t>(1000, held - b));
        REQUIRE(live.Apply(ls, batch).ok());
        REQUIRE(at_point.Apply(ps, batch).ok());
      }
      StateCopy copy = live.BeginCopy();
      if (removals_first) {
        for (uint64_t b = 0; b < held; b += 301) {
          REQUIRE(live.Apply(ls, test::Batch({test::Removed({b + 1})})).ok());
        }
      }
      const uint64_t bytes = live.stats().bytes;
      REQUIRE(live.Apply(ls, stored(held, 150000)).ok());
      // The stores grew the map (by half its slots of 12 bytes at least).
      CHECK(live.stats().bytes >= bytes + cap / 2 * 12);
      const IndexState state = copy.Finish();
      CHECK(state.writer_copies > 0);
      CHECK(state.blocks == at_point.stats().blocks);
      CHECK(Snap(state) == Snap(at_point.CopyState()));
    }
  }

  TEST_CASE("A copy abandoned unfinished lets the writer and the next copy go on") {
    PrefixIndex index;
    Target t = Define(index, nullptr);
    Stream stream(9);
    for (int i = 0; i < 3000; ++i) Apply(t, stream.Next());
    { StateCopy abandoned = index.BeginCopy(); }
    for (int i = 0; i < 500; ++i) Apply(t, stream.Next());
    const IndexState state = index.CopyState();
    CHECK(state.blocks == index.stats().blocks);
    CHECK(state.writer_copies == 0);
  }

  TEST_CASE("A restored index evicts the blocks the original would evict next") {
    IndexOptions options;
    options.max_blocks = 64;
    PrefixIndex original(options);
    Target ot = Define(original, nullptr);
    std::vector<std::vector<TokenId>> prompts;
    for (TokenId p = 0; p < 64; ++p) {
      Op op;
      op.tokens = {p, p + 1000, p + 2000, p + 3000};
      op.hashes = {1000 + uint64_t{p}};
      prompts.push_back(op.tokens);
      Apply(ot, op);
    }
    // The first half is queried: the least recently touched blocks are now the second half.
    for (size_t p = 0; p < 32; ++p) REQUIRE(LongestOfA(original, prompts[p]) == kBs);
    const IndexState state = original.CopyState();
    REQUIRE(state.EvictionOrder().size() == 64);
    const std::string bytes = Snap(state);
    PrefixIndex restored(options);
    REQUIRE(Load(bytes, &restored).ok());
    CHECK(Snap(restored.CopyState()) == bytes);
    Target rt{
        &restored, ot.ids, nullptr, {}};  // the snapshot defined the same sources in the same order
    for (uint64_t q = 0; q < 16; ++q) {
      Op op;
      op.tokens = {static_cast<TokenId>(q + 5000), 1, 2, 3};
      op.hashes = {9000 + q};
      Apply(ot, op);
      Apply(rt, op);
    }
    for (size_t p = 0; p < 64; ++p) {
      CAPTURE(p);
      const uint64_t want = (p < 32 || p >= 48) ? kBs : 0;  // 32..47 went first
      CHECK(LongestOfA(original, prompts[p]) == want);
      CHECK(LongestOfA(restored, prompts[p]) == want);
    }
    // Without max_blocks no order is kept.
    PrefixIndex plain;
    Define(plain, nullptr);
    CHECK(plain.CopyState().EvictionOrder().empty());
  }

  TEST_CASE("Snapshots of format version 1 still load") {
    PrefixIndex index;
    Target t = Define(index, nullptr);
    Stream stream(4);
    for (int i = 0; i < 2000; ++i) Apply(t, stream.Next());
    const std::string v2 = Snap(index.CopyState());
    CHECK(static_cast<uint8_t>(v2[8]) == kSnapshotVersion);
    const std::string v1 = AsVersion1(v2);
    REQUIRE(v1.size() < v2.size());
    PrefixIndex loaded;
    auto info = Load(v1, &loaded);
    REQUIRE_MESSAGE(info.ok(), info.status().ToString());
    CHECK(info->version == 1);
    CHECK(info->presences == index.stats().presences);
    CHECK(Snap(loaded.CopyState()) == v2);  // written again: version 2, the same state
    // An eviction order is version 2 only.
    IndexOptions options;
    options.max_blocks = 100000;
    PrefixIndex evicting(options);
    Target et = Define(evicting, nullptr);
    Stream again(4);
    for (int i = 0; i < 200; ++i) Apply(et, again.Next());
    PrefixIndex refused;
    auto bad = Load(AsVersion1(Snap(evicting.CopyState())), &refused);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find("eviction order in a version 1 snapshot") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace kvindex
