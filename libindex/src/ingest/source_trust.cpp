#include "kvindex/ingest/source_trust.h"

#include <ctime>

namespace kvindex {

std::string_view TrustStateName(TrustState state) {
  switch (state) {
    case TrustState::kExact:
      return "exact";
    case TrustState::kDegraded:
      return "degraded";
    case TrustState::kStale:
      return "stale";
  }
  return "exact";
}

std::string_view TrustReasonName(TrustReason reason) {
  static constexpr std::string_view kNames[kTrustReasonCount] = {
      "start",   "lost",    "malformed", "damaged", "late_join",
      "orphans", "cleared", "restart",   "silent",  "heard"};
  const auto i = static_cast<size_t>(reason);
  return i < kTrustReasonCount ? kNames[i] : "start";
}

TrustState SourceTrust::state() const {
  if (degraded_) return TrustState::kDegraded;
  return stale_ ? TrustState::kStale : TrustState::kExact;
}

TrustReason SourceTrust::reason() const {
  if (degraded_) return degraded_reason_;
  return stale_ ? TrustReason::kSilent : exact_reason_;
}

void SourceTrust::CountTransition(TrustState before, TrustReason reason) {
  if (state() != before) ++transitions_[static_cast<size_t>(reason)];
}

void SourceTrust::Degrade(TrustReason reason, uint64_t lost, int64_t now_ns) {
  const TrustState before = state();
  if (!degraded_) {
    degraded_ = true;
    degraded_reason_ = reason;
    lost_batches_ = 0;
    since_ns_ = now_ns;
  }
  lost_batches_ += lost;
  if (lost != 0) last_loss_ns_ = now_ns;
  CountTransition(before, reason);
}

void SourceTrust::Reset(TrustReason reason) {
  const TrustState before = state();
  degraded_ = false;
  exact_reason_ = reason;
  lost_batches_ = 0;
  since_ns_ = 0;
  last_loss_ns_ = 0;
  CountTransition(before, reason);
}

void SourceTrust::Heard(int64_t now_ns) {
  if (now_ns > last_heard_ns_) last_heard_ns_ = now_ns;
  if (!stale_) return;
  const TrustState before = state();
  stale_ = false;
  CountTransition(before, TrustReason::kHeard);
}

void SourceTrust::ArmSilence(int64_t now_ns) {
  if (now_ns > last_heard_ns_) last_heard_ns_ = now_ns;
}

void SourceTrust::CheckSilence(int64_t now_ns, int64_t stale_after_ns) {
  if (stale_after_ns <= 0 || stale_) return;
  if (last_heard_ns_ == 0) {  // never armed: silence counts from the first look
    last_heard_ns_ = now_ns;
    return;
  }
  if (now_ns - last_heard_ns_ < stale_after_ns) return;
  const TrustState before = state();
  stale_ = true;
  CountTransition(before, TrustReason::kSilent);
}

TrustSnapshot SourceTrust::Save() const {
  return TrustSnapshot{!degraded_, lost_batches_, since_ns_, last_loss_ns_,
                       degraded_ ? degraded_reason_ : exact_reason_};
}

void SourceTrust::Restore(const TrustSnapshot& saved) {
  degraded_ = !saved.exact;
  lost_batches_ = degraded_ ? saved.lost_batches : 0;
  since_ns_ = degraded_ ? saved.since_ns : 0;
  last_loss_ns_ = degraded_ ? saved.last_loss_ns : 0;
  if (degraded_) {
    degraded_reason_ = saved.reason;
  } else {
    exact_reason_ = saved.reason;
  }
}

void AddSourceTrust(InstanceTrust& into, const SourceTrust& source, bool first) {
  const TrustState state = source.state();
  if (first) into.state = state;
  if (state == TrustState::kDegraded) {
    if (into.state != TrustState::kDegraded) {
      into.state = TrustState::kDegraded;
      into.lost_batches = 0;
      into.since_ns = source.since_ns();
    } else if (into.since_ns == 0 ||
               (source.since_ns() != 0 && source.since_ns() < into.since_ns)) {
      into.since_ns = source.since_ns();
    }
    into.lost_batches += source.lost_batches();
    return;
  }
  // Stale only while every source is: one that is not makes a stale instance exact.
  if (into.state == TrustState::kStale && state == TrustState::kExact) {
    into.state = TrustState::kExact;
  }
}

std::string Rfc3339Utc(int64_t realtime_ns) {
  const std::time_t seconds = static_cast<std::time_t>(realtime_ns / 1'000'000'000);
  std::tm utc{};
  if (gmtime_r(&seconds, &utc) == nullptr) return "1970-01-01T00:00:00Z";
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return n == 0 ? std::string("1970-01-01T00:00:00Z") : std::string(buf, n);
}

}  // namespace kvindex
