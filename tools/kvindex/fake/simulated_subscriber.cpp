#include "fake/simulated_subscriber.h"

#include <algorithm>
#include <random>
#include <span>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/clock.h"

#include "fake/faults.h"

namespace kvindex::cli {

SimulatedSubscriber::SimulatedSubscriber(const PublishFakeOptions& o, ReplayStyle style,
                                         FakeStream& stream)
    : o_(o),
      sources_(stream.sources),
      style_(style),
      has_replay_(o.replay_port > 0),
      synthetic_(stream.synthetic ? &*stream.synthetic : nullptr),
      trace_(stream.trace ? &*stream.trace : nullptr),
      pending_drop_(stream.sources.size()),
      last_seq_(stream.sources.size()),
      max_seq_before_(stream.sources.size()),
      max_seq_now_(stream.sources.size(), 0) {}

Status SimulatedSubscriber::Open(WireFormat format) {
  base_ns_ = RealtimeNs();
  {
    std::mt19937_64 rng(o_.seed ^ 0x5eedULL);
    const size_t n = size_t{o_.synth.prompt_blocks} * o_.synth.block_size;
    for (size_t i = 0; i < n; ++i) {
      probe_unseen_.push_back(static_cast<TokenId>(rng() % 1000003 + 1000000));
    }
  }
  for (FakeSource& src : sources_) {
    // The rank the index knows a source's blocks by: the batch's rank when the format sends one
    // (publish-fake sends the source's), else the source's dp_rank label, else rank 0 for an
    // engine and none for a Mooncake store (SourceConfig::dp_rank).
    std::optional<DpRank> rank = src.rank_label;
    const bool store = src.config.is_store();
    if (o_.capture.empty() && o_.batches_file.empty() && format != WireFormat::kMooncakeSeed &&
        format != WireFormat::kVllmV09 && !(format == WireFormat::kSglang && o_.dp_ranks == 1)) {
      rank = src.rank;
    }
    if (!rank && !store) rank = 0;
    model_.AddSource(src.instance, rank,
                     src.config.block_size ? src.config.block_size : o_.synth.block_size);
  }
  if (!o_.emit_queries.empty()) {
    queries_.emplace();
    KVINDEX_RETURN_IF_ERROR(queries_->Open(o_.emit_queries));
  }
  if (!o_.out.empty()) {
    CaptureWriterOptions wo;
    wo.overwrite = true;
    KVINDEX_ASSIGN_OR_RETURN(capture_, CaptureWriter::Create(o_.out, wo));
    for (size_t k = 0; k < sources_.size(); ++k) {
      KVINDEX_RETURN_IF_ERROR(capture_->WriteSourceDefinition(
          SourceId{static_cast<uint32_t>(k)}, SourceConfigToJson(sources_[k].config), Now()));
    }
  }
  return Status::Ok();
}

Status SimulatedSubscriber::Finish() {
  if (queries_) {
    // Final queries, answered at the end of the stream (valid for live recordings too).
    for (size_t si = 0; si < sources_.size(); ++si) {
      if (sources_[si].items.empty()) continue;
      Probe(std::nullopt, sources_[si].items.back());
    }
    KVINDEX_RETURN_IF_ERROR(queries_->Finish());
  }
  if (capture_) KVINDEX_RETURN_IF_ERROR(capture_->Close());
  return Status::Ok();
}

Status SimulatedSubscriber::WriteMessage(size_t si, CaptureRecordType type,
                                         const std::vector<Frame>& frames) {
  std::vector<std::span<const std::byte>> spans(frames.begin(), frames.end());
  return capture_->WriteFrames(type, SourceId{static_cast<uint32_t>(si)}, Now(), spans);
}

Status SimulatedSubscriber::WriteReplies(size_t si, size_t upto, uint64_t from_seq) {
  if (!capture_ || !has_replay_) return Status::Ok();
  const FakeSource& src = sources_[si];
  const auto topic = std::as_bytes(std::span(o_.topic.data(), o_.topic.size()));
  for (const FakeBatch* it : RingAfter(src, upto, o_.ring)) {
    if (it->seq < from_seq) continue;
    KVINDEX_RETURN_IF_ERROR(WriteMessage(si, CaptureRecordType::kReplayed,
                                         BuildReplayReply(style_, topic, it->seq, it->payload)));
  }
  return WriteMessage(si, CaptureRecordType::kReplayed, BuildReplayEnd(style_));
}

Status SimulatedSubscriber::WriteLive(size_t si, const FakeBatch& item, const Bytes& payload) {
  if (!capture_) return Status::Ok();
  const auto topic = std::as_bytes(std::span(o_.topic.data(), o_.topic.size()));
  return WriteMessage(si, CaptureRecordType::kMessage, BuildEventMessage(topic, item.seq, payload));
}

// A subscriber without a replay endpoint gives up on a hole at once: a timeout record.
Status SimulatedSubscriber::WriteGiveUp(size_t si, uint64_t watermark) {
  if (!capture_ || has_replay_) return Status::Ok();
  return capture_->WriteObservation(CaptureRecordType::kTimeout,
                                    SourceId{static_cast<uint32_t>(si)}, Now(), watermark, 0);
}

void SimulatedSubscriber::ApplyToModel(size_t si, const FakeBatch& item) {
  if (item.batch) model_.Apply(si, *item.batch);
  // After a restart a sequence number may repeat; an `after` naming it would be ambiguous, so
  // only sequences above every earlier incarnation's are used as query points.
  const bool unique_seq = !max_seq_before_[si] || item.seq > *max_seq_before_[si];
  if (queries_ && o_.query_every > 0 && (item.index + 1) % o_.query_every == 0 && unique_seq) {
    const std::string name = FakeSourceName(sources_[si].config);
    Probe({{name, item.seq}}, item);
  }
}

void SimulatedSubscriber::Probe(const After& after, const FakeBatch& item) {
  std::vector<std::vector<TokenId>> prompts;
  if (!item.recent.empty()) prompts.push_back(item.recent);
  if (synthetic_ && synthetic_->prefix_count() > 0) prompts.push_back(synthetic_->prefix(0));
  if (trace_) prompts.push_back(trace_->first());
  prompts.push_back(probe_unseen_);
  for (const auto& p : prompts) {
    queries_->Write(o_.model, p, after, model_.Expect(p));
    if (o_.format != "vllm-hybrid-sparse" && o_.format != "vllm-hybrid-skipped") continue;
    // The sparse Mamba group: the same prompt in that group, then the prefix every group holds
    // (the prompt cut where the group's match on the first instance ends), asked in each group.
    const nlohmann::json sparse = model_.Expect(p, kSparseGroup);
    queries_->Write(o_.model, p, after, sparse, kSparseGroup);
    if (sparse.empty()) continue;
    const uint64_t held = sparse.begin()->at("longest_matched").get<uint64_t>();
    if (held == 0) continue;
    const std::vector<TokenId> common(p.begin(), p.begin() + static_cast<ptrdiff_t>(held));
    queries_->Write(o_.model, common, after, model_.Expect(common));
    queries_->Write(o_.model, common, after, model_.Expect(common, kSparseGroup), kSparseGroup);
  }
}

Status SimulatedSubscriber::Step(size_t si, size_t idx) {
  FakeSource& src = sources_[si];
  const FakeBatch& item = src.items[idx];
  max_seq_now_[si] = std::max(max_seq_now_[si], item.seq);
  if (item.restart) KVINDEX_RETURN_IF_ERROR(Restart(si, item));
  ++src.batches;
  src.events += item.events;
  src.stored += item.stored;
  src.removed += item.removed;
  src.cleared += item.cleared;
  src.bytes += item.payload.size();
  switch (item.fault) {
    case Fault::kDrop:
      ++src.dropped;
      pending_drop_[si] = idx;
      return Status::Ok();
    case Fault::kCorrupt:
      ++src.corrupted;
      return ReceiveCorrupt(si, idx);
    case Fault::kDuplicate:
      ++src.duplicated;
      break;
    case Fault::kNone:
      break;
  }
  return Receive(si, idx);
}

Status SimulatedSubscriber::Restart(size_t si, const FakeBatch& item) {
  if (last_seq_[si]) {
    max_seq_before_[si] = std::max(max_seq_before_[si].value_or(0), max_seq_now_[si]);
  }
  max_seq_now_[si] = 0;
  model_.Clear(si);
  pending_drop_[si].reset();
  ++sources_[si].restarts;
  if (capture_ && last_seq_[si]) {
    KVINDEX_RETURN_IF_ERROR(capture_->WriteObservation(CaptureRecordType::kRestart,
                                                       SourceId{static_cast<uint32_t>(si)}, Now(),
                                                       *last_seq_[si], item.seq));
  }
  return Status::Ok();
}

// A malformed payload is a hole for its own sequence, requested at once (with a drop just before
// it, the hole starts there).
Status SimulatedSubscriber::ReceiveCorrupt(size_t si, size_t idx) {
  FakeSource& src = sources_[si];
  const FakeBatch& item = src.items[idx];
  KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, CorruptCopy(item.payload)));
  if (capture_) {
    KVINDEX_RETURN_IF_ERROR(capture_->WriteText(CaptureRecordType::kMalformed,
                                                SourceId{static_cast<uint32_t>(si)}, Now(),
                                                "corrupt payload (publish-fake --corrupt-every)"));
  }
  const uint64_t from = pending_drop_[si] ? src.items[*pending_drop_[si]].seq : item.seq;
  KVINDEX_RETURN_IF_ERROR(WriteReplies(si, idx, from));
  if (pending_drop_[si]) {
    const FakeBatch& dropped = src.items[*pending_drop_[si]];
    if (has_replay_ && o_.ring >= 2)
      ApplyToModel(si, dropped);
    else
      ++src.lost;
    pending_drop_[si].reset();
  }
  if (has_replay_ && o_.ring >= 1)
    ApplyToModel(si, item);
  else
    ++src.lost;
  KVINDEX_RETURN_IF_ERROR(WriteGiveUp(si, item.seq));
  last_seq_[si] = item.seq;
  return Status::Ok();
}

// A batch received live (twice for a duplicate); with a drop just before it, the gap it reveals is
// recovered from the ring or given up.
Status SimulatedSubscriber::Receive(size_t si, size_t idx) {
  FakeSource& src = sources_[si];
  const FakeBatch& item = src.items[idx];
  KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, item.payload));
  if (item.fault == Fault::kDuplicate) KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, item.payload));
  if (pending_drop_[si]) {
    const FakeBatch& dropped = src.items[*pending_drop_[si]];
    if (capture_) {
      KVINDEX_RETURN_IF_ERROR(capture_->WriteObservation(CaptureRecordType::kGap,
                                                         SourceId{static_cast<uint32_t>(si)}, Now(),
                                                         dropped.seq, item.seq));
    }
    KVINDEX_RETURN_IF_ERROR(WriteReplies(si, idx, dropped.seq));
    KVINDEX_RETURN_IF_ERROR(WriteGiveUp(si, dropped.seq - 1));
    if (has_replay_ && o_.ring >= 2)
      ApplyToModel(si, dropped);
    else
      ++src.lost;
    pending_drop_[si].reset();
  }
  ApplyToModel(si, item);
  last_seq_[si] = item.seq;
  return Status::Ok();
}

}  // namespace kvindex::cli
