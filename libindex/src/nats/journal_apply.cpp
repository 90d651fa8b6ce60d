// JournalApplier and JournalSourceMap (journal_apply.h).
#include "kvindex/nats/journal_apply.h"

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/clock.h"

namespace kvindex {

SourceId JournalSourceMap::Local(uint64_t key) {
  const auto [it, added] = ids_.emplace(key, static_cast<uint32_t>(ids_.size() + 1));
  return SourceId{it->second};
}

JournalApplier::JournalApplier(PrefixIndex* index)
    : ingestor_(index, this),
      replayer_(ingestor_),
      sink_([this](uint64_t, uint64_t source_key, CaptureRecordView& record) {
        ApplyOrdered(source_key, record);
      }) {}

Status JournalApplier::StartFrom(std::span<const SourceConfig> configs,
                                 std::span<const SourceSeqState> seq,
                                 std::span<const uint64_t> source_keys,
                                 std::span<const std::optional<JournalLink>> last_links,
                                 uint64_t covered_seq) {
  for (size_t i = 0; i < configs.size(); ++i) {
    KVINDEX_ASSIGN_OR_RETURN(const SourceId id,
                             ingestor_.AdoptSource(configs[i], SourceId{static_cast<uint32_t>(i)}));
    if (i < seq.size()) ingestor_.SeedSequence(id, seq[i]);
    const uint64_t key = i < source_keys.size() ? source_keys[i] : 0;
    if (key == 0 || sources_.Known(key)) continue;
    // Defined by the snapshot; the records after its cut name predecessors before it: the last
    // one where the snapshot names it, else the first record after the cut is let through.
    orderer_.Define(key);
    if (i < last_links.size() && last_links[i]) {
      const uint64_t seen[] = {last_links[i]->link, last_links[i]->chained};
      orderer_.Seed(key, seen);
    } else {
      orderer_.Lenient(key);
    }
    KVINDEX_RETURN_IF_ERROR(
        replayer_.Adopt(sources_.Local(key), id, SourceConfigToJson(configs[i])));
  }
  stats_.applied_seq = covered_seq;
  stats_.snapshot_seq = covered_seq;
  return Status::Ok();
}

void JournalApplier::NoteSkipped(uint64_t count) {
  stats_.skipped_seqs += count;
  // The skipped records may have been the predecessors of records held: they never come.
  orderer_.ReleaseAll(sink_);
  for (size_t i = 0; i < ingestor_.source_count(); ++i) {
    const SourceId source{static_cast<uint32_t>(i)};
    if (ingestor_.waiting(source)) {
      ingestor_.GiveUp(source);
      ++stats_.given_up;
    } else {
      MarkLossy(source);
    }
  }
  NoteOrder();
}

void JournalApplier::MarkLossy(SourceId source) {
  if (lossy_.size() <= source.value) lossy_.resize(source.value + 1, false);
  lossy_[source.value] = true;
}

Status JournalApplier::Apply(JournalEntry& entry) {
  ++stats_.entries;
  stats_.applied_seq = entry.stream_seq;
  if (!entry.problem.ok()) {
    ++stats_.bad_records;
    return Status::Ok();
  }
  first_error_ = Status::Ok();
  if (entry.record.type == CaptureRecordType::kNote && entry.record.text() == kJournalLostNote) {
    // Records of this source were dropped: what waits for them is applied now.
    orderer_.ReleaseSource(entry.source_key, sink_);
  }
  orderer_.Add(++order_position_, entry.source_key, entry.body, entry.record, entry.prev, sink_);
  NoteOrder();
  return first_error_;
}

void JournalApplier::NoteOrder() {
  const RecordOrderStats& order = orderer_.stats();
  stats_.held_records = order.held_now;
  stats_.reordered = order.held;
  stats_.released_early = order.released_early;
}

void JournalApplier::ApplyOrdered(uint64_t source_key, CaptureRecordView& record) {
  record.source = sources_.Local(source_key);
  if (record.type == CaptureRecordType::kNote && record.text() == kJournalLostNote) {
    ++stats_.lost_notes;
    if (const auto source = replayer_.Source(record.source)) {
      if (ingestor_.waiting(*source)) {
        ingestor_.GiveUp(*source);
        ++stats_.given_up;
      } else {
        MarkLossy(*source);
      }
    }
  }
  if (record.type == CaptureRecordType::kNote && record.text() == kUnregisterNote) {
    if (const auto source = replayer_.Source(record.source)) {
      if (unregistered_.size() <= source->value) unregistered_.resize(source->value + 1, false);
      unregistered_[source->value] = true;
    }
  }
  const Status status = replayer_.Apply(record);
  if (!status.ok()) {
    ++stats_.bad_records;
    if (first_error_.ok()) first_error_ = status;
  }
  NoteApplyLag(record);
  for (const SourceId source : give_up_now_) {
    ingestor_.GiveUp(source);
    ++stats_.given_up;
  }
  give_up_now_.clear();
}

void JournalApplier::OnReplayRequest(SourceId source, uint64_t) {
  if (source.value < lossy_.size() && lossy_[source.value]) {
    lossy_[source.value] = false;
    give_up_now_.push_back(source);
  }
}

void JournalApplier::NoteApplyLag(const CaptureRecordView& record) {
  if (record.type != CaptureRecordType::kMessage && record.type != CaptureRecordType::kReplayed) {
    return;
  }
  stats_.apply_lag.Add(static_cast<double>(RealtimeNs() - record.recv_ns) * 1e-9);
}

}  // namespace kvindex
