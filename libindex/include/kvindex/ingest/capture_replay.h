// Applying a capture: every record of a CaptureReader through an Ingestor, exactly as the live
// subscriber saw it (docs/sequence-rules.md "Offline replay"). Source definitions define sources
// (capture source ids are mapped to the ingestor's), live messages and replay replies go through
// the sequence rules, and a recorded `timeout` gives up where the live subscriber gave up waiting,
// so the offline state equals the live state at every point of the capture. A damaged stretch
// the reader skips is read around: each source's next live batch closes the gap the damage left
// (its batches are lost, with the damage's offset) and replay goes on with what follows
// (docs/sequence-rules.md "Damaged captures").
//
// Thread safety: one thread.
#ifndef KVINDEX_INGEST_CAPTURE_REPLAY_H_
#define KVINDEX_INGEST_CAPTURE_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"
#include "kvindex/ingest/ingest.h"

namespace kvindex {

// Batches of one source lost to a damaged stretch of the capture.
struct CaptureDamageLoss {
  size_t file_index = 0;  // where the damage was: file within the capture, byte offset
  uint64_t offset = 0;
  SourceId source;  // the ingestor's source
  uint64_t first_seq = 0;
  uint64_t count = 0;
};

struct CaptureReplayStats {
  uint64_t records = 0;
  uint64_t definitions = 0;
  uint64_t messages = 0;
  uint64_t replayed = 0;
  // Observations as the live subscriber recorded them (the replay recomputes its own counts).
  uint64_t recorded_gaps = 0;
  uint64_t recorded_lost = 0;  // batches
  uint64_t recorded_restarts = 0;
  uint64_t recorded_malformed = 0;
  uint64_t recorded_timeouts = 0;
  uint64_t notes = 0;
  uint64_t unregistered = 0;  // sources whose instance an `unregister` note removed
  uint64_t conflicting_definitions = 0;  // a source id redefined differently (the first wins)
  uint64_t unknown_source_records = 0;   // records of a source id never defined (skipped)
  uint64_t damaged_stretches = 0;        // problems the reader stepped over (ApplyAll only)
  uint64_t damage_lost = 0;              // batches lost to them (the sum of damage_losses)
  std::vector<CaptureDamageLoss> damage_losses;
};

class CaptureReplayer {
 public:
  // `ingestor` must outlive the replayer.
  explicit CaptureReplayer(Ingestor& ingestor) : ingestor_(ingestor) {}

  // Applies one record. Fails only when a source definition cannot be parsed or added (the
  // record's offset is named); everything else is counted.
  Status Apply(const CaptureRecord& record);
  // The same for a borrowed record (CaptureReader::NextView()).
  Status Apply(const CaptureRecordView& record);

  // Applies every record of `reader`. `after_record`, when set, is called after each record (for
  // queries answered at a position). Stops at the first failed Apply(). The problems the reader
  // steps over are read around (stats().damage_losses).
  Status ApplyAll(CaptureReader& reader,
                  const std::function<void(const CaptureRecord&)>& after_record = {});

  // Maps `capture_source` to `ingestor_source`, a source the ingestor already has (adopted from a
  // snapshot), as if `definition` (its source definition JSON) had defined it. kInvalidArgument
  // when `capture_source` is already defined.
  Status Adopt(SourceId capture_source, SourceId ingestor_source, std::string definition);

  // The ingestor source of a capture source id, if defined.
  std::optional<SourceId> Source(SourceId capture_source) const;
  const CaptureReplayStats& stats() const { return stats_; }

 private:
  // Where the reader last stepped over damage, for the sources whose next live batch has not
  // been seen since.
  struct DamageMark {
    size_t file_index = 0;
    uint64_t offset = 0;
  };
  // Marks every defined source when `reader` reported new problems since the last call.
  void NoteDamage(const CaptureReader& reader);
  void ApplyMessage(SourceId source, const CaptureRecordView& record);

  Ingestor& ingestor_;
  std::unordered_map<uint32_t, std::pair<SourceId, std::string>> sources_;
  // The ingestor source of each small capture source id (the per-record lookup), -1 = undefined.
  std::vector<int64_t> dense_;
  CaptureReplayStats stats_;
  CaptureRecordView view_;  // Apply(const CaptureRecord&)'s view of its record
  size_t problems_seen_ = 0;
  std::vector<std::optional<DamageMark>> damaged_;  // by ingestor source id
  bool any_damaged_ = false;
};

}  // namespace kvindex

#endif  // KVINDEX_INGEST_CAPTURE_REPLAY_H_
