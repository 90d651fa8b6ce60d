// What Subscriber::Impl does with the ingestor's reports (IngestObserver): each observation is
// recorded when recording and logged (gaps and bad messages rate-limited); replay requests and
// orphans are queued for FlushRequests() (subscriber_replay.cpp).
#include <string>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"
#include "kvindex/files/capture_record.h"

#include "subscriber_impl.h"

namespace kvindex {
namespace {

std::string Suppressed(uint64_t n) {
  return n == 0 ? std::string() : " (" + std::to_string(n) + " similar suppressed)";
}

}  // namespace

void Subscriber::Impl::RecordObservation(CaptureRecordType type, SourceId id, uint64_t a,
                                         uint64_t b) {
  if (recorder == nullptr && tap == nullptr) return;
  const int64_t now = RealtimeNs();
  if (recorder != nullptr) Record(recorder->WriteObservation(type, id, now, a, b));
  if (tap != nullptr) {
    EncodeCaptureObservation(tap_record, type, id, now, a, b);
    tap->Put(tap_record);
  }
}

void Subscriber::Impl::RecordText(CaptureRecordType type, SourceId id, std::string_view text) {
  if (recorder == nullptr && tap == nullptr) return;
  const int64_t now = RealtimeNs();
  if (recorder != nullptr) {
    Record(type == CaptureRecordType::kSourceDefinition
               ? recorder->WriteSourceDefinition(id, text, now)
               : recorder->WriteText(type, id, now, text));
  }
  if (tap != nullptr && EncodeCaptureText(tap_record, type, id, now, text).ok()) {
    tap->Put(tap_record);
  }
}

void Subscriber::Impl::OnApplied(SourceId id, uint64_t seq, int64_t, const EventBatch&) {
  if (Source* s = Find(id)) s->last_applied = seq;
}

void Subscriber::Impl::OnReplayRequest(SourceId id, uint64_t from_seq) {
  pending_requests.emplace_back(id, from_seq);
}

void Subscriber::Impl::OnOrphans(SourceId id, uint64_t, uint64_t) {
  Source* s = Find(id);
  if (s != nullptr && s->dealer) s->orphans_seen = any_orphans_seen = true;
}

void Subscriber::Impl::OnGap(SourceId id, uint64_t expected, uint64_t received) {
  RecordObservation(CaptureRecordType::kGap, id, expected, received);
  uint64_t suppressed = 0;
  if (LogEnabled(LogLevel::kInfo) && gap_log.Allow(&suppressed)) {
    Log(LogLevel::kInfo, "source '" + Name(id) + "': gap: expected seq " +
                             std::to_string(expected) + ", received " + std::to_string(received) +
                             Suppressed(suppressed));
  }
}

void Subscriber::Impl::OnLost(SourceId id, uint64_t first, uint64_t count) {
  RecordObservation(CaptureRecordType::kLost, id, first, count);
  Log(LogLevel::kWarn, "source '" + Name(id) + "': " + std::to_string(count) +
                           " batch(es) lost from seq " + std::to_string(first));
}

void Subscriber::Impl::OnRestart(SourceId id, uint64_t previous, uint64_t seq) {
  RecordObservation(CaptureRecordType::kRestart, id, previous, seq);
  Log(LogLevel::kWarn, "source '" + Name(id) + "': publisher restart (seq " + std::to_string(seq) +
                           " after " + std::to_string(previous) + "): source cleared");
  // A reply to the old incarnation's request may still be on its way (the DEALER reads at burst
  // granularity beside a backlogged SUB): it must not answer a request of the new incarnation
  // (docs/sequence-rules.md "Replay"). A request the restart itself makes is sent afterwards, on
  // the fresh DEALER.
  Source* s = Find(id);
  if (s != nullptr && s->replay_pending) {
    s->replay_pending = false;
    RecreateDealer(*s);
  }
}

void Subscriber::Impl::OnMalformed(SourceId id, const Status& why) {
  Source* s = Find(id);
  if (s != nullptr && why.code() == StatusCode::kUnsupported) ++s->status.unsupported;
  RecordText(CaptureRecordType::kMalformed, id, why.message());
  if (options.strict && fatal.ok()) {
    fatal = why.WithContext("source '" + Name(id) + "' (--strict)");
    return;
  }
  uint64_t suppressed = 0;
  if (LogEnabled(LogLevel::kWarn) && malformed_log.Allow(&suppressed)) {
    Log(LogLevel::kWarn,
        "source '" + Name(id) + "': skipped: " + why.message() + Suppressed(suppressed));
  }
}

// Never silent (docs/sequence-rules.md "Late join"): at most once per source incarnation.
void Subscriber::Impl::OnLateJoin(SourceId id, uint64_t seq, uint64_t unknown) {
  Log(LogLevel::kWarn, "source '" + Name(id) + "': late join: first batch seen is seq " +
                           std::to_string(seq) + "; the " + std::to_string(unknown) +
                           " batch(es) before it are unknown (no replay endpoint)");
}

std::string Subscriber::Impl::Name(SourceId id) {
  Source* s = Find(id);
  return s != nullptr ? s->display : SourceDisplayName(ingestor.config(id));
}

}  // namespace kvindex
