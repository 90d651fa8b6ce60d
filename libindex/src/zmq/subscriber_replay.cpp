// Subscriber::Impl's replay client: the replay requests the ingestor makes are
// sent on the source's DEALER, a request that cannot be sent or stays unanswered is given up on
// (and the DEALER re-created), and a source asks for its publisher's ring at start (backfill) and
// again when batches have orphans, rate-limited.
#include <algorithm>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/core/clock.h"

#include "subscriber_impl.h"

namespace kvindex {
namespace {

// The text CaptureReplayer recognises in a note record: the subscriber asked this source for its
// ring before any live batch (docs/capture-format.md).
constexpr std::string_view kBackfillNote = "backfill";
// ... and asked it for its ring again because a batch had orphans (docs/sequence-rules.md
// "Orphan replay").
constexpr std::string_view kOrphanReplayNote = "orphan-replay";

}  // namespace

// A source that cannot be asked gives up at once (its `timeout` record first, so a replay of the
// capture gives up at the same point).
void Subscriber::Impl::SendRequests() {
  StartOrphanReplays();
  while (!pending_requests.empty()) {
    auto requests = std::move(pending_requests);
    pending_requests.clear();
    for (const auto& [id, from] : requests) {
      Source* s = Find(id);
      bool sent = false;
      if (s != nullptr && s->dealer) {
        const std::vector<Frame> request = BuildReplayRequest(from);
        try {
          auto r1 = s->dealer->send(zmq::buffer(request[0].data(), request[0].size()),
                                    zmq::send_flags::sndmore | zmq::send_flags::dontwait);
          auto r2 = r1 ? s->dealer->send(zmq::buffer(request[1].data(), request[1].size()),
                                         zmq::send_flags::dontwait)
                       : zmq::send_result_t{};
          sent = r1.has_value() && r2.has_value();
        } catch (const zmq::error_t&) {
          sent = false;
        }
        if (!sent) ++s->status.replay_send_failures;
      }
      if (sent) {
        s->replay_pending = true;
        s->replay_deadline = SteadyClock::now() + options.replay_timeout;
        continue;
      }
      if (s == nullptr) continue;  // a warm-only source: nothing to ask (offline semantics)
      GiveUp(*s);
    }
  }
}

// Orphans ask for a replay of the source's ring (docs/sequence-rules.md "Orphan replay"): at most
// one outstanding request per source (the sequencer refuses while one is), and at most one orphan
// replay per `orphan_replay_interval`, doubled (up to 64x) while orphans keep coming back (their
// parents have probably left the ring: a lost batch orphans the rest of its chains), reset after a
// quiet spell. The decision depends on the clock, so it is recorded (a note that capture replay
// follows), right after the record of the message that caused it.
void Subscriber::Impl::StartOrphanReplays() {
  if (!any_orphans_seen) return;
  any_orphans_seen = false;
  for (auto& s : sources) {
    if (!s || !s->orphans_seen) continue;
    const auto now = SteadyClock::now();
    if (now < s->next_orphan_replay) {
      s->orphans_seen = false;  // rate-limited: later orphans ask again
      continue;
    }
    if (!ingestor.StartOrphanReplay(s->id)) {
      // Another replay is outstanding (the orphans may come from its own batches): ask once
      // it has ended.
      any_orphans_seen = true;
      continue;
    }
    s->orphans_seen = false;
    const SteadyClock::duration base = options.orphan_replay_interval;
    const SteadyClock::duration most = 64 * base;
    const bool quiet = now - s->last_orphan_replay > 2 * most;
    s->orphan_backoff = quiet || s->orphan_backoff == SteadyClock::duration::zero()
                            ? base
                            : std::min(2 * s->orphan_backoff, most);
    s->last_orphan_replay = now;
    s->next_orphan_replay = now + s->orphan_backoff;
    RecordText(CaptureRecordType::kNote, s->id, kOrphanReplayNote);
  }
}

void Subscriber::Impl::StartBackfill(Source& s) {
  // Recorded only when asked: a source continuing a position (a warm start) asks nothing, and a
  // replay that started a backfill there would hold its live batches for an end that never comes.
  if (ingestor.StartBackfill(s.id)) RecordText(CaptureRecordType::kNote, s.id, kBackfillNote);
  FlushRequests();
}

void Subscriber::Impl::StopWaiting(Source& s) {
  ++s.status.replay_timeouts;
  s.replay_pending = false;
  RecordObservation(CaptureRecordType::kTimeout, s.id, s.last_applied, 0);
  ingestor.GiveUp(s.id, RealtimeNs());
}

void Subscriber::Impl::GiveUp(Source& s) {
  StopWaiting(s);
  // Late replies to the abandoned request must not answer the next one.
  RecreateDealer(s);
  FlushRequests();
}

void Subscriber::Impl::RecreateDealer(Source& s) {
  if (!s.dealer) return;
  s.dealer.reset();
  ++s.status.dealers_recreated;
  sockets_changed = true;
  Record(OpenDealer(s));
}

}  // namespace kvindex
