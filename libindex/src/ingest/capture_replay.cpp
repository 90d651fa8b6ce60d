#include "kvindex/ingest/capture_replay.h"

#include <algorithm>

#include "kvindex/codec/source_spec.h"

namespace kvindex {
namespace {

// Capture source ids below this are looked up in a vector (they are small in practice).
constexpr uint32_t kDenseIds = 4096;

}  // namespace

std::optional<SourceId> CaptureReplayer::Source(SourceId capture_source) const {
  const auto it = sources_.find(capture_source.value);
  if (it == sources_.end()) return std::nullopt;
  return it->second.first;
}

Status CaptureReplayer::Adopt(SourceId capture_source, SourceId ingestor_source,
                              std::string definition) {
  if (sources_.count(capture_source.value) != 0) {
    return Status::InvalidArgument("capture source " + std::to_string(capture_source.value) +
                                   " is already defined");
  }
  sources_.emplace(capture_source.value, std::make_pair(ingestor_source, std::move(definition)));
  if (capture_source.value < kDenseIds) {
    if (dense_.size() <= capture_source.value) dense_.resize(capture_source.value + 1, -1);
    dense_[capture_source.value] = ingestor_source.value;
  }
  return Status::Ok();
}

Status CaptureReplayer::Apply(const CaptureRecord& record) {
  view_.type = record.type;
  view_.flags = record.flags;
  view_.recv_ns = record.recv_ns;
  view_.source = record.source;
  view_.body = record.body;
  view_.frames.assign(record.frames.begin(), record.frames.end());
  view_.file_index = record.file_index;
  view_.offset = record.offset;
  return Apply(view_);
}

Status CaptureReplayer::Apply(const CaptureRecordView& record) {
  ++stats_.records;
  if (record.type == CaptureRecordType::kSourceDefinition) {
    ++stats_.definitions;
    const std::string json(record.text());
    const auto known = sources_.find(record.source.value);
    if (known != sources_.end()) {
      // Rotated files repeat definitions; a different one is kept out (the first wins).
      if (known->second.second != json) ++stats_.conflicting_definitions;
      return Status::Ok();
    }
    auto config = SourceConfigFromJson(json);
    if (!config.ok()) {
      return config.status().WithContext("record at byte " + std::to_string(record.offset));
    }
    auto id = ingestor_.AddSource(*config);
    if (!id.ok()) return id.status().WithContext("record at byte " + std::to_string(record.offset));
    return Adopt(record.source, *id, json);
  }
  if (record.type == CaptureRecordType::kNote) {
    ++stats_.notes;
    // The live subscriber asked this source for its ring before any live batch: so does the
    // replay, or the backfilled batches would read as late replies (docs/capture-format.md).
    if (record.text() == "backfill") {
      const auto it = sources_.find(record.source.value);
      if (it != sources_.end()) ingestor_.StartBackfill(it->second.first);
    }
    // ... and asked for its ring again because a batch had orphans (a decision that depends on
    // the clock): the replayed batches that follow are applied as live applied them.
    if (record.text() == "orphan-replay") {
      const auto it = sources_.find(record.source.value);
      if (it != sources_.end()) ingestor_.StartOrphanReplay(it->second.first);
    }
    // ... and its instance was removed (/unregister): purged here too. The capture source id is
    // forgotten, so a later definition of it is a new source, as a registration again is live.
    if (record.text() == kUnregisterNote) {
      const auto it = sources_.find(record.source.value);
      if (it != sources_.end()) {
        ++stats_.unregistered;
        ingestor_.RemoveInstanceOf(it->second.first);
        sources_.erase(it);
        if (record.source.value < dense_.size()) dense_[record.source.value] = -1;
      }
    }
    return Status::Ok();
  }
  SourceId source;
  if (record.source.value < dense_.size() && dense_[record.source.value] >= 0) {
    source = SourceId{static_cast<uint32_t>(dense_[record.source.value])};
  } else {
    const auto it = sources_.find(record.source.value);
    if (it == sources_.end()) {
      ++stats_.unknown_source_records;
      return Status::Ok();
    }
    source = it->second.first;
  }
  switch (record.type) {
    case CaptureRecordType::kMessage:
      ++stats_.messages;
      if (any_damaged_) {
        ApplyMessage(source, record);
      } else {
        ingestor_.OnMessage(source, record.frames, record.recv_ns);
      }
      break;
    case CaptureRecordType::kReplayed:
      ++stats_.replayed;
      ingestor_.OnReplayReply(source, record.frames, record.recv_ns);
      break;
    case CaptureRecordType::kTimeout:
      // The live subscriber stopped waiting for a replay here: so does the replay. (Losses found
      // from the replay's own content are recomputed; kLost records are informational.)
      ++stats_.recorded_timeouts;
      ingestor_.GiveUp(source, record.recv_ns);
      break;
    case CaptureRecordType::kLost:
      stats_.recorded_lost += record.second();
      break;
    case CaptureRecordType::kGap:
      ++stats_.recorded_gaps;
      break;
    case CaptureRecordType::kRestart:
      ++stats_.recorded_restarts;
      break;
    case CaptureRecordType::kMalformed:
      ++stats_.recorded_malformed;
      break;
    case CaptureRecordType::kSourceDefinition:
    case CaptureRecordType::kNote:
      break;
  }
  return Status::Ok();
}

void CaptureReplayer::ApplyMessage(SourceId source, const CaptureRecordView& record) {
  if (source.value >= damaged_.size() || !damaged_[source.value]) {
    ingestor_.OnMessage(source, record.frames, record.recv_ns);
    return;
  }
  const DamageMark mark = *damaged_[source.value];
  damaged_[source.value].reset();
  any_damaged_ = std::any_of(damaged_.begin(), damaged_.end(),
                             [](const std::optional<DamageMark>& m) { return m.has_value(); });
  const auto [first, count] = ingestor_.OnMessageAfterDamage(source, record.frames, record.recv_ns);
  if (count == 0) return;
  stats_.damage_lost += count;
  stats_.damage_losses.push_back(
      CaptureDamageLoss{mark.file_index, mark.offset, source, first, count});
}

void CaptureReplayer::NoteDamage(const CaptureReader& reader) {
  const std::vector<CaptureProblem>& problems = reader.problems();
  if (problems.size() == problems_seen_) return;
  // The damage may have held any source's records: each one's next live batch tells.
  const CaptureProblem& problem = problems.back();
  size_t file_index = 0;
  for (size_t i = 0; i < reader.paths().size(); ++i) {
    if (reader.paths()[i] == problem.file) file_index = i;
  }
  stats_.damaged_stretches += problems.size() - problems_seen_;
  problems_seen_ = problems.size();
  damaged_.resize(ingestor_.source_count());
  for (const auto& [capture_id, defined] : sources_) {
    auto& mark = damaged_[defined.first.value];
    if (!mark) mark = DamageMark{file_index, problem.offset};
  }
  any_damaged_ = !sources_.empty();
}

Status CaptureReplayer::ApplyAll(CaptureReader& reader,
                                 const std::function<void(const CaptureRecord&)>& after_record) {
  const auto failed = [&reader](const Status& status, size_t file_index) {
    return status.WithContext(reader.paths()[file_index]);
  };
  if (after_record) {
    CaptureRecord record;
    while (reader.Next(record)) {
      NoteDamage(reader);
      const Status status = Apply(record);
      if (!status.ok()) return failed(status, record.file_index);
      after_record(record);
    }
    return reader.io_status();
  }
  // No callback: records are applied where the reader holds them (no copy).
  CaptureRecordView record;
  while (reader.NextView(record)) {
    NoteDamage(reader);
    const Status status = Apply(record);
    if (!status.ok()) return failed(status, record.file_index);
  }
  return reader.io_status();
}

}  // namespace kvindex
