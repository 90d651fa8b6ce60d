#include "kvindex/ingest/ingest.h"

#include <cassert>
#include <optional>
#include <variant>

// Inline, as in the files layer's capture checksums: payloads are a few hundred bytes, where the
// library call's dispatch is a visible part of the hash.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/clock.h"

namespace kvindex {
namespace {

FormatHint HintFor(const SourceConfig& config) {
  if (config.format == "vllm" || config.format == "lmcache") return FormatHint::kVllm;
  if (config.format == "sglang") return FormatHint::kSglang;
  if (config.format == "sglang-eagle") return FormatHint::kSglangEagle;
  if (config.format == "trtllm") return FormatHint::kTrtllm;
  if (config.format == "mooncake") return FormatHint::kMooncake;
  return FormatHint::kAuto;
}

// Batches kept for reuse (their vectors keep their capacity), and the largest one kept: a batch
// of more events than this is freed rather than pooled, so a burst of huge batches does not pin
// its memory.
constexpr size_t kPoolSize = 64;
constexpr size_t kPooledEventsMax = 4096;

// The sequence rules of one source: the ingestor's, with the publisher's first sequence (the
// Mooncake store publisher counts from 1, and an auto-detected source may be one) and whether a
// replay endpoint can fill what came before a late first batch.
SequencerOptions OptionsFor(SequencerOptions options, const SourceConfig& config) {
  const FormatHint hint = HintFor(config);
  options.first_seq = hint != FormatHint::kAuto && hint != FormatHint::kMooncake ? 0 : 1;
  options.count_late_join = config.replay_endpoint.empty();
  return options;
}

// The payload's content hash for the sequence rules (never 0, which means unknown).
uint64_t PayloadHash(std::span<const std::byte> payload) {
  const uint64_t hash = XXH3_64bits(payload.data(), payload.size());
  return hash == 0 ? 1 : hash;
}

}  // namespace

// A decoded batch waiting in the sequencer, with when it arrived.
struct Ingestor::Pending {
  EventBatch batch;
  int64_t recv_ns = 0;
};

std::string SourceDisplayName(const SourceConfig& config) {
  if (!config.dp_rank) return config.name;
  return config.name + "/dp" + std::to_string(*config.dp_rank);
}

struct Ingestor::Source {
  SourceId id;
  SourceId index_id;
  SourceConfig config;
  FormatHint hint = FormatHint::kAuto;
  SourceSequencer<std::unique_ptr<Pending>> sequencer;
  SourceCounters counters;
  // Trust bookkeeping of the current call (SettleTrust): sequences lost since the call began or
  // the last clear, why, and the latest payload that did not decode.
  uint64_t pending_lost = 0;
  TrustReason pending_reason = TrustReason::kLost;
  TrustReason loss_reason = TrustReason::kLost;  // kDamaged while LoseBefore() runs
  std::optional<uint64_t> malformed_seq;
  uint64_t seeded_lost = 0;  // lost batches counted by the run a snapshot came from
  explicit Source(SequencerOptions options) : sequencer(options) {}
};

namespace {

bool HasAllCleared(const EventBatch& batch) {
  for (const Event& event : batch.events) {
    if (std::holds_alternative<AllCleared>(event)) return true;
  }
  return false;
}

}  // namespace

// Turns the sequencer's decisions into index operations and observations.
struct Ingestor::SinkAdapter {
  Ingestor& self;
  Source& source;
  int64_t now_ns;  // realtime of the call, for the trust's times
  void Apply(uint64_t seq, std::unique_ptr<Pending>&& pending) {
    // Losses before a clear no longer matter; before any other batch they stand (SettleTrust).
    if (HasAllCleared(pending->batch)) {
      ClearTrust(TrustReason::kCleared);
    } else {
      SettleTrust(source, now_ns);
    }
    ApplyToIndex(seq, *pending);
    CountTokenForms(pending->batch);
    source.counters.events += pending->batch.events.size();
    source.counters.event_errors += pending->batch.errors.size();
    if (self.observer_ != nullptr) {
      self.observer_->OnApplied(source.id, seq, pending->recv_ns, pending->batch);
    }
    self.Recycle(std::move(pending));
  }
  // EAGLE bigram streams, and streams whose token form is not the configured one.
  void CountTokenForms(const EventBatch& batch) {
    const bool eagle = source.hint == FormatHint::kSglangEagle;
    for (const Event& e : batch.events) {
      const auto* s = std::get_if<BlockStored>(&e);
      if (s == nullptr || s->token_ids.empty()) continue;
      const bool pairs = s->wire.eagle_next.has_value();
      source.counters.bigram_events += pairs ? 1 : 0;
      source.counters.token_form_mismatches += pairs != eagle ? 1 : 0;
    }
  }
  // An orphan replay applies a batch again: only the index sees it (counts and observers saw it
  // the first time).
  void Reapply(uint64_t seq, std::unique_ptr<Pending>&& pending) {
    ApplyToIndex(seq, *pending);
    self.Recycle(std::move(pending));
  }
  void ApplyToIndex(uint64_t seq, const Pending& pending) {
    if (self.index_ == nullptr) return;
    auto result = self.index_->Apply(source.index_id, pending.batch);
    if (!result.ok()) return;
    source.counters.index += *result;
    if (result->replay_wanted() && source.config.replay_endpoint.empty()) {
      // Nothing can fetch the missing parents: the blocks stay unindexed.
      source.counters.trust.Degrade(TrustReason::kOrphans, 0, now_ns);
    }
    if (result->replay_wanted() && self.observer_ != nullptr) {
      self.observer_->OnOrphans(source.id, seq, result->orphans);
    }
  }
  // The source's presence is gone: what was lost before no longer matters.
  void ClearTrust(TrustReason reason) {
    source.pending_lost = 0;
    source.malformed_seq.reset();
    source.counters.trust.Reset(reason);
  }
  void Clear() {
    ClearTrust(TrustReason::kRestart);
    if (self.index_ != nullptr) {
      auto result = self.index_->ClearSource(source.index_id);
      if (result.ok()) source.counters.index += *result;
    }
  }
  void RequestReplay(uint64_t from) {
    if (self.observer_ != nullptr) self.observer_->OnReplayRequest(source.id, from);
  }
  void Lost(uint64_t first, uint64_t count) {
    if (source.pending_lost == 0) {
      const bool malformed = source.malformed_seq && *source.malformed_seq >= first &&
                             *source.malformed_seq - first < count;
      source.pending_reason = malformed ? TrustReason::kMalformed : source.loss_reason;
    }
    source.pending_lost += count;
    if (self.observer_ != nullptr) self.observer_->OnLost(source.id, first, count);
  }
};

Ingestor::Ingestor(PrefixIndex* index, IngestObserver* observer, SequencerOptions options)
    : index_(index), observer_(observer), options_(options) {}

Ingestor::~Ingestor() = default;

Result<SourceId> Ingestor::AddSource(const SourceConfig& config) {
  auto source = std::make_unique<Source>(OptionsFor(options_, config));
  source->id = SourceId{static_cast<uint32_t>(sources_.size())};
  source->config = config;
  source->hint = HintFor(config);
  if (index_ != nullptr) {
    KVINDEX_ASSIGN_OR_RETURN(source->index_id, index_->AddSource(config));
  }
  sources_.push_back(std::move(source));
  return sources_.back()->id;
}

Result<SourceId> Ingestor::AdoptSource(const SourceConfig& config, SourceId index_source) {
  if (index_ == nullptr) return Status::InvalidArgument("adopt: no index");
  auto source = std::make_unique<Source>(OptionsFor(options_, config));
  source->id = SourceId{static_cast<uint32_t>(sources_.size())};
  source->config = config;
  source->hint = HintFor(config);
  source->index_id = index_source;
  sources_.push_back(std::move(source));
  return sources_.back()->id;
}

Ingestor::Source& Ingestor::At(SourceId source) {
  assert(source.value < sources_.size());
  return *sources_[source.value];
}
const Ingestor::Source& Ingestor::At(SourceId source) const {
  assert(source.value < sources_.size());
  return *sources_[source.value];
}

void Ingestor::Feed(Source& source, uint64_t seq, std::span<const std::byte> payload,
                    int64_t recv_ns, bool replayed) {
  SinkAdapter sink{*this, source, recv_ns};
  const SequencerCounters before = source.sequencer.counters();
  const std::optional<uint64_t> previous = source.sequencer.watermark();
  std::optional<std::unique_ptr<Pending>> pending;
  std::unique_ptr<Pending> batch = TakePending();
  const Status decoded = DecodeEventBatchInto(payload, batch->batch, source.hint);
  if (decoded.ok()) {
    batch->recv_ns = recv_ns;
    pending.emplace(std::move(batch));
  } else {
    Recycle(std::move(batch));
    source.malformed_seq = seq;
    if (observer_ != nullptr) {
      observer_->OnMalformed(source.id, decoded.WithContext((replayed ? "replayed seq " : "seq ") +
                                                            std::to_string(seq)));
    }
  }
  const uint64_t hash = PayloadHash(payload);
  if (replayed) {
    source.sequencer.OnReplayed(seq, std::move(pending), sink, hash);
  } else {
    source.sequencer.OnLive(seq, std::move(pending), sink, hash);
  }
  const SequencerCounters& after = source.sequencer.counters();
  if (observer_ != nullptr) {
    if (after.gaps != before.gaps) {
      observer_->OnGap(source.id, previous ? *previous + 1 : 0, seq);
    }
    if (after.restarts != before.restarts) {
      observer_->OnRestart(source.id, previous.value_or(0), seq);
    }
    if (after.corrupt_seqs != before.corrupt_seqs) {
      observer_->OnMalformed(
          source.id,
          Status::Corrupt((replayed ? "replayed seq " : "seq ") + std::to_string(seq) +
                          " jumps more than " + std::to_string(options_.max_forward_jump) +
                          " past the expected " + std::to_string(previous ? *previous + 1 : 0) +
                          ": a corrupt frame, not applied"));
    }
    if (after.late_joins != before.late_joins) {
      observer_->OnLateJoin(source.id, seq, after.late_join_batches - before.late_join_batches);
    }
  }
  source.counters.sequence = after;
  SettleTrust(source, recv_ns);
  if (after.late_joins != before.late_joins) {
    source.counters.trust.Degrade(TrustReason::kLateJoin,
                                  after.late_join_batches - before.late_join_batches, recv_ns);
  }
}

void Ingestor::SettleTrust(Source& source, int64_t now_ns) {
  if (source.pending_lost != 0) {
    source.counters.trust.Degrade(source.pending_reason, source.pending_lost, now_ns);
    source.pending_lost = 0;
  }
  source.loss_reason = TrustReason::kLost;
}

void Ingestor::OnMessage(SourceId id, std::span<const Frame> frames, int64_t recv_ns) {
  OnParsedMessage(id, ParseEventMessage(frames), recv_ns);
}
void Ingestor::OnMessage(SourceId id, std::span<const FrameView> frames, int64_t recv_ns) {
  OnParsedMessage(id, ParseEventMessage(frames), recv_ns);
}

void Ingestor::OnParsedMessage(SourceId id, const Result<EventMessageView>& message,
                               int64_t recv_ns) {
  Source& source = At(id);
  source.counters.trust.Heard(recv_ns);
  if (!message.ok()) {
    ++source.counters.frame_errors;
    if (observer_ != nullptr) observer_->OnMalformed(id, message.status());
    return;
  }
  Feed(source, message->seq, message->payload, recv_ns, /*replayed=*/false);
}

std::pair<uint64_t, uint64_t> Ingestor::OnMessageAfterDamage(SourceId id,
                                                             std::span<const FrameView> frames,
                                                             int64_t recv_ns) {
  const Result<EventMessageView> message = ParseEventMessage(frames);
  std::pair<uint64_t, uint64_t> lost{0, 0};
  if (message.ok()) {
    Source& source = At(id);
    SinkAdapter sink{*this, source, recv_ns};
    const std::optional<uint64_t> watermark = source.sequencer.watermark();
    source.loss_reason = TrustReason::kDamaged;
    lost.second = source.sequencer.LoseBefore(message->seq, sink);
    lost.first = watermark ? *watermark + 1 : 0;
    source.counters.sequence = source.sequencer.counters();
    SettleTrust(source, recv_ns);
  }
  OnParsedMessage(id, message, recv_ns);
  return lost;
}

void Ingestor::OnReplayReply(SourceId id, std::span<const Frame> frames, int64_t recv_ns) {
  OnParsedReply(id, ParseReplayReply(frames), recv_ns);
}
void Ingestor::OnReplayReply(SourceId id, std::span<const FrameView> frames, int64_t recv_ns) {
  OnParsedReply(id, ParseReplayReply(frames), recv_ns);
}

void Ingestor::OnParsedReply(SourceId id, const Result<ReplayReply>& reply, int64_t recv_ns) {
  Source& source = At(id);
  source.counters.trust.Heard(recv_ns);
  if (!reply.ok()) {
    ++source.counters.replay_frame_errors;
    if (observer_ != nullptr) observer_->OnMalformed(id, reply.status().WithContext("replay reply"));
    return;
  }
  if (reply->kind == ReplayReply::Kind::kEnd) {
    SinkAdapter sink{*this, source, recv_ns};
    source.sequencer.OnReplayEnd(sink);
    source.counters.sequence = source.sequencer.counters();
    SettleTrust(source, recv_ns);
    return;
  }
  Feed(source, reply->seq, reply->payload, recv_ns, /*replayed=*/true);
}

bool Ingestor::StartBackfill(SourceId id) {
  Source& source = At(id);
  SinkAdapter sink{*this, source, source.counters.trust.last_heard_ns()};
  const bool started = source.sequencer.StartBackfill(sink);
  source.counters.sequence = source.sequencer.counters();
  SettleTrust(source, sink.now_ns);
  return started;
}

bool Ingestor::StartOrphanReplay(SourceId id) {
  Source& source = At(id);
  SinkAdapter sink{*this, source, source.counters.trust.last_heard_ns()};
  const bool started = source.sequencer.StartOrphanReplay(sink);
  source.counters.sequence = source.sequencer.counters();
  SettleTrust(source, sink.now_ns);
  return started;
}

void Ingestor::RemoveInstanceOf(SourceId id) {
  if (index_ == nullptr) return;
  (void)index_->RemoveInstance(At(id).config.name);  // kNotFound: purged already
}

std::unique_ptr<Ingestor::Pending> Ingestor::TakePending() {
  if (pool_.empty()) return std::make_unique<Pending>();
  std::unique_ptr<Pending> pending = std::move(pool_.back());
  pool_.pop_back();
  return pending;
}

void Ingestor::Recycle(std::unique_ptr<Pending>&& pending) {
  if (pool_.size() >= kPoolSize || pending->batch.events.capacity() > kPooledEventsMax) {
    pending.reset();
    return;
  }
  pool_.push_back(std::move(pending));
}

void Ingestor::GiveUp(SourceId id, int64_t now_ns) {
  Source& source = At(id);
  SinkAdapter sink{*this, source, now_ns != 0 ? now_ns : source.counters.trust.last_heard_ns()};
  source.sequencer.GiveUp(sink);
  source.counters.sequence = source.sequencer.counters();
  SettleTrust(source, sink.now_ns);
}

void Ingestor::ArmSilence(SourceId id, int64_t now_ns) { At(id).counters.trust.ArmSilence(now_ns); }

void Ingestor::CheckSilence(SourceId id, int64_t now_ns, int64_t stale_after_ns) {
  At(id).counters.trust.CheckSilence(now_ns, stale_after_ns);
}

void Ingestor::RestoreTrust(SourceId id, const TrustSnapshot& saved) {
  At(id).counters.trust.Restore(saved);
}

InstanceTrustMap InstanceTrusts(const Ingestor& ingestor) {
  InstanceTrustMap out;
  for (size_t i = 0; i < ingestor.source_count(); ++i) {
    const SourceId id{static_cast<uint32_t>(i)};
    const auto [it, first] = out.try_emplace(ingestor.config(id).name);
    AddSourceTrust(it->second, ingestor.counters(id).trust, first);
  }
  return out;
}

bool Ingestor::replay_outstanding(SourceId source) const {
  return At(source).sequencer.replay_outstanding();
}
bool Ingestor::waiting(SourceId source) const { return At(source).sequencer.waiting(); }
SourceSeqState Ingestor::sequence_state(SourceId id) const {
  const Source& source = At(id);
  SourceSeqState s;
  s.watermark = source.sequencer.watermark();
  s.publisher = source.config.endpoint;
  s.lost = source.seeded_lost + source.counters.sequence.lost;
  s.trust = source.counters.trust.Save();
  return s;
}

void Ingestor::SeedSequence(SourceId id, const SourceSeqState& state) {
  Source& source = At(id);
  if (state.publisher != source.config.endpoint || source.sequencer.initialized()) return;
  if (state.watermark) source.sequencer.Seed(*state.watermark);
  source.seeded_lost = state.lost;
  source.counters.trust.Restore(state.trust);
}

size_t Ingestor::held(SourceId source) const { return At(source).sequencer.held(); }
const SourceCounters& Ingestor::counters(SourceId source) const { return At(source).counters; }
const SourceConfig& Ingestor::config(SourceId source) const { return At(source).config; }
size_t Ingestor::source_count() const { return sources_.size(); }

}  // namespace kvindex
