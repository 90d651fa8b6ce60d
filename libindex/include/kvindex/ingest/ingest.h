// Ingestor: one source's messages -> sequence rules -> decoded batches -> the index. The same
// object serves the live subscriber (frames from ZeroMQ), `record` (no index: it only needs the
// observations) and capture replay (frames from a capture), so offline state equals live state.
//
// Per message: the frame count and sequence frame are checked (a bad shape is counted as a frame
// error and skipped: its sequence is unknown); the payload is decoded with the source's format as
// a hint (an envelope that does not decode is a hole for its sequence, SourceSequencer); decoded
// batches go through the source's SourceSequencer and are applied to the index in sequence order.
// A publisher restart clears the source in the index. Replay requests the sequencer makes are
// handed to the observer (the live subscriber sends them on its DEALER; offline they are ignored).
//
// Thread safety: one thread (the writer of the index) calls everything.
#ifndef KVINDEX_INGEST_INGEST_H_
#define KVINDEX_INGEST_INGEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/core/event.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/sequencer.h"
#include "kvindex/ingest/source_trust.h"

namespace kvindex {

// A source's sequence state as a snapshot keeps it.
struct SourceSeqState {
  std::optional<uint64_t> watermark;  // the last applied sequence (none: nothing applied yet)
  std::string publisher;              // the publisher's identity (its endpoint as subscribed)
  uint64_t lost = 0;                  // batches lost, cumulative
  TrustSnapshot trust;                // exact or degraded, and why (source_trust.h)
  friend bool operator==(const SourceSeqState&, const SourceSeqState&) = default;
};

// Everything counted per source.
struct SourceCounters {
  SequencerCounters sequence;       // received, applied, duplicates, gaps, recovered, lost, ...
  uint64_t frame_errors = 0;        // live messages whose frames were not [topic, seq8, payload]
  uint64_t replay_frame_errors = 0;  // replay replies of no known layout
  uint64_t event_errors = 0;        // events that failed alone inside good batches
  uint64_t events = 0;              // events applied
  // Applied BlockStored events whose token_ids came as SGLang EAGLE bigram pairs.
  uint64_t bigram_events = 0;
  // Applied BlockStored events (with tokens) whose token form differs from the source's format:
  // bigram pairs on a source not configured sglang-eagle, plain tokens on one that is.
  uint64_t token_form_mismatches = 0;
  ApplyResult index;                // what the index did with the applied batches
  SourceTrust trust;                // not a counter: exact / degraded / stale (source_trust.h)
};

// What the ingestor tells its owner. Every method has an empty default.
class IngestObserver {
 public:
  virtual ~IngestObserver() = default;
  // A batch was applied (after the index applied it, when there is an index).
  virtual void OnApplied(SourceId /*source*/, uint64_t /*seq*/, int64_t /*recv_ns*/,
                         const EventBatch& /*batch*/) {}
  // The sequencer wants batches from `from_seq` on (send a replay request).
  virtual void OnReplayRequest(SourceId /*source*/, uint64_t /*from_seq*/) {}
  virtual void OnGap(SourceId /*source*/, uint64_t /*expected*/, uint64_t /*received*/) {}
  virtual void OnLost(SourceId /*source*/, uint64_t /*first_seq*/, uint64_t /*count*/) {}
  virtual void OnRestart(SourceId /*source*/, uint64_t /*previous*/, uint64_t /*seq*/) {}
  // Applying batch `seq` left `orphans` blocks unindexed (their parent is unknown): the live
  // subscriber may call StartOrphanReplay() once the current call has returned
  // (docs/sequence-rules.md "Orphan replay").
  virtual void OnOrphans(SourceId /*source*/, uint64_t /*seq*/, uint64_t /*orphans*/) {}
  // A live message that could not be used, and why (frame shape, payload, or a corrupt sequence:
  // a jump no publisher makes, SequencerOptions::max_forward_jump).
  virtual void OnMalformed(SourceId /*source*/, const Status& /*why*/) {}
  // The stream was first seen at `seq`, `unknown` batches past the publisher's first sequence,
  // with no replay endpoint to fetch them (docs/sequence-rules.md "Late join").
  virtual void OnLateJoin(SourceId /*source*/, uint64_t /*seq*/, uint64_t /*unknown*/) {}
};

class Ingestor {
 public:
  // `index` may be null (record: observations only). Both must outlive the ingestor.
  explicit Ingestor(PrefixIndex* index, IngestObserver* observer = nullptr,
                    SequencerOptions options = {});
  ~Ingestor();
  Ingestor(const Ingestor&) = delete;
  Ingestor& operator=(const Ingestor&) = delete;

  // Defines a source (and adds it to the index). Fails as PrefixIndex::AddSource does.
  Result<SourceId> AddSource(const SourceConfig& config);

  // Defines a source that the index already has (a loaded snapshot's `index_source`), without
  // adding it to the index again. kInvalidArgument when the index has no such source.
  Result<SourceId> AdoptSource(const SourceConfig& config, SourceId index_source);

  // A live message as received: `[topic, seq8, payload]`.
  void OnMessage(SourceId source, std::span<const Frame> frames, int64_t recv_ns);
  // A message received on the source's replay (DEALER) socket, in any reply layout.
  void OnReplayReply(SourceId source, std::span<const Frame> frames, int64_t recv_ns);
  // The same with borrowed frames (capture replay reads them in place); used only during the call.
  void OnMessage(SourceId source, std::span<const FrameView> frames, int64_t recv_ns);
  void OnReplayReply(SourceId source, std::span<const FrameView> frames, int64_t recv_ns);
  // A live message read from a capture right after a damaged stretch: when its sequence would
  // open a gap, the sequences before it are lost at once instead (SourceSequencer::LoseBefore;
  // docs/sequence-rules.md "Damaged captures"), then it is handled as OnMessage() does. Returns
  // the first sequence lost and the count (count 0: nothing lost).
  std::pair<uint64_t, uint64_t> OnMessageAfterDamage(SourceId source,
                                                     std::span<const FrameView> frames,
                                                     int64_t recv_ns);
  // Asks for the publisher's ring before the first live batch (a replay endpoint is configured).
  // False, asking nothing, when the source already has a position (SourceSequencer).
  bool StartBackfill(SourceId source);
  // Gives up on what the source is missing (the replay timed out; offline: a recorded `lost`).
  // `now_ns` (realtime) dates a loss for the source's trust; 0: the latest message's time.
  void GiveUp(SourceId source, int64_t now_ns = 0);
  // The source's trust (SourceCounters::trust): silence is counted from `now_ns` at the latest
  // (ArmSilence), and the source turns stale after `stale_after_ns` without a message
  // (CheckSilence; 0: never). Offline nothing calls these, so a capture is never stale.
  void ArmSilence(SourceId source, int64_t now_ns);
  void CheckSilence(SourceId source, int64_t now_ns, int64_t stale_after_ns);
  // Puts back a saved trust state (an index snapshot restored at start).
  void RestoreTrust(SourceId source, const TrustSnapshot& saved);
  // Asks the source for its whole ring again because a batch had orphans (SourceSequencer::
  // StartOrphanReplay: replayed batches already applied are applied again, live ones wait).
  // Returns false, asking nothing, while a replay is outstanding, during backfill or before the
  // first batch. Offline: a capture's `orphan-replay` note (docs/capture-format.md).
  bool StartOrphanReplay(SourceId source);
  // The source's instance was removed (HTTP /unregister): purges it from the index as
  // PrefixIndex::RemoveInstance() does. Nothing without an index, or when the index no longer
  // lists the instance (another source of it came first). Offline: a capture's `unregister` note.
  void RemoveInstanceOf(SourceId source);

  // The source's sequence state (kept in snapshots, docs/snapshot-format.md): watermark, the
  // publisher as subscribed, whether no batch was lost since its last clear or restart, the lost
  // count (including what was seeded) and when the last loss happened.
  SourceSeqState sequence_state(SourceId source) const;
  // Continues from a state kept by an earlier run, before the source's first message
  // (SourceSequencer::Seed()). A state of another publisher (endpoint) seeds nothing.
  void SeedSequence(SourceId source, const SourceSeqState& state);

  bool replay_outstanding(SourceId source) const;
  bool waiting(SourceId source) const;
  // Batches the source's sequencer holds behind a hole (SourceSequencer::held()).
  size_t held(SourceId source) const;
  const SourceCounters& counters(SourceId source) const;
  const SourceConfig& config(SourceId source) const;
  size_t source_count() const;

 private:
  struct Source;
  struct SinkAdapter;
  struct Pending;
  std::unique_ptr<Pending> TakePending();
  void Recycle(std::unique_ptr<Pending>&& pending);
  Source& At(SourceId source);
  const Source& At(SourceId source) const;
  void OnParsedMessage(SourceId id, const Result<EventMessageView>& message, int64_t recv_ns);
  void OnParsedReply(SourceId id, const Result<ReplayReply>& reply, int64_t recv_ns);
  void Feed(Source& source, uint64_t seq, std::span<const std::byte> payload, int64_t recv_ns,
            bool replayed);
  // Turns the losses the sequencer reported during a call into the source's trust.
  static void SettleTrust(Source& source, int64_t now_ns);

  PrefixIndex* index_;
  IngestObserver* observer_;
  SequencerOptions options_;
  std::vector<std::unique_ptr<Source>> sources_;
  // Decoded batches kept for reuse: each message is decoded into one of these
  // (DecodeEventBatchInto), so steady ingest allocates nothing per batch.
  std::vector<std::unique_ptr<Pending>> pool_;
};

// The trust of each instance of `ingestor`'s sources (AddSourceTrust per instance): what a
// capture's answers carry (offline, so never stale).
InstanceTrustMap InstanceTrusts(const Ingestor& ingestor);

// The display name of a source: its instance, plus "/dp<r>" when it has a DP rank label
// ("vllm-0", "vllm-0/dp1"). Used by --dump, --queries `after` and the HTTP /instances view.
std::string SourceDisplayName(const SourceConfig& config);

}  // namespace kvindex

#endif  // KVINDEX_INGEST_INGEST_H_
