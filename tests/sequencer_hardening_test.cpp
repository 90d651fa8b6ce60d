// The sequencer's defences against what no publisher sends (docs/sequence-rules.md): a corrupt
// sequence jump, a batch at an old sequence told apart by its content (duplicate or restart), and
// a stream joined late. Expected decisions are written by hand from the documented rules.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/ingest/sequencer.h"

namespace kvindex {
namespace {

// "a5" apply seq 5, "c" clear, "r3" replay from 3, "l3+2" lost 3..4 (as in sequencer_test.cpp).
struct Log {
  std::vector<std::string> out;
  void Apply(uint64_t seq, int&&) { out.push_back("a" + std::to_string(seq)); }
  void Reapply(uint64_t seq, int&&) { out.push_back("R" + std::to_string(seq)); }
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
constexpr uint64_t kTwo63 = uint64_t{1} << 63;

TEST_SUITE("sequencer hardening") {
  TEST_CASE("A sequence jump of 2^63 after 1000 is a corrupt frame: not applied, no restart") {
    Seq s;
    Log log;
    for (uint64_t seq = 990; seq <= 1000; ++seq) s.OnLive(seq, 1, log, 100 + seq);
    log.Take();
    s.OnLive(kTwo63, 1, log, 7);
    CHECK(log.Take().empty());  // nothing applied, held or requested
    CHECK(s.counters().corrupt_seqs == 1);
    CHECK(s.watermark() == 1000);
    CHECK_FALSE(s.waiting());
    // The next normal frames follow on: no restart, no gap, no loss.
    s.OnLive(1001, 1, log, 1101);
    s.OnLive(1002, 1, log, 1102);
    CHECK(log.Take() == "a1001 a1002");
    CHECK(s.counters().restarts == 0);
    CHECK(s.counters().gaps == 0);
    CHECK(s.counters().lost == 0);
    CHECK(s.counters().received == 14);
    CHECK(s.counters().applied == 13);
  }

  TEST_CASE("The corrupt-jump bound: 2^32 past the next expected is a gap, one more is corrupt") {
    Seq s;
    Log log;
    s.OnLive(10, 1, log);
    log.Take();
    // Next expected is 11: 11 + 2^32 + 1 jumps 2^32 + 1 past it.
    s.OnLive(11 + (uint64_t{1} << 32) + 1, 1, log);
    CHECK(log.Take().empty());
    CHECK(s.counters().corrupt_seqs == 1);
    s.OnLive(11 + (uint64_t{1} << 32), 1, log);  // exactly the bound: a (huge) gap
    CHECK(log.Take() == "r11");
    CHECK(s.counters().gaps == 1);
    CHECK(s.counters().corrupt_seqs == 1);
  }

  TEST_CASE("A corrupt frame whose payload does not decode either opens no hole") {
    Seq s;
    Log log;
    s.OnLive(0, 1, log);
    s.OnLive(kTwo63 + 5, std::nullopt, log);
    CHECK(log.Take() == "a0");
    CHECK(s.counters().corrupt_seqs == 1);
    CHECK(s.counters().malformed == 0);
    CHECK_FALSE(s.waiting());
    s.GiveUp(log);  // nothing is missing: a no-op, no 2^63 batches lost
    CHECK(s.counters().lost == 0);
  }

  TEST_CASE("A replayed batch with a corrupt sequence is refused too") {
    Seq s;
    Log log;
    s.OnLive(0, 1, log);
    s.OnLive(3, 1, log);
    CHECK(log.Take() == "a0 r1");
    s.OnReplayed(kTwo63, 1, log);
    CHECK(log.Take().empty());
    CHECK(s.counters().corrupt_seqs == 1);
    s.OnReplayed(1, 1, log);
    s.OnReplayed(2, 1, log);
    CHECK(log.Take() == "a1 a2 a3");
  }

  TEST_CASE("The same bytes at an old sequence are a duplicate, whatever the timing") {
    Seq s;
    Log log;
    s.OnLive(0, 1, log, 500);
    s.OnLive(1, 1, log, 501);
    for (uint64_t seq = 2; seq <= 40; ++seq) s.OnLive(seq, 1, log, 500 + seq);
    log.Take();
    // Batch 1 arrives again long after: by the sequence alone a restart (seq 1 below the
    // watermark); its bytes are those applied, so it is a duplicate.
    s.OnLive(1, 1, log, 501);
    s.OnLive(0, 1, log, 500);
    // A recent batch arriving again with the same bytes.
    s.OnLive(35, 1, log, 535);
    CHECK(log.Take().empty());
    CHECK(s.counters().restarts == 0);
    CHECK(s.counters().duplicates == 3);
    CHECK(s.watermark() == 40);
  }

  TEST_CASE("Different bytes at the watermark's sequence are a restart") {
    Seq s;
    Log log;
    // The Mooncake store publisher counts from 1: a restart after one batch shows batch 1 again.
    s.OnLive(1, 1, log, 11);
    s.OnLive(1, 1, log, 11);  // the same bytes: a re-sent copy
    CHECK(log.Take() == "a1");
    CHECK(s.counters().duplicates == 1);
    s.OnLive(1, 1, log, 12);  // new bytes: a new incarnation
    CHECK(log.Take() == "c a1");
    CHECK(s.counters().restarts == 1);
    // The new incarnation's hashes replace the old ones.
    s.OnLive(1, 1, log, 12);
    s.OnLive(1, 1, log, 11);
    CHECK(log.Take() == "c a1");
    CHECK(s.counters().duplicates == 2);
    CHECK(s.counters().restarts == 2);
  }

  TEST_CASE(
      "Different bytes at a recent old sequence are a restart; unknown old ones keep the rules") {
    Seq s;
    Log log;
    for (uint64_t seq = 0; seq <= 100; ++seq) s.OnLive(seq, 1, log, 1000 + seq);
    log.Take();
    s.OnLive(95, 1, log, 7);  // among the last 16 applied, other bytes
    CHECK(log.Take() == "c a95");
    CHECK(s.counters().restarts == 1);
    for (uint64_t seq = 96; seq <= 200; ++seq) s.OnLive(seq, 1, log, 2000 + seq);
    log.Take();
    // 150 is no longer kept: the sequence rules decide (a duplicate), whatever its bytes.
    s.OnLive(150, 1, log, 9);
    // Without a hash (0) the content rule is not used: seq 200 is the watermark, a duplicate.
    s.OnLive(200, 1, log, 0);
    // A payload that does not decode is never judged by its bytes.
    s.OnLive(199, std::nullopt, log, 5);
    CHECK(log.Take().empty());
    CHECK(s.counters().restarts == 1);
    CHECK(s.counters().duplicates == 3);
  }

  TEST_CASE("A stream first seen past the first sequence is a late join") {
    Log log;
    SUBCASE("vLLM counts from 0: first seen at 1000, 1000 batches unknown") {
      Seq s;
      s.OnLive(1000, 1, log);
      CHECK(s.counters().late_joins == 1);
      CHECK(s.counters().late_join_batches == 1000);
      CHECK(log.Take() == "a1000");
    }
    SUBCASE("from the first sequence: no late join") {
      Seq s;
      s.OnLive(0, 1, log);
      SequencerOptions mooncake;
      mooncake.first_seq = 1;
      Seq m(mooncake);
      m.OnLive(1, 1, log);
      CHECK(s.counters().late_joins == 0);
      CHECK(m.counters().late_joins == 0);
    }
    SUBCASE("a replay endpoint fills it: not counted") {
      SequencerOptions with_replay;
      with_replay.count_late_join = false;
      Seq s(with_replay);
      s.OnLive(1000, 1, log);
      CHECK(s.counters().late_joins == 0);
      CHECK(s.counters().late_join_batches == 0);
    }
    SUBCASE("a restart first seen past the first sequence is a late join of the new incarnation") {
      Seq s;
      s.OnLive(0, 1, log);
      for (uint64_t seq = 1; seq <= 3'000'000; seq += 1'000) s.OnLive(seq, std::nullopt, log);
      s.GiveUp(log);
      log.Take();
      s.OnLive(5, 1, log);  // more than 1,000,000 below the watermark: a restart, 0..4 unknown
      CHECK(log.Take() == "c a5");
      CHECK(s.counters().late_joins == 1);
      CHECK(s.counters().late_join_batches == 5);
    }
  }

  TEST_CASE("A restart while a malformed copy awaits its replay loses the awaited and held seqs") {
    Seq s;
    Log log;
    for (uint64_t seq = 0; seq <= 4; ++seq) s.OnLive(seq, 1, log, 100 + seq);
    s.OnLive(5, std::nullopt, log, 105);  // a damaged live copy: its replay is asked for
    s.OnLive(6, 1, log, 106);             // held behind it
    s.OnLive(7, 1, log, 107);
    CHECK(log.Take() == "a0 a1 a2 a3 a4 r5");
    s.OnLive(0, 1, log, 900);  // the publisher restarted before the replay came
    CHECK(log.Take() == "l5+3 c a0");
    CHECK(s.counters().lost == 3);
    CHECK(s.counters().dropped_held == 2);
    CHECK(s.counters().restarts == 1);
    // 8 sequences of the old run and 1 of the new: each applied or lost.
    CHECK(s.counters().applied + s.counters().lost == 9);
    CHECK_FALSE(s.waiting());
    s.OnReplayed(5, 1, log, 105);  // the old run's late reply: ignored
    s.OnLive(1, 1, log, 901);
    CHECK(log.Take() == "a1");
  }

  TEST_CASE("A restart to seq 1 (the store publisher) with nothing but a hole pending loses it") {
    SequencerOptions mooncake;
    mooncake.first_seq = 1;
    Seq s(mooncake);
    Log log;
    s.OnLive(1, 1, log, 11);
    s.OnLive(2, 1, log, 12);
    s.OnLive(3, std::nullopt, log, 13);
    CHECK(log.Take() == "a1 a2 r3");
    s.OnLive(1, 1, log, 21);  // different bytes at seq 1: a restart
    CHECK(log.Take() == "l3+1 c a1");
    CHECK(s.counters().lost == 1);
    CHECK(s.counters().applied + s.counters().lost == 4);
  }

  TEST_CASE(
      "Invariant: with drops, damage, a small ring, slow replays and restarts, every "
      "published sequence is applied or lost exactly once") {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      CAPTURE(seed);
      uint64_t state = seed * 0x9E3779B97F4A7C15ull;
      auto next = [&] {  // splitmix64
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
      };
      // Items are run * 1000 + seq; the sink attributes losses to the run current at the call.
      struct Sink {
        uint64_t run = 0;
        std::vector<uint64_t> applied;
        std::vector<uint64_t> lost;
        std::optional<uint64_t> request;
        void Apply(uint64_t, int&& item) { applied.push_back(static_cast<uint64_t>(item)); }
        void Reapply(uint64_t, int&&) { FAIL("no orphan replay expected"); }
        void Clear() { ++run; }
        void RequestReplay(uint64_t from) { request = from; }
        void Lost(uint64_t first, uint64_t count) {
          for (uint64_t i = 0; i < count; ++i) lost.push_back(run * 1000 + first + i);
        }
      } sink;
      Seq s;
      const uint64_t ring = 1 + next() % 4;
      std::set<uint64_t> published;
      const uint64_t runs = 1 + next() % 5;
      for (uint64_t run = 0; run < runs; ++run) {
        const uint64_t length = 1 + next() % 60;
        auto item = [run](uint64_t seq) { return static_cast<int>(run * 1000 + seq); };
        auto hash = [run](uint64_t seq) { return run * 1'000'000 + seq + 1; };
        sink.request.reset();  // a restarted publisher answers nothing of the old run
        for (uint64_t seq = 0; seq < length; ++seq) {
          published.insert(run * 1000 + seq);
          const uint64_t roll = next() % 100;
          const bool edge = seq == 0 || seq + 1 == length;  // always arrive intact
          if (roll < 10 && !edge) continue;                 // dropped live
          const bool damaged = roll < 20 && !edge;
          s.OnLive(seq, damaged ? std::nullopt : std::optional<int>(item(seq)), sink, hash(seq));
          // The ring answers at once, late (after the next batch), or not before a restart.
          if (sink.request && next() % 3 == 0) {
            const uint64_t from = *sink.request;
            sink.request.reset();
            const uint64_t oldest = seq + 1 > ring ? seq + 1 - ring : 0;
            for (uint64_t r = std::max(from, oldest); r <= seq; ++r) {
              s.OnReplayed(r, item(r), sink, hash(r));
            }
            s.OnReplayEnd(sink);
          }
        }
      }
      s.GiveUp(sink);  // the end: whatever is still missing is lost
      std::vector<uint64_t> all = sink.applied;
      all.insert(all.end(), sink.lost.begin(), sink.lost.end());
      std::sort(all.begin(), all.end());
      CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // none twice
      CHECK(std::set<uint64_t>(all.begin(), all.end()) == published);
      CHECK(s.counters().applied == sink.applied.size());
      CHECK(s.counters().lost == sink.lost.size());
      CHECK(s.counters().applied + s.counters().lost == published.size());
      CHECK(s.counters().restarts == runs - 1);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
