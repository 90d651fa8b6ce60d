// The sequencer's defences against what no publisher sends (docs/sequence-rules.md): a corrupt
// sequence jump, a batch at an old sequence told apart by its content (duplicate or restart), and
// a stream joined late. Expected decisions are written by hand from the documented rules.
#include <string>
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

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
