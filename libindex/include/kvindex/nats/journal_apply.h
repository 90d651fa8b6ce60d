// Applying the event journal (docs/scale-out.md): JournalApplier feeds each journal entry to an
// Ingestor through CaptureReplayer, the path `replay CAPTURE` uses, so a replica's index equals
// the ingester's at every journal position. Journal subjects name sources by a key (journal.h);
// JournalSourceMap gives each key a small capture source id in the order keys first appear, the
// same in every reader of the same stream. A `journal-lost` note (the publisher dropped records of
// that source) makes the source give up on its next hole at once instead of waiting for a replay
// that the journal will never hold; so do all sources when the stream skips sequences (records its
// retention limits dropped before they were read). Each message applied (live, or a replay reply)
// adds the time since the ingester received it (the record's receive time, against this host's
// wall clock) to the applier's lag histogram.
//
// The stream may hold a source's batch record after records made later (its publisher sent it
// again after a failure): a RecordOrderer (record_order.h) puts them back into the ingester's
// order before they are applied, so that the index does not depend on where a resent record
// landed. A journal-lost note or skipped sequences release what waits for the lost records.
//
// A replica may start from a snapshot (journal_snapshot.h) instead of the stream's start: the
// index holds the snapshot, StartFrom() defines its sources with their sequence states and journal
// keys, and the journal continues after the snapshot's covered sequence.
//
// Thread safety: one thread.
#ifndef KVINDEX_NATS_JOURNAL_APPLY_H_
#define KVINDEX_NATS_JOURNAL_APPLY_H_

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvindex/core/instance.h"
#include "kvindex/core/lag_histogram.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/capture_replay.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/nats/journal.h"
#include "kvindex/ingest/record_order.h"
#include "kvindex/nats/journal.h"

namespace kvindex {

class JournalSourceMap {
 public:
  // The capture source id of `key` (1, 2, ... in first-seen order).
  SourceId Local(uint64_t key);
  bool Known(uint64_t key) const { return ids_.count(key) != 0; }

 private:
  std::unordered_map<uint64_t, uint32_t> ids_;
};

struct JournalApplyStats {
  uint64_t entries = 0;
  uint64_t bad_records = 0;  // bodies that are not capture records, or records the index refused
                             // (skipped)
  uint64_t lost_notes = 0;   // journal-lost notes seen
  uint64_t given_up = 0;     // holes given up on because of them
  uint64_t applied_seq = 0;  // the stream sequence of the latest entry applied
  uint64_t snapshot_seq = 0;  // StartFrom(): the sequence the snapshot covered (0: none)
  // Stream sequences never applied because the stream no longer held them (retention).
  uint64_t skipped_seqs = 0;
  // Per message applied (live or replay reply): seconds from the ingester receiving it to this applier applying it.
  LagHistogram apply_lag;
  // Batch records that came before their predecessor and were held (record_order.h), those held
  // now, and those applied without their predecessor (it never came: dropped or skipped).
  uint64_t reordered = 0;
  uint64_t held_records = 0;
  uint64_t released_early = 0;
};

class JournalApplier : private IngestObserver {
 public:
  // `index` must outlive the applier.
  explicit JournalApplier(PrefixIndex* index);

  // Before any Apply(): continues from a snapshot loaded into the index. `configs` and `seq` are
  // the snapshot's sources (index source i = configs[i]), `source_keys` their journal keys (0:
  // none; the source then gets no journal records) and `last_links` the link ids of their last
  // batch records before the cut (nullopt or missing: not known; the source's first batch record
  // after the cut is then applied whatever it names); the journal continues at covered_seq + 1.
  // Fails as Ingestor::AdoptSource() does.
  Status StartFrom(std::span<const SourceConfig> configs, std::span<const SourceSeqState> seq,
                   std::span<const uint64_t> source_keys,
                   std::span<const std::optional<JournalLink>> last_links, uint64_t covered_seq);

  // The stream went on at a later sequence than the next one expected: `count` sequences are
  // counted skipped and every source gives up on its next hole at once (it waits now: at once).
  void NoteSkipped(uint64_t count);

  // Reads one entry: applies it, or holds it while it came before its predecessor (then applies
  // it once that came), and applies what it released. stats().applied_seq counts it read either
  // way. Fails only as CaptureReplayer::Apply() does (a source definition that cannot be parsed or
  // added).
  Status Apply(JournalEntry& entry);

  Ingestor& ingestor() { return ingestor_; }
  const Ingestor& ingestor() const { return ingestor_; }
  // The source's instance was removed by an `unregister` note (HTTP /unregister on the ingester).
  bool unregistered(SourceId source) const {
    return source.value < unregistered_.size() && unregistered_[source.value];
  }
  const CaptureReplayStats& replay_stats() const { return replayer_.stats(); }
  const JournalApplyStats& stats() const { return stats_; }

 private:
  void OnReplayRequest(SourceId source, uint64_t from_seq) override;
  // Applies one record in its source's order (the orderer's sink).
  void ApplyOrdered(uint64_t source_key, CaptureRecordView& record);
  void MarkLossy(SourceId source);
  void NoteOrder();  // copies the orderer's counts into stats_
  // Adds the lag of `record` to stats_.apply_lag when it is a message.
  void NoteApplyLag(const CaptureRecordView& record);

  Ingestor ingestor_;
  CaptureReplayer replayer_;
  JournalSourceMap sources_;
  JournalApplyStats stats_;
  std::vector<bool> lossy_;            // by ingestor source id
  std::vector<bool> unregistered_;     // by ingestor source id
  std::vector<SourceId> give_up_now_;  // asked for a replay while lossy
  RecordOrderer orderer_;
  RecordOrderer::Sink sink_;
  uint64_t order_position_ = 0;  // records handed to the orderer
  Status first_error_;  // the first failure while applying one Apply()'s records
};

}  // namespace kvindex

#endif  // KVINDEX_NATS_JOURNAL_APPLY_H_
