// The trust states (docs/http-api.md "Trust states"): SourceTrust's transitions and reasons, the
// per-instance fold, and the Ingestor's reasons from real encoded messages (a gap given up on, a
// payload that never decoded, a late join, orphans, a damaged capture stretch, a restart, an
// AllBlocksCleared). Expected values are written by hand from the documented rules.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/ingest/source_trust.h"
#include "kvindex/query/query_json.h"

namespace kvindex {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST_SUITE("source trust") {
  TEST_CASE("A new source is exact, by start; degrading keeps the first reason and sums losses") {
    SourceTrust t;
    CHECK(t.state() == TrustState::kExact);
    CHECK(t.reason() == TrustReason::kStart);
    t.Degrade(TrustReason::kLost, 3, 10 * kSecond);
    CHECK(t.state() == TrustState::kDegraded);
    CHECK(t.reason() == TrustReason::kLost);
    CHECK(t.lost_batches() == 3);
    CHECK(t.since_ns() == 10 * kSecond);
    t.Degrade(TrustReason::kMalformed, 2, 20 * kSecond);
    CHECK(t.reason() == TrustReason::kLost);  // the episode's first reason
    CHECK(t.lost_batches() == 5);
    CHECK(t.since_ns() == 10 * kSecond);
    CHECK(t.last_loss_ns() == 20 * kSecond);
    CHECK(t.transitions(TrustReason::kLost) == 1);
    CHECK(t.transitions(TrustReason::kMalformed) == 0);  // no transition: already degraded
  }

  TEST_CASE("A clear or a restart returns a degraded source to exact and ends the episode") {
    for (const TrustReason reset : {TrustReason::kCleared, TrustReason::kRestart}) {
      SourceTrust t;
      t.Degrade(TrustReason::kLateJoin, 7, kSecond);
      t.Reset(reset);
      CHECK(t.state() == TrustState::kExact);
      CHECK(t.reason() == reset);
      CHECK(t.lost_batches() == 0);
      CHECK(t.since_ns() == 0);
      CHECK(t.transitions(reset) == 1);
      // A new episode starts afresh.
      t.Degrade(TrustReason::kOrphans, 0, 5 * kSecond);
      CHECK(t.reason() == TrustReason::kOrphans);
      CHECK(t.lost_batches() == 0);
      CHECK(t.since_ns() == 5 * kSecond);
      CHECK(t.last_loss_ns() == 0);  // orphans lose no batch
    }
    SourceTrust exact;
    exact.Reset(TrustReason::kCleared);  // exact stays exact: no transition
    CHECK(exact.transitions(TrustReason::kCleared) == 0);
  }

  TEST_CASE("Silence makes a source stale; a message makes it what it was") {
    SourceTrust t;
    t.CheckSilence(100 * kSecond, 30 * kSecond);  // never armed: silence counts from here
    CHECK(t.state() == TrustState::kExact);
    t.CheckSilence(129 * kSecond, 30 * kSecond);
    CHECK(t.state() == TrustState::kExact);
    t.CheckSilence(130 * kSecond, 30 * kSecond);
    CHECK(t.state() == TrustState::kStale);
    CHECK(t.reason() == TrustReason::kSilent);
    CHECK(t.transitions(TrustReason::kSilent) == 1);
    t.Heard(131 * kSecond);
    CHECK(t.state() == TrustState::kExact);
    CHECK(t.reason() == TrustReason::kStart);
    CHECK(t.transitions(TrustReason::kHeard) == 1);
    // 0 = never stale.
    t.CheckSilence(1000 * kSecond, 0);
    CHECK(t.state() == TrustState::kExact);
    // Armed later than heard: silence counts from the arming.
    t.ArmSilence(500 * kSecond);
    t.CheckSilence(520 * kSecond, 30 * kSecond);
    CHECK(t.state() == TrustState::kExact);
  }

  TEST_CASE("Degraded wins over stale, and silence while degraded is no transition") {
    SourceTrust t;
    t.Heard(kSecond);
    t.Degrade(TrustReason::kLost, 1, 2 * kSecond);
    t.CheckSilence(100 * kSecond, 10 * kSecond);
    CHECK(t.stale());
    CHECK(t.state() == TrustState::kDegraded);
    CHECK(t.transitions(TrustReason::kSilent) == 0);
    t.Heard(101 * kSecond);
    CHECK(t.transitions(TrustReason::kHeard) == 0);
    CHECK(t.state() == TrustState::kDegraded);
    // Stale, then degraded: a transition to degraded.
    SourceTrust s;
    s.Heard(kSecond);
    s.CheckSilence(100 * kSecond, 10 * kSecond);
    s.Degrade(TrustReason::kDamaged, 4, 100 * kSecond);
    CHECK(s.state() == TrustState::kDegraded);
    CHECK(s.transitions(TrustReason::kDamaged) == 1);
  }

  TEST_CASE("Save and Restore carry the exact flag, lost batches, times and reason") {
    SourceTrust t;
    t.Degrade(TrustReason::kMalformed, 9, 42 * kSecond);
    const TrustSnapshot saved = t.Save();
    CHECK_FALSE(saved.exact);
    CHECK(saved.lost_batches == 9);
    CHECK(saved.since_ns == 42 * kSecond);
    CHECK(saved.last_loss_ns == 42 * kSecond);
    CHECK(saved.reason == TrustReason::kMalformed);
    SourceTrust restored;
    restored.Restore(saved);
    CHECK(restored.state() == TrustState::kDegraded);
    CHECK(restored.reason() == TrustReason::kMalformed);
    CHECK(restored.lost_batches() == 9);
    CHECK(restored.since_ns() == 42 * kSecond);
    SourceTrust exact;
    exact.Restore(SourceTrust{}.Save());
    CHECK(exact.state() == TrustState::kExact);
  }

  TEST_CASE("An instance is degraded if any source is, stale only if all are") {
    SourceTrust exact, stale, stale2, degraded_a, degraded_b;
    stale.CheckSilence(kSecond, 1);
    stale.CheckSilence(3 * kSecond, 1);
    stale2 = stale;
    degraded_a.Degrade(TrustReason::kLost, 2, 50 * kSecond);
    degraded_b.Degrade(TrustReason::kLateJoin, 5, 40 * kSecond);
    auto fold = [](std::vector<const SourceTrust*> sources) {
      InstanceTrust out;
      for (size_t i = 0; i < sources.size(); ++i) AddSourceTrust(out, *sources[i], i == 0);
      return out;
    };
    CHECK(fold({&exact}).state == TrustState::kExact);
    CHECK(fold({&stale, &stale2}).state == TrustState::kStale);
    CHECK(fold({&stale, &exact}).state == TrustState::kExact);
    CHECK(fold({&exact, &stale}).state == TrustState::kExact);
    const InstanceTrust both = fold({&exact, &degraded_a, &stale, &degraded_b});
    CHECK(both.state == TrustState::kDegraded);
    CHECK(both.lost_batches == 7);
    CHECK(both.since_ns == 40 * kSecond);  // the earliest
    CHECK(fold({&degraded_a, &stale}).state == TrustState::kDegraded);
  }

  TEST_CASE("Names and RFC 3339 times") {
    CHECK(TrustStateName(TrustState::kStale) == "stale");
    CHECK(TrustReasonName(TrustReason::kLateJoin) == "late_join");
    CHECK(TrustReasonName(TrustReason::kHeard) == "heard");
    CHECK(Rfc3339Utc(0) == "1970-01-01T00:00:00Z");
    // 1,700,000,000 s = 19675 days + 80,000 s: 2023-11-14 22:13:20 UTC.
    CHECK(Rfc3339Utc(1'700'000'000 * kSecond + 999'999'999) == "2023-11-14T22:13:20Z");
  }
}

// An Ingestor over a real index, fed encoded vLLM messages.
struct World {
  PrefixIndex index;
  Ingestor ingestor{&index};
  SourceId id;
  explicit World(std::string replay_endpoint = "") {
    SourceConfig config;
    config.name = "a";
    config.format = "vllm";
    config.model = "m";
    config.block_size = 4;
    config.endpoint = "tcp://127.0.0.1:1";
    config.replay_endpoint = std::move(replay_endpoint);
    auto added = ingestor.AddSource(config);
    REQUIRE(added.ok());
    id = *added;
  }
  // Batch `seq` stores block seq+1 (child of block seq unless `root`), or clears everything.
  void Send(uint64_t seq, int64_t ns, bool root = false, bool clear = false) {
    EventBatch batch;
    batch.ts = static_cast<double>(ns) / kSecond;  // distinct bytes per send (content rule)
    if (clear) {
      batch.events.push_back(AllCleared{});
    } else {
      BlockStored stored;
      stored.block_hashes = {EngineHash{1000 + seq + 1}};
      if (!root) stored.parent = EngineHash{1000 + seq};
      stored.token_ids = {1, 2, 3, static_cast<TokenId>(seq)};
      stored.scope.block_size = 4;
      batch.events.push_back(stored);
    }
    std::vector<std::byte> payload;
    REQUIRE(EncodeEventBatch(batch, WireFormat::kVllm, payload).ok());
    ingestor.OnMessage(id, BuildEventMessage({}, seq, payload), ns);
  }
  void SendMalformed(uint64_t seq, int64_t ns) {
    const std::vector<std::byte> payload = {std::byte{0xc1}};  // a byte msgpack never uses
    ingestor.OnMessage(id, BuildEventMessage({}, seq, payload), ns);
  }
  const SourceTrust& trust() const { return ingestor.counters(id).trust; }
};

TEST_SUITE("source trust: ingest reasons") {
  TEST_CASE("A gap given up on degrades the source: lost, with the lost count and the time") {
    World w;
    w.Send(0, kSecond, /*root=*/true);
    w.Send(1, 2 * kSecond);
    w.Send(4, 3 * kSecond);                          // 2 and 3 missing
    CHECK(w.trust().state() == TrustState::kExact);  // a replay may still fill it
    w.ingestor.GiveUp(w.id, 5 * kSecond);
    CHECK(w.trust().state() == TrustState::kDegraded);
    CHECK(w.trust().reason() == TrustReason::kLost);
    CHECK(w.trust().lost_batches() == 2);
    CHECK(w.trust().since_ns() == 5 * kSecond);
    CHECK(w.ingestor.counters(w.id).sequence.lost == 2);
  }

  TEST_CASE("A payload that never decoded degrades as malformed") {
    World w;
    w.Send(0, kSecond, true);
    w.SendMalformed(1, 2 * kSecond);
    w.Send(2, 3 * kSecond);
    w.ingestor.GiveUp(w.id);  // dated by the latest message
    CHECK(w.trust().reason() == TrustReason::kMalformed);
    CHECK(w.trust().lost_batches() == 1);
    CHECK(w.trust().since_ns() == 3 * kSecond);
  }

  TEST_CASE("A late join without a replay endpoint degrades by the unknown batches") {
    World w;
    w.Send(10, kSecond, true);
    CHECK(w.trust().state() == TrustState::kDegraded);
    CHECK(w.trust().reason() == TrustReason::kLateJoin);
    CHECK(w.trust().lost_batches() == 10);
    // With a replay endpoint the backfill can fill what came before: no late join.
    World r("tcp://127.0.0.1:2");
    r.Send(10, kSecond, true);
    CHECK(r.trust().state() == TrustState::kExact);
  }

  TEST_CASE("Orphans nothing can fill degrade the source; with a replay endpoint they do not") {
    World w;
    w.Send(0, kSecond);  // seq 0 whose parent (block 1000) was never stored
    CHECK(w.ingestor.counters(w.id).index.orphans == 1);
    CHECK(w.trust().reason() == TrustReason::kOrphans);
    CHECK(w.trust().lost_batches() == 0);
    World r("tcp://127.0.0.1:2");
    r.Send(0, kSecond);
    CHECK(r.trust().state() == TrustState::kExact);
  }

  TEST_CASE("AllBlocksCleared and a publisher restart return the source to exact") {
    World w;
    w.Send(0, kSecond, true);
    w.Send(3, 2 * kSecond);
    w.ingestor.GiveUp(w.id, 3 * kSecond);
    REQUIRE(w.trust().state() == TrustState::kDegraded);
    w.Send(4, 4 * kSecond, false, /*clear=*/true);
    CHECK(w.trust().state() == TrustState::kExact);
    CHECK(w.trust().reason() == TrustReason::kCleared);
    w.Send(6, 5 * kSecond, true);
    w.ingestor.GiveUp(w.id, 6 * kSecond);
    REQUIRE(w.trust().state() == TrustState::kDegraded);
    w.Send(0, 7 * kSecond, true);  // restart
    CHECK(w.ingestor.counters(w.id).sequence.restarts == 1);
    CHECK(w.trust().state() == TrustState::kExact);
    CHECK(w.trust().reason() == TrustReason::kRestart);
    CHECK(w.trust().transitions(TrustReason::kLost) == 2);
    CHECK(w.trust().transitions(TrustReason::kCleared) == 1);
    CHECK(w.trust().transitions(TrustReason::kRestart) == 1);
  }

  TEST_CASE("A restart while a batch awaits its replay: the old run's loss leaves it exact") {
    World w("tcp://127.0.0.1:2");
    w.Send(0, kSecond, true);
    w.SendMalformed(1, 2 * kSecond);  // awaits its replay
    w.Send(2, 3 * kSecond);           // held
    w.Send(0, 4 * kSecond, true);     // the publisher restarted
    CHECK(w.ingestor.counters(w.id).sequence.lost == 2);  // 1 and 2
    CHECK(w.trust().state() == TrustState::kExact);
    CHECK(w.trust().transitions(TrustReason::kMalformed) == 0);
    CHECK(w.trust().transitions(TrustReason::kLost) == 0);
  }

  TEST_CASE("Batches lost to a damaged capture stretch degrade as damaged") {
    World w;
    w.Send(0, kSecond, true);
    const std::vector<std::byte> payload = [] {
      EventBatch batch;
      BlockStored stored;
      stored.block_hashes = {EngineHash{7}};
      stored.token_ids = {9, 9, 9, 9};
      stored.scope.block_size = 4;
      batch.events.push_back(stored);
      std::vector<std::byte> out;
      REQUIRE(EncodeEventBatch(batch, WireFormat::kVllm, out).ok());
      return out;
    }();
    const std::vector<Frame> frames = BuildEventMessage({}, 5, payload);
    std::vector<FrameView> views(frames.begin(), frames.end());
    const auto lost = w.ingestor.OnMessageAfterDamage(w.id, views, 9 * kSecond);
    CHECK(lost.second == 4);
    CHECK(w.trust().reason() == TrustReason::kDamaged);
    CHECK(w.trust().lost_batches() == 4);
    CHECK(w.trust().since_ns() == 9 * kSecond);
  }

  TEST_CASE("Silence through the Ingestor, and per-instance trust") {
    World w;
    w.ingestor.ArmSilence(w.id, 100 * kSecond);
    w.ingestor.CheckSilence(w.id, 131 * kSecond, 30 * kSecond);
    CHECK(w.trust().state() == TrustState::kStale);
    InstanceTrustMap by_instance = InstanceTrusts(w.ingestor);
    CHECK(by_instance.at("a").state == TrustState::kStale);
    w.Send(0, 132 * kSecond, true);
    CHECK(w.trust().state() == TrustState::kExact);
    CHECK(InstanceTrusts(w.ingestor).at("a").state == TrustState::kExact);
  }
}

TEST_SUITE("source trust: answers") {
  TEST_CASE("Query answers carry each instance's state, byte for byte as the DOM writer") {
    PrefixMatch match;
    InstanceMatch a;
    a.instance = "a";
    a.longest_matched = a.gpu = 8;
    a.dp = {DpTokens{0, 8}};
    InstanceMatch b;
    b.instance = "b";
    InstanceMatch c;
    c.instance = "c";
    match.instances = {a, b, c};
    InstanceTrustMap trust;
    trust["a"] = InstanceTrust{TrustState::kDegraded, 12, 1'700'000'000 * kSecond};
    trust["b"] = InstanceTrust{TrustState::kStale, 0, 0};
    // "c" is not named: exact.
    const std::string want =
        R"({"data":{"default":{"a":{"CPU":0,"DISK":0,"DP":{"0":8},"GPU":8,"longest_matched":8,)"
        R"("lost_batches":12,"since":"2023-11-14T22:13:20Z","state":"degraded"},)"
        R"("b":{"CPU":0,"DISK":0,"DP":{},"GPU":0,"longest_matched":0,"state":"stale"},)"
        R"("c":{"CPU":0,"DISK":0,"DP":{},"GPU":0,"longest_matched":0,"state":"exact"}}}})";
    CHECK(RenderQueryAnswer(match, "default", false, &trust) == want);
    CHECK(RenderQueryAnswerWithDom(match, "default", false, &trust) == want);
    CHECK(RenderQueryAnswer(match, "default", true, &trust) ==
          RenderQueryAnswerWithDom(match, "default", true, &trust));
    // A name the direct writer hands to the DOM writer: the same fields.
    match.instances[2].instance = "c\"q";
    CHECK(RenderQueryAnswer(match, "default", false, &trust).find(R"("c\"q":{)") !=
          std::string::npos);
    // Without a trust map the answer has no state (offline tools that know none).
    CHECK(RenderQueryAnswer(match, "default").find("state") == std::string::npos);
    CHECK(RenderCacheAnswer(match, &trust) ==
          R"({"HitStatus":{"a":8,"b":0,"c\"q":0},"InstanceState":{"a":{"lost_batches":12,)"
          R"("since":"2023-11-14T22:13:20Z","state":"degraded"},"b":{"state":"stale"}}})");
  }
}

}  // namespace
}  // namespace kvindex
