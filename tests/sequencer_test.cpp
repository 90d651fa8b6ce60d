#include "kvindex/ingest/sequencer.h"

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace kvindex {
namespace {

// Records every decision as a short string: "a5" apply seq 5, "R5" re-apply seq 5 (orphan
// replay), "c" clear, "r3" replay from 3, "l3+2" lost seqs 3..4. Items are the seq itself times 10, so a wrong pairing shows.
struct Log {
  std::vector<std::string> out;
  void Apply(uint64_t seq, int&& item) {
    CHECK(item == static_cast<int>(seq) * 10);
    out.push_back("a" + std::to_string(seq));
  }
  void Reapply(uint64_t seq, int&& item) {
    CHECK(item == static_cast<int>(seq) * 10);
    out.push_back("R" + std::to_string(seq));
  }
  void Clear() { out.push_back("c"); }
  void RequestReplay(uint64_t from) { out.push_back("r" + std::to_string(from)); }
  void Lost(uint64_t first, uint64_t count) {
    out.push_back("l" + std::to_string(first) + "+" + std::to_string(count));
  }
  std::string Take() {
    std::string s;
    for (const auto& x : out) s += (s.empty() ? "" : " ") + x;
    out.clear();
    return s;
  }
};

using Seq = SourceSequencer<int>;
std::optional<int> Good(uint64_t seq) { return static_cast<int>(seq) * 10; }

TEST_SUITE("sequencer") {

TEST_CASE("The first batch sets the watermark, and consecutive batches apply in order") {
  Seq s;
  Log log;
  s.OnLive(7, Good(7), log);
  s.OnLive(8, Good(8), log);
  s.OnLive(9, Good(9), log);
  CHECK(log.Take() == "a7 a8 a9");
  CHECK(s.watermark() == 9);
  CHECK(s.counters().gaps == 0);
  CHECK(s.counters().applied == 3);
  CHECK_FALSE(s.waiting());
}

TEST_CASE("A gap holds later batches until the replay fills it") {
  Seq s;
  Log log;
  s.OnLive(0, Good(0), log);
  s.OnLive(3, Good(3), log);  // 1 and 2 missing
  s.OnLive(4, Good(4), log);
  CHECK(log.Take() == "a0 r1");  // one request while the hole is open
  CHECK(s.waiting());
  CHECK(s.held() == 2);
  s.OnReplayed(1, Good(1), log);
  s.OnReplayed(2, Good(2), log);
  CHECK(log.Take() == "a1 a2 a3 a4");
  s.OnReplayed(3, Good(3), log);  // already applied from the held live copy
  s.OnReplayed(4, Good(4), log);
  s.OnReplayEnd(log);
  CHECK(log.Take().empty());
  CHECK(s.counters().gaps == 1);
  CHECK(s.counters().recovered == 2);
  CHECK(s.counters().duplicates == 2);
  CHECK(s.counters().lost == 0);
  CHECK(s.watermark() == 4);
  CHECK_FALSE(s.waiting());
}

TEST_CASE("Batches the publisher no longer holds are lost; giving up applies what is held") {
  Seq s;
  Log log;
  s.OnLive(10, Good(10), log);
  s.OnLive(15, Good(15), log);
  CHECK(log.Take() == "a10 r11");
  // The ring starts at 13: 11 and 12 are gone.
  s.OnReplayed(13, Good(13), log);
  CHECK(log.Take() == "l11+2 a13");
  // The replay times out before 14 arrives.
  s.GiveUp(log);
  CHECK(log.Take() == "l14+1 a15");
  CHECK(s.counters().lost == 3);
  CHECK(s.watermark() == 15);
  s.GiveUp(log);  // idempotent
  CHECK(log.Take().empty());
  s.OnLive(16, Good(16), log);
  CHECK(log.Take() == "a16");
}

TEST_CASE("The end marker gives up on what is still missing") {
  Seq s;
  Log log;
  s.OnLive(0, Good(0), log);
  s.OnLive(2, Good(2), log);
  s.OnReplayEnd(log);  // the publisher sent nothing (past its ring)
  CHECK(log.Take() == "a0 r1 l1+1 a2");
}

TEST_CASE("Duplicates are ignored, including a re-sent batch 1 at the watermark") {
  Seq s;
  Log log;
  s.OnLive(0, Good(0), log);
  s.OnLive(1, Good(1), log);
  s.OnLive(1, Good(1), log);  // a duplicate of the watermark batch, not a restart
  s.OnLive(2, Good(2), log);
  s.OnLive(2, Good(2), log);
  CHECK(log.Take() == "a0 a1 a2");
  CHECK(s.counters().duplicates == 2);
  CHECK(s.counters().restarts == 0);
}

TEST_CASE("Sequence 0 or 1 below the watermark, or far behind, is a publisher restart") {
  Seq s;
  Log log;
  for (uint64_t i = 5; i <= 8; ++i) s.OnLive(i, Good(i), log);
  s.OnLive(0, Good(0), log);
  CHECK(log.Take() == "a5 a6 a7 a8 c a0");
  CHECK(s.counters().restarts == 1);
  s.OnLive(1, Good(1), log);
  CHECK(log.Take() == "a1");
  // Mooncake publishers count from 1.
  for (uint64_t i = 2; i <= 4; ++i) s.OnLive(i, Good(i), log);
  s.OnLive(1, Good(1), log);
  CHECK(log.Take() == "a2 a3 a4 c a1");
  // More than 1,000,000 behind.
  Seq far;
  far.OnLive(3'000'000, Good(3'000'000), log);
  log.Take();
  far.OnLive(1'000'000 - 2, std::nullopt, log);  // malformed restart batch: hole at its seq
  CHECK(far.counters().restarts == 1);
  CHECK(log.Take() == "c r999998");
  // Within the distance it is only a duplicate.
  Seq near;
  near.OnLive(1'000'000, Good(1'000'000), log);
  near.OnLive(500, Good(500), log);
  CHECK(near.counters().duplicates == 1);
  CHECK(near.counters().restarts == 0);
}

TEST_CASE("A restart drops the held batches of the old incarnation") {
  Seq s;
  Log log;
  s.OnLive(10, Good(10), log);
  s.OnLive(12, Good(12), log);
  s.OnLive(0, Good(0), log);
  CHECK(log.Take() == "a10 r11 l11+2 c a0");  // 11 (awaited) and 12 (held) are lost
  CHECK(s.counters().dropped_held == 1);
  CHECK(s.counters().lost == 2);
  CHECK_FALSE(s.waiting());
  s.OnReplayed(11, Good(11), log);  // a late reply from the old incarnation: ignored
  CHECK(log.Take().empty());
  s.OnLive(1, Good(1), log);
  CHECK(log.Take() == "a1");
}

TEST_CASE("A malformed payload is a hole for its sequence; its replayed copy fills it") {
  Seq s;
  Log log;
  s.OnLive(0, Good(0), log);
  s.OnLive(1, std::nullopt, log);
  CHECK(log.Take() == "a0 r1");
  s.OnLive(2, Good(2), log);
  s.OnReplayed(1, Good(1), log);
  CHECK(log.Take() == "a1 a2");
  s.OnReplayEnd(log);
  CHECK(log.Take().empty());
  CHECK(s.counters().malformed == 1);
  CHECK(s.counters().recovered == 1);
  CHECK(s.counters().lost == 0);
  // If the replayed copy is malformed too, giving up loses exactly that sequence.
  s.OnLive(3, std::nullopt, log);
  s.OnReplayed(3, std::nullopt, log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "r3 l3+1");
  CHECK(s.watermark() == 3);
  s.OnLive(4, Good(4), log);
  CHECK(log.Take() == "a4");
}

TEST_CASE("Backfill takes the publisher's ring before the live stream") {
  Seq s;
  Log log;
  s.StartBackfill(log);
  CHECK(log.Take() == "r0");
  s.OnLive(42, Good(42), log);  // live arrives while the ring is replayed: held
  CHECK(log.Take().empty());
  for (uint64_t i = 38; i <= 42; ++i) s.OnReplayed(i, Good(i), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a38 a39 a40 a41 a42");
  CHECK(s.watermark() == 42);
  CHECK(s.counters().lost == 0);
  s.OnLive(43, Good(43), log);
  CHECK(log.Take() == "a43");
}

TEST_CASE("Backfill of an empty ring starts at the first live batch") {
  Seq s;
  Log log;
  s.StartBackfill(log);
  s.OnLive(5, Good(5), log);
  s.OnLive(6, Good(6), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "r0 a5 a6");
  CHECK(s.counters().lost == 0);
}

TEST_CASE("A replay that starts past held live batches applies them, losing only the missing") {
  // Regression: the ring had moved past the hole and the held live batches 5 and 6; they were
  // counted lost and stayed held below the watermark (a later give-up then underflowed).
  Seq s;
  Log log;
  s.OnLive(1, Good(1), log);
  s.OnLive(5, Good(5), log);
  s.OnLive(6, Good(6), log);
  CHECK(log.Take() == "a1 r2");
  s.OnReplayed(8, Good(8), log);  // the ring now starts at 8
  CHECK(log.Take() == "l2+3 a5 a6 l7+1 a8");
  CHECK(s.counters().lost == 4);
  CHECK(s.held() == 0);
  s.OnReplayEnd(log);
  CHECK(log.Take().empty());
  CHECK(s.counters().lost == 4);
}

TEST_CASE("Backfill: live batches held while the ring is replayed are not applied twice") {
  // Regression: live 0, 1 arrived before the ring's reply 0, 1, 2; they stayed held below the
  // watermark and the end of the replay then counted a huge loss.
  Seq s;
  Log log;
  s.StartBackfill(log);
  s.OnLive(0, Good(0), log);
  s.OnLive(1, Good(1), log);
  s.OnLive(3, Good(3), log);
  for (uint64_t i = 0; i <= 2; ++i) s.OnReplayed(i, Good(i), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "r0 a0 a1 a2 a3");
  CHECK(s.counters().lost == 0);
  CHECK(s.counters().duplicates == 2);
  CHECK(s.held() == 0);
  CHECK_FALSE(s.waiting());
}

TEST_CASE("A replay that ends before a later hole asks again instead of losing it") {
  // Regression: the ring was read before batch 6 was dropped; the end marker then counted 6 lost
  // although the publisher still held it.
  Seq s;
  Log log;
  s.OnLive(1, Good(1), log);
  s.OnLive(3, Good(3), log);  // 2 missing
  s.OnReplayed(2, Good(2), log);
  s.OnLive(4, Good(4), log);
  s.OnLive(5, Good(5), log);
  s.OnLive(7, Good(7), log);  // 6 missing; the outstanding replay's ring ended at 5
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a1 r2 a2 a3 a4 a5 r6");
  CHECK(s.counters().lost == 0);
  s.OnReplayed(6, Good(6), log);
  s.OnReplayed(7, Good(7), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a6 a7");
  CHECK(s.counters().lost == 0);
  // A reply that recovers nothing gives up.
  s.OnLive(9, Good(9), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "r8 l8+1 a9");
}

TEST_CASE("A hole revealed only after the request was sent is asked for again, once") {
  // Backfill raced the first live batches: the ring was read when it held batch 0 alone, and live
  // 1..7, 9..11 arrived before its end marker. 8 may be in the ring by now: asked for, not lost.
  Seq s;
  Log log;
  s.StartBackfill(log);
  for (uint64_t i = 0; i <= 11; ++i) {
    if (i != 8) s.OnLive(i, Good(i), log);
  }
  s.OnReplayed(0, Good(0), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "r0 a0 a1 a2 a3 a4 a5 a6 a7 r8");
  CHECK(s.counters().lost == 0);
  s.OnReplayed(8, Good(8), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a8 a9 a10 a11");
  CHECK(s.counters().lost == 0);
  CHECK_FALSE(s.waiting());
  // The same race when the ring no longer holds 8: the second reply settles it.
  Seq t;
  t.StartBackfill(log);
  for (uint64_t i = 0; i <= 11; ++i) {
    if (i != 8) t.OnLive(i, Good(i), log);
  }
  t.OnReplayed(0, Good(0), log);
  t.OnReplayEnd(log);
  t.OnReplayed(9, Good(9), log);
  t.OnReplayEnd(log);
  CHECK(log.Take() == "r0 a0 a1 a2 a3 a4 a5 a6 a7 r8 l8+1 a9 a10 a11");
  CHECK(t.counters().lost == 1);
  // A hole revealed before the request was sent and missing from the reply is lost at once.
  Seq u;
  u.OnLive(0, Good(0), log);
  u.OnLive(2, Good(2), log);
  u.OnReplayEnd(log);
  CHECK(log.Take() == "a0 r1 l1+1 a2");
  // A malformed first batch 0 whose replay never comes is given up on, not asked for forever.
  Seq v;
  v.OnLive(0, std::nullopt, log);
  v.OnReplayEnd(log);
  CHECK(log.Take() == "r0 l0+1");
  CHECK_FALSE(v.waiting());
}

TEST_CASE("Backfill: live batches older than the ring's oldest are applied, not dropped") {
  // Regression (scripts/bench-ingest.sh): the ring was read after the live stream had passed it,
  // so its oldest batch (90) was newer than the live batches held meanwhile (0..91); they were
  // all dropped as duplicates and never counted.
  Seq s;
  Log log;
  s.StartBackfill(log);
  for (uint64_t i = 0; i <= 91; ++i) s.OnLive(i, Good(i), log);
  CHECK(log.Take() == "r0");
  s.OnReplayed(90, Good(90), log);
  s.OnReplayed(91, Good(91), log);
  s.OnReplayEnd(log);
  CHECK(s.counters().applied == 92);
  CHECK(s.counters().lost == 0);
  CHECK(s.counters().duplicates == 2);
  CHECK(s.watermark() == 91);
  CHECK(s.held() == 0);
  CHECK_FALSE(s.waiting());
  log.Take();
  // A hole among them that the ring no longer holds is lost, the rest applied in order.
  Seq t;
  t.StartBackfill(log);
  t.OnLive(0, Good(0), log);
  t.OnLive(2, Good(2), log);
  t.OnReplayed(5, Good(5), log);  // the ring holds only 5: 1, 3, 4 are gone
  t.OnReplayEnd(log);
  CHECK(log.Take() == "r0 a0 l1+1 a2 l3+2 a5");
  CHECK(t.counters().lost == 3);
}

TEST_CASE("A backfill given up on (no reply: timeout) starts at the first held live batch") {
  // GiveUp() before any replay reply must not leave the source backfilling forever, holding every
  // live batch and applying none.
  Seq s;
  Log log;
  s.StartBackfill(log);
  s.OnLive(5, Good(5), log);
  s.OnLive(6, Good(6), log);
  s.OnLive(8, Good(8), log);
  CHECK(log.Take() == "r0");
  s.GiveUp(log);
  CHECK(log.Take() == "a5 a6 r7");  // the hole at 7 is a gap like any other
  CHECK(s.counters().gaps == 1);
  s.GiveUp(log);  // that replay times out too
  CHECK(log.Take() == "l7+1 a8");
  CHECK_FALSE(s.waiting());
  s.OnLive(9, Good(9), log);
  CHECK(log.Take() == "a9");
  // A give-up with nothing held: the next live batch starts the stream.
  Seq t;
  t.StartBackfill(log);
  t.GiveUp(log);
  t.OnLive(3, Good(3), log);
  CHECK(log.Take() == "r0 a3");
}

TEST_CASE("Too many held batches give up on the hole (bounded memory)") {
  SequencerOptions options;
  options.max_held = 3;
  Seq s(options);
  Log log;
  s.OnLive(0, Good(0), log);
  for (uint64_t i = 2; i <= 5; ++i) s.OnLive(i, Good(i), log);
  CHECK(log.Take() == "a0 r1 l1+1 a2 a3 a4 a5");
  CHECK(s.held() == 0);
}

TEST_CASE("An orphan replay re-applies the ring in order while live batches wait behind it") {
  Seq s;
  Log log;
  s.OnLive(5, Good(5), log);
  s.OnLive(6, Good(6), log);
  CHECK(log.Take() == "a5 a6");
  REQUIRE(s.StartOrphanReplay(log));
  CHECK(log.Take() == "r0");  // the whole ring: the missing parent may be anywhere in it
  CHECK_FALSE(s.StartOrphanReplay(log));  // at most one outstanding request per source
  CHECK(s.orphan_replay());
  s.OnLive(7, Good(7), log);  // held, not a gap: nothing is missing
  CHECK(log.Take().empty());
  CHECK(s.held() == 1);
  for (uint64_t seq = 3; seq <= 8; ++seq) s.OnReplayed(seq, Good(seq), log);
  // 3..6 applied again in ring order; 7 from the ring (superseding the held live copy); 8 is new.
  CHECK(log.Take() == "R3 R4 R5 R6 a7 a8");
  s.OnReplayEnd(log);
  CHECK(log.Take().empty());
  s.OnLive(8, Good(8), log);  // arrives live after the ring gave it
  s.OnLive(9, Good(9), log);
  CHECK(log.Take() == "a9");
  CHECK(s.counters().orphan_replays == 1);
  CHECK(s.counters().replay_requests == 1);
  CHECK(s.counters().reapplied == 4);
  CHECK(s.counters().gaps == 0);
  CHECK(s.counters().recovered == 0);
  CHECK(s.counters().lost == 0);
  CHECK(s.counters().duplicates == 1);
  CHECK_FALSE(s.orphan_replay());
  CHECK_FALSE(s.waiting());
}

TEST_CASE("An orphan replay applies again only what was applied before it was asked for") {
  Seq s;
  Log log;
  s.OnLive(5, Good(5), log);
  REQUIRE(s.StartOrphanReplay(log));
  s.OnLive(6, Good(6), log);
  s.OnLive(7, Good(7), log);
  s.OnReplayed(5, Good(5), log);
  s.OnReplayed(6, Good(6), log);  // from the ring; the held 7 follows at once
  s.OnReplayed(7, Good(7), log);  // applied during this replay: a duplicate, not applied again
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a5 r0 R5 a6 a7");
  CHECK(s.counters().reapplied == 1);
  CHECK(s.counters().duplicates == 1);
}

TEST_CASE("No orphan replay before the first batch, during backfill, or while a gap is replayed") {
  Seq fresh;
  Log log;
  CHECK_FALSE(fresh.StartOrphanReplay(log));
  Seq backfill;
  backfill.StartBackfill(log);
  CHECK(log.Take() == "r0");
  CHECK_FALSE(backfill.StartOrphanReplay(log));
  Seq gap;
  gap.OnLive(0, Good(0), log);
  gap.OnLive(2, Good(2), log);
  CHECK(log.Take() == "a0 r1");
  CHECK_FALSE(gap.StartOrphanReplay(log));
  CHECK(log.Take().empty());
  CHECK(gap.counters().orphan_replays == 0);
}

TEST_CASE("A hole among the batches held behind an orphan replay is asked for when it ends") {
  Seq s;
  Log log;
  s.OnLive(0, Good(0), log);
  REQUIRE(s.StartOrphanReplay(log));
  s.OnLive(1, Good(1), log);
  s.OnLive(3, Good(3), log);  // 2 missing: a gap, but the orphan replay is the outstanding request
  CHECK(log.Take() == "a0 r0");
  CHECK(s.counters().gaps == 1);
  s.OnReplayed(0, Good(0), log);  // the ring was read before 1 was published
  s.OnReplayEnd(log);
  CHECK(log.Take() == "R0 a1 r2");
  s.OnReplayed(2, Good(2), log);
  s.OnReplayed(3, Good(3), log);
  s.OnReplayEnd(log);
  CHECK(log.Take() == "a2 a3");
  CHECK(s.counters().recovered == 1);
  CHECK(s.counters().lost == 0);
  CHECK_FALSE(s.waiting());
}

TEST_CASE("An orphan replay given up on (timeout) applies the held live batches") {
  Seq s;
  Log log;
  s.OnLive(4, Good(4), log);
  REQUIRE(s.StartOrphanReplay(log));
  s.OnLive(5, Good(5), log);
  s.OnLive(6, Good(6), log);
  CHECK(log.Take() == "a4 r0");
  s.GiveUp(log);
  CHECK(log.Take() == "a5 a6");
  CHECK(s.counters().lost == 0);
  s.OnReplayed(4, Good(4), log);  // a late reply to the abandoned request
  CHECK(log.Take().empty());
  CHECK_FALSE(s.waiting());
}

TEST_CASE("The same calls give the same decisions (offline replay equals live)") {
  auto run = [](Log& log) {
    Seq s;
    s.OnLive(0, Good(0), log);
    s.OnLive(2, Good(2), log);
    s.OnLive(2, Good(2), log);
    s.OnReplayed(1, Good(1), log);
    s.OnLive(5, std::nullopt, log);
    s.OnLive(6, Good(6), log);
    s.GiveUp(log);
    s.OnLive(0, Good(0), log);
    return s.counters();
  };
  Log a, b;
  const SequencerCounters ca = run(a);
  const SequencerCounters cb = run(b);
  CHECK(a.Take() == b.Take());
  CHECK(ca.lost == cb.lost);
  CHECK(ca.lost == 3);  // 3, 4 and the malformed 5
  CHECK(ca.restarts == 1);
}

TEST_CASE("Random drops, duplicates and corruption with a replay ring: nothing applied twice or lost") {
  // A publisher sends 0..N-1 through a lossy channel and answers replay requests from a ring of
  // the last `ring` batches (replayed copies are intact). With a ring holding everything, every
  // batch up to the last one delivered is applied exactly once, in order; with a small ring the
  // batches that left it are counted lost instead — applied + lost covers every sequence once.
  for (const uint64_t ring : {uint64_t{1000}, uint64_t{1}}) {
    uint64_t total_lost = 0;
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      CAPTURE(seed);
      CAPTURE(ring);
      uint64_t state = seed * 0x9E3779B97F4A7C15ull;
      auto next = [&] {  // splitmix64
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
      };
      struct Sink {
        std::vector<uint64_t> applied;
        std::vector<uint64_t> lost;
        std::optional<uint64_t> request;
        void Apply(uint64_t seq, int&&) { applied.push_back(seq); }
        void Reapply(uint64_t, int&&) { FAIL("no orphan replay expected"); }
        void Clear() { FAIL("no restart expected"); }
        void RequestReplay(uint64_t from) { request = from; }
        void Lost(uint64_t first, uint64_t count) {
          for (uint64_t i = 0; i < count; ++i) lost.push_back(first + i);
        }
      } sink;
      Seq s;
      const uint64_t n = 300;
      uint64_t last_delivered = 0;
      for (uint64_t seq = 0; seq < n; ++seq) {
        const uint64_t roll = next() % 100;
        if (roll < 10 && seq != 0) continue;  // dropped live (seq 0 always arrives)
        last_delivered = seq;
        s.OnLive(seq, roll < 15 && seq != 0 ? std::nullopt : Good(seq), sink);
        if (roll >= 95) s.OnLive(seq, Good(seq), sink);  // duplicated
        while (sink.request) {
          const uint64_t from = *sink.request;
          sink.request.reset();
          const uint64_t oldest = seq + 1 > ring ? seq + 1 - ring : 0;
          for (uint64_t r = std::max(from, oldest); r <= seq; ++r) s.OnReplayed(r, Good(r), sink);
          s.OnReplayEnd(sink);
        }
      }
      std::vector<uint64_t> all = sink.applied;
      all.insert(all.end(), sink.lost.begin(), sink.lost.end());
      std::sort(all.begin(), all.end());
      REQUIRE(all.size() == last_delivered + 1);
      for (uint64_t i = 0; i <= last_delivered; ++i) REQUIRE(all[i] == i);
      CHECK(std::is_sorted(sink.applied.begin(), sink.applied.end()));
      if (ring >= n) CHECK(sink.lost.empty());
      CHECK(s.counters().lost == sink.lost.size());
      CHECK(s.counters().applied == sink.applied.size());
      total_lost += sink.lost.size();
    }
    if (ring == 1) CHECK(total_lost > 0);  // the small ring really loses batches
  }
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
