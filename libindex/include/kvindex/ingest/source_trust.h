// SourceTrust: how far the index's view of one source can be trusted (docs/http-api.md "Trust
// states"). Three states:
//   exact     every batch since the last AllBlocksCleared, publisher restart or start from empty
//             was applied;
//   degraded  something since then was not: sequences given up on, a payload that never decoded,
//             a damaged capture stretch, a late join, orphans nothing could fill. `lost_batches`
//             counts the sequences lost since it became degraded, `since` is when it did;
//   stale     nothing was heard from the source for `stale_after` (the caller decides when to
//             look: CheckSilence()).
// Degraded wins over stale: a degraded source that also went silent reports degraded (its
// content is known to be incomplete; silence says only that it may be old). A clear or a restart
// returns a degraded source to exact; a message returns a stale one to what it was before.
//
// The state is a plain value: Save() gives the TrustSnapshot a snapshot of the index stores and
// Restore() puts it back. The Ingestor keeps one per source (SourceCounters::trust).
//
// Thread safety: a plain value; one writer (the ingest thread), copies may be read anywhere.
#ifndef KVINDEX_INGEST_SOURCE_TRUST_H_
#define KVINDEX_INGEST_SOURCE_TRUST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace kvindex {

enum class TrustState : uint8_t { kExact, kDegraded, kStale };

// Why a source is in its state (and the label of the transition into it).
enum class TrustReason : uint8_t {
  kStart,      // exact: started from empty
  kLost,       // degraded: sequences given up on (a gap a replay could not fill)
  kMalformed,  // degraded: a payload that did not decode and was never recovered
  kDamaged,    // degraded: batches lost to a damaged stretch of a capture
  kLateJoin,   // degraded: stream first seen past its first sequence, nothing to fill it
  kOrphans,    // degraded: blocks left unindexed (parent unknown), no replay to fill them
  kCleared,    // exact: an AllBlocksCleared event
  kRestart,    // exact: a publisher restart (the source was cleared)
  kSilent,     // stale: no message for stale_after
  kHeard,      // back from stale: a message arrived
};
inline constexpr size_t kTrustReasonCount = 10;

std::string_view TrustStateName(TrustState state);     // "exact", "degraded", "stale"
std::string_view TrustReasonName(TrustReason reason);  // "start", "lost", "late_join", ...

// What a snapshot keeps of a source's trust (wall times in realtime ns since the Unix epoch).
struct TrustSnapshot {
  bool exact = true;
  uint64_t lost_batches = 0;  // since it became degraded
  int64_t since_ns = 0;       // when it became degraded (0 when exact)
  int64_t last_loss_ns = 0;   // the latest loss (0: none since exact)
  TrustReason reason = TrustReason::kStart;
  friend bool operator==(const TrustSnapshot&, const TrustSnapshot&) = default;
};

class SourceTrust {
 public:
  // Something was not applied: `lost` sequences (0 for orphans) at `now_ns`.
  void Degrade(TrustReason reason, uint64_t lost, int64_t now_ns);
  // The source's presence was cleared (kCleared, kRestart): exact again.
  void Reset(TrustReason reason);
  // A message from the source at `now_ns` (live or replay).
  void Heard(int64_t now_ns);
  // Silence is counted from `now_ns` at the latest (a source connected, or a warmed one going
  // live): what was heard before is not silence.
  void ArmSilence(int64_t now_ns);
  // Stale when nothing was heard for `stale_after_ns` as of `now_ns` (0: never stale).
  void CheckSilence(int64_t now_ns, int64_t stale_after_ns);

  TrustState state() const;
  TrustReason reason() const;  // of the current state
  bool exact() const { return !degraded_; }
  bool stale() const { return stale_; }
  uint64_t lost_batches() const { return lost_batches_; }
  int64_t since_ns() const { return since_ns_; }
  int64_t last_loss_ns() const { return last_loss_ns_; }
  int64_t last_heard_ns() const { return last_heard_ns_; }
  // Transitions of state() so far, by the reason that made each.
  uint64_t transitions(TrustReason reason) const {
    return transitions_[static_cast<size_t>(reason)];
  }

  TrustSnapshot Save() const;
  void Restore(const TrustSnapshot& saved);

 private:
  void CountTransition(TrustState before, TrustReason reason);

  bool degraded_ = false;
  bool stale_ = false;
  TrustReason degraded_reason_ = TrustReason::kLost;
  TrustReason exact_reason_ = TrustReason::kStart;
  uint64_t lost_batches_ = 0;
  int64_t since_ns_ = 0;
  int64_t last_loss_ns_ = 0;
  int64_t last_heard_ns_ = 0;
  std::array<uint64_t, kTrustReasonCount> transitions_{};
};

// An instance's trust from its sources': degraded when any is (lost batches summed, the earliest
// `since`), else stale when every one is, else exact. No source: exact.
struct InstanceTrust {
  TrustState state = TrustState::kExact;
  uint64_t lost_batches = 0;
  int64_t since_ns = 0;
};
// Folds one more source into `into` (`first`: the instance's first source).
void AddSourceTrust(InstanceTrust& into, const SourceTrust& source, bool first);
// Instances' trust by instance name (what /query answers carry).
using InstanceTrustMap = std::map<std::string, InstanceTrust, std::less<>>;

// "2026-01-02T03:04:05Z": realtime ns as RFC 3339 UTC, whole seconds.
std::string Rfc3339Utc(int64_t realtime_ns);

}  // namespace kvindex

#endif  // KVINDEX_INGEST_SOURCE_TRUST_H_
