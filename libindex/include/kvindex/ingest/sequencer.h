// SourceSequencer: the per-source sequence rules of docs/sequence-rules.md, shared by the live
// subscriber and by capture replay, so that applying a capture reproduces exactly the state the
// live index had.
//
// Publishers number their batches 0, 1, 2, ... per incarnation. The rules:
//  - The first batch sets the watermark (the last applied sequence); it is applied, no gap.
//  - seq == watermark + 1 is applied (then any held successors, in order).
//  - seq > watermark + 1 is a gap: the batch is held, a replay from watermark + 1 is requested
//    (at most one outstanding), replayed batches fill the hole in order. When the replay ends
//    (end marker) or the caller gives up (timeout live; a recorded `lost` observation offline),
//    every sequence still missing up to the highest seen is counted `lost` and the held batches
//    are applied.
//  - seq <= watermark is a duplicate and ignored, unless seq is 0 or 1 or more than
//    `restart_distance` (1,000,000) behind: a publisher restart. The source is cleared, held
//    batches of the old incarnation are dropped, and the watermark restarts at seq. One
//    refinement: a re-send of the batch *at* the watermark is always a duplicate (a duplicated
//    batch 1 must not clear the source); a restart shows as seq 0 or 1 *below* the watermark.
//    Every sequence of the old incarnation not applied by then (held, awaited, or a malformed
//    copy waiting for its replay) is counted `lost` (Lost(), before Clear()), so that each
//    sequence a publisher sent ends up applied or lost.
//  - Content decides where it is known: the caller may pass a hash of each batch's payload. A
//    decoded batch at or below the watermark whose sequence was applied recently (the last
//    kRecentHashes, and seqs 0 and 1 of the incarnation) is a duplicate when its hash is the
//    applied one's, whatever the rules above say, and a restart when it differs.
//  - A forward jump of more than `max_forward_jump` past the next expected sequence is a corrupt
//    frame: counted (corrupt_seqs), never applied, and the expected sequence does not move.
//  - A stream first seen past the publisher's first sequence (`first_seq`), with nothing to fill
//    what came before (`count_late_join`: no replay endpoint), is a late join: counted
//    (late_joins, late_join_batches), never silent.
//  - A malformed payload whose frames are intact counts as missing (a gap for its sequence): the
//    replayed copy may decode.
//  - Backfill: StartBackfill() asks for the publisher's whole ring before the first live batch;
//    replayed batches then set the watermark and live batches are held until the ring is drained.
//  - Orphan replay (docs/sequence-rules.md "Orphan replay"): StartOrphanReplay() asks for the
//    publisher's whole ring again when an applied batch had a block whose parent is unknown.
//    Replayed batches at or below the watermark of that moment are re-applied in order
//    (Sink::Reapply; the index's stores and removes are idempotent, so the ring's batches applied
//    again end in the same state, plus the parents that were missing and the children they make
//    indexable); newer ones are applied as usual. Live batches are held meanwhile, so a re-applied
//    batch never overtakes a newer one.
//
// The sequencer is deterministic: the same calls in the same order give the same applies, counts
// and state. It never blocks and never reads a clock: the caller decides when to GiveUp().
//
// Thread safety: one thread at a time (each source has its own sequencer).
#ifndef KVINDEX_INGEST_SEQUENCER_H_
#define KVINDEX_INGEST_SEQUENCER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace kvindex {

struct SequencerCounters {
  uint64_t received = 0;    // live batches seen (good or malformed)
  uint64_t replayed = 0;    // replayed batches seen
  uint64_t applied = 0;     // batches handed to Apply()
  uint64_t duplicates = 0;  // live or replayed batches ignored as already applied or held
  uint64_t gaps = 0;        // gap episodes (a hole opened while none was open)
  uint64_t recovered = 0;   // batches that filled a hole from a replay
  uint64_t lost = 0;        // sequences given up on
  uint64_t restarts = 0;    // publisher restarts detected
  uint64_t malformed = 0;   // payloads that did not decode (live or replayed)
  uint64_t replay_requests = 0;
  uint64_t dropped_held = 0;    // held batches of an old incarnation dropped by a restart (lost)
  uint64_t orphan_replays = 0;  // replays requested because a batch had orphans
  uint64_t reapplied = 0;       // batches applied again by an orphan replay
  uint64_t corrupt_seqs = 0;    // batches refused: a forward jump no publisher makes
  uint64_t late_joins = 0;      // streams first seen past their first sequence, unfillable
  uint64_t late_join_batches = 0;  // batches before those first batches (never seen)
};

struct SequencerOptions {
  uint64_t restart_distance = 1'000'000;
  // Give up on a hole when more than this many batches are held behind it (bounded memory).
  size_t max_held = 100'000;
  // A batch more than this far past the next expected sequence is a corrupt frame. A publisher
  // counts +1 per batch from its first sequence, so a jump this large means more than 4 billion
  // batches missed without a visible restart (about 12 hours at 100,000 batches/s), while a
  // damaged high byte of the sequence frame jumps by 2^32 or more.
  uint64_t max_forward_jump = uint64_t{1} << 32;
  // The publisher's first sequence: 0 (vLLM, SGLang) or 1 (the Mooncake store publisher).
  uint64_t first_seq = 0;
  // Count a stream first seen past first_seq as a late join (false when a replay endpoint can
  // fill what came before).
  bool count_late_join = true;
};

// Batches whose payload hash is kept beside seqs 0 and 1 (SourceSequencer's content rule).
inline constexpr size_t kRecentHashes = 16;

// Sink receives the sequencer's decisions, in order:
//   void Apply(uint64_t seq, Item&& item);      // apply this batch now
//   void Reapply(uint64_t seq, Item&& item);    // apply an already applied batch again (orphan
//                                               // replay; the watermark does not move)
//   void Clear();                                // a restart: clear the source's presence first
//   void RequestReplay(uint64_t from_seq);       // send a replay request (live); offline: ignore
//   void Lost(uint64_t first_seq, uint64_t count);  // these sequences are given up on
template <typename Item>
class SourceSequencer {
 public:
  explicit SourceSequencer(SequencerOptions options = {}) : options_(options) {}

  // Continues from a watermark kept from an earlier run (a snapshot): the next live batch is
  // expected at watermark + 1, as if that batch had just been applied, so that what was missed
  // meanwhile is a gap (replayed where the publisher still holds it, else lost), and a publisher
  // that restarted meanwhile is a restart. Only before the first batch; no-op otherwise.
  void Seed(uint64_t watermark) {
    if (initialized_ || backfilling_) return;
    initialized_ = true;
    SetWatermark(watermark);
    horizon_ = watermark;
  }

  // Requests the publisher's whole ring before any live batch (subscribe/record with a replay
  // endpoint). Live batches are held until the replay ends. Returns false, asking nothing, when
  // the source already has a position (a batch applied, or a state seeded from a snapshot).
  template <typename Sink>
  bool StartBackfill(Sink& sink) {
    if (initialized_) return false;
    backfilling_ = true;
    RequestReplayFrom(0, sink);
    return true;
  }

  // Requests the publisher's whole ring again because an applied batch had orphans: at most one
  // outstanding request per source, so nothing is requested (false) while a replay is
  // outstanding, during backfill, or before the first batch. See the rules above.
  template <typename Sink>
  bool StartOrphanReplay(Sink& sink) {
    if (!initialized_ || backfilling_ || replay_outstanding_) return false;
    orphan_replay_ = true;
    orphan_floor_ = watermark_;
    ++counters_.orphan_replays;
    RequestReplayFrom(0, sink);
    return true;
  }

  // A live batch. `item` nullopt: its payload did not decode (frames intact). `hash`: a hash of
  // its payload bytes (0: unknown, the content rule is not used).
  template <typename Sink>
  void OnLive(uint64_t seq, std::optional<Item> item, Sink& sink, uint64_t hash = 0) {
    ++counters_.received;
    if (initialized_ && IsCorruptJump(seq)) {
      ++counters_.corrupt_seqs;
      return;
    }
    if (!item) ++counters_.malformed;
    if (!initialized_ && !backfilling_) {
      initialized_ = true;
      CountLateJoin(seq);
      if (!item) {
        // Nothing applied yet: the hole is this very batch.
        watermark_ = seq - 1;  // wraps for seq 0; only compared through helpers below
        has_watermark_ = seq > 0;
        horizon_ = seq;
        OpenHole(sink);
        return;
      }
      SetWatermark(seq);
      horizon_ = seq;
      ApplyFirst(seq, std::move(*item), hash, sink);
      return;
    }
    if (initialized_ && AtOrBelowWatermark(seq)) {
      const Verdict verdict = item ? ContentVerdict(seq, hash) : Verdict::kUnknown;
      if (verdict == Verdict::kDifferent || (verdict == Verdict::kUnknown && IsRestart(seq))) {
        Restart(seq, std::move(item), hash, sink);
        return;
      }
      ++counters_.duplicates;
      return;
    }
    horizon_ = std::max(horizon_, seq);
    if (initialized_ && IsNext(seq) && item && !orphan_replay_) {
      ApplyNext(seq, std::move(*item), hash, sink);
      Drain(sink);
      MaybeCloseHole();
      return;
    }
    if (item) {
      if (!held_.emplace(seq, Held{std::move(*item), hash}).second) {
        ++counters_.duplicates;
        return;
      }
    }
    if (!initialized_) return;  // backfilling: held until the ring is drained
    // Held behind an orphan replay: a gap only when something is missing before it.
    if (orphan_replay_ && HeldContiguous()) return;
    OpenHole(sink);
    if (held_.size() > options_.max_held) GiveUp(sink);
  }

  // A replayed batch (a reply to our outstanding request; ignored when none is outstanding).
  // `item` nullopt: it did not decode. `hash` as for OnLive().
  template <typename Sink>
  void OnReplayed(uint64_t seq, std::optional<Item> item, Sink& sink, uint64_t hash = 0) {
    ++counters_.replayed;
    if (!replay_outstanding_) {
      // A late reply to a request already given up on (or of an earlier incarnation).
      ++counters_.duplicates;
      return;
    }
    if (initialized_ && IsCorruptJump(seq)) {
      ++counters_.corrupt_seqs;
      return;
    }
    if (!item) {
      ++counters_.malformed;
      return;
    }
    if (!initialized_ && !held_.empty() && held_.begin()->first < seq) {
      // Backfill, but live batches received meanwhile are older than the ring's oldest (the
      // ring was read after they left it): they are the oldest data there is, so they start the
      // stream, and this batch is handled below like any replayed one.
      StartFromOldestHeld(sink);
    }
    if (!initialized_) {
      // Backfill: the first replayed batch sets the watermark (older ones left the ring).
      initialized_ = true;
      backfilling_ = false;
      SetWatermark(seq);
      horizon_ = std::max(horizon_, seq);
      ApplyFirst(seq, std::move(*item), hash, sink);
      // Live batches held meanwhile that the ring also holds are applied from the ring instead.
      while (!held_.empty() && held_.begin()->first <= seq) {
        held_.erase(held_.begin());
        ++counters_.duplicates;
      }
      Drain(sink);
      return;
    }
    if (AtOrBelowWatermark(seq)) {
      // Applied before the orphan replay began: applied again. (Batches applied since, from
      // this replay or held live batches, are duplicates.)
      if (orphan_replay_ && has_watermark_ && seq <= orphan_floor_) {
        sink.Reapply(seq, std::move(*item));
        ++counters_.reapplied;
        return;
      }
      ++counters_.duplicates;
      return;
    }
    horizon_ = std::max(horizon_, seq);
    if (!IsNext(seq)) {
      // The publisher no longer holds the batches before `seq`: those held (received live) are
      // applied in order, the others are lost.
      while (!held_.empty() && held_.begin()->first < seq) ApplyOldestHeld(sink);
      if (!IsNext(seq)) Lose(NextSeq(), seq - NextSeq(), sink);
    }
    held_.erase(seq);  // a replayed copy supersedes a held live copy of the same batch
    ApplyNext(seq, std::move(*item), hash, sink);
    if (!orphan_replay_ || hole_open_) ++counters_.recovered;
    replay_progress_ = true;
    Drain(sink);
    MaybeCloseHole();
  }

  // The replay's end marker: whatever is still missing will not come, unless the reply could not
  // have held it. A reply asks again from the next missing sequence when it recovered batches but
  // ended before a hole further on, or when that hole was revealed only by batches received after
  // the request was sent (the ring may have been read before the hole's batch was published: a
  // backfill that raced the first live batches). Otherwise it gives up. Each hole is asked for at
  // most once more: the new request is sent after the batches that revealed it.
  template <typename Sink>
  void OnReplayEnd(Sink& sink) {
    replay_outstanding_ = false;
    if (orphan_replay_) {
      // The ring has been applied again: go on with the live batches held meanwhile, and ask for
      // whatever is still missing like any gap.
      orphan_replay_ = false;
      replay_progress_ = false;
      Drain(sink);
      MaybeCloseHole();
      if (!held_.empty() || HorizonAhead()) OpenHole(sink);
      return;
    }
    const bool progress = replay_progress_;
    replay_progress_ = false;
    const bool unseen_at_request = NextSeq() >= request_unseen_;
    if (initialized_ && (progress || unseen_at_request) && (!held_.empty() || HorizonAhead())) {
      RequestReplayFrom(NextSeq(), sink);
      return;
    }
    GiveUp(sink);
  }

  // Gives up on every missing sequence up to the highest seen (live: the replay timeout; offline:
  // a recorded `lost` observation) and applies what is held. A no-op when nothing is missing.
  template <typename Sink>
  void GiveUp(Sink& sink) {
    replay_outstanding_ = false;
    orphan_replay_ = false;
    hole_open_ = false;
    if (!initialized_) {
      // A backfill that ended (empty ring) or was given up on (no reply): the first held live
      // batch sets the watermark, as a first live batch would have; holes behind it are gaps.
      if (!backfilling_) return;
      backfilling_ = false;
      if (held_.empty()) return;
      StartFromOldestHeld(sink);
      // Holes among the held batches may be in the ring by now (published after it was read):
      // ask for them like any gap.
      if (!held_.empty()) OpenHole(sink);
      return;
    }
    while (!held_.empty()) ApplyOldestHeld(sink);
    if (HorizonAhead()) Lose(NextSeq(), horizon_ - NextSeq() + 1, sink), SetWatermark(horizon_);
  }

  // The sequences from the next expected one up to `seq` (excluded) are known to be gone: capture
  // replay after a damaged stretch, whose batches the live subscriber had and never asked for
  // again. They are lost now, with no gap and no replay request, so that `seq` follows on.
  // Nothing happens before the first batch, while a hole is open or a replay is outstanding, or
  // when `seq` is not ahead of the next expected (or is a corrupt jump). Returns the count lost.
  template <typename Sink>
  uint64_t LoseBefore(uint64_t seq, Sink& sink) {
    if (!initialized_ || hole_open_ || replay_outstanding_ || orphan_replay_ || !held_.empty()) {
      return 0;
    }
    const uint64_t next = NextSeq();
    if (seq <= next || IsCorruptJump(seq)) return 0;
    Lose(next, seq - next, sink);
    horizon_ = std::max(horizon_, seq - 1);
    return seq - next;
  }

  // True while a replay request is outstanding (the caller runs the timeout).
  bool replay_outstanding() const { return replay_outstanding_; }
  // True while sequences are missing (a hole is open).
  bool waiting() const { return hole_open_ || replay_outstanding_; }
  bool initialized() const { return initialized_; }
  // True while an orphan replay is outstanding.
  bool orphan_replay() const { return orphan_replay_; }
  std::optional<uint64_t> watermark() const {
    return has_watermark_ ? std::optional<uint64_t>(watermark_) : std::nullopt;
  }
  size_t held() const { return held_.size(); }
  const SequencerCounters& counters() const { return counters_; }

 private:
  // The content rule's answer for a batch at or below the watermark.
  enum class Verdict { kUnknown, kSame, kDifferent };
  struct Held {
    Item item;
    uint64_t hash = 0;
  };
  struct Applied {
    uint64_t seq = 0;
    uint64_t hash = 0;  // 0: nothing kept
  };

  Verdict ContentVerdict(uint64_t seq, uint64_t hash) const {
    if (hash == 0) return Verdict::kUnknown;
    const Applied& kept = seq <= 1 ? early_[seq] : recent_[seq % kRecentHashes];
    if (kept.hash == 0 || kept.seq != seq) return Verdict::kUnknown;
    return kept.hash == hash ? Verdict::kSame : Verdict::kDifferent;
  }
  void Remember(uint64_t seq, uint64_t hash) {
    if (hash == 0) return;
    (seq <= 1 ? early_[seq] : recent_[seq % kRecentHashes]) = Applied{seq, hash};
  }
  void ForgetHashes() {
    early_[0] = early_[1] = Applied{};
    for (Applied& a : recent_) a = Applied{};
  }
  bool IsCorruptJump(uint64_t seq) const {
    const uint64_t next = NextSeq();
    return seq > next && seq - next > options_.max_forward_jump;
  }
  void CountLateJoin(uint64_t seq) {
    if (!options_.count_late_join || seq <= options_.first_seq) return;
    ++counters_.late_joins;
    counters_.late_join_batches += seq - options_.first_seq;
  }

  bool IsRestart(uint64_t seq) const {
    if (!has_watermark_ || seq >= watermark_) return false;
    return seq <= 1 || watermark_ - seq > options_.restart_distance;
  }
  bool AtOrBelowWatermark(uint64_t seq) const { return has_watermark_ && seq <= watermark_; }
  uint64_t NextSeq() const { return has_watermark_ ? watermark_ + 1 : 0; }
  bool IsNext(uint64_t seq) const { return seq == NextSeq(); }
  bool HorizonAhead() const { return has_watermark_ ? horizon_ > watermark_ : true; }
  void SetWatermark(uint64_t seq) {
    watermark_ = seq;
    has_watermark_ = true;
  }

  template <typename Sink>
  void ApplyNext(uint64_t seq, Item&& item, uint64_t hash, Sink& sink) {
    SetWatermark(seq);
    ApplyFirst(seq, std::move(item), hash, sink);
  }

  // Applies a batch whose sequence the caller has made the watermark.
  template <typename Sink>
  void ApplyFirst(uint64_t seq, Item&& item, uint64_t hash, Sink& sink) {
    Remember(seq, hash);
    sink.Apply(seq, std::move(item));
    ++counters_.applied;
  }

  // The oldest held batch starts the stream (it sets the watermark); held batches after it follow.
  template <typename Sink>
  void StartFromOldestHeld(Sink& sink) {
    initialized_ = true;
    backfilling_ = false;
    auto first = held_.begin();
    SetWatermark(first->first);
    ApplyFirst(first->first, std::move(first->second.item), first->second.hash, sink);
    held_.erase(first);
    Drain(sink);
  }

  // Applies the oldest held batch; the sequences missing before it are lost.
  template <typename Sink>
  void ApplyOldestHeld(Sink& sink) {
    auto first = held_.begin();
    if (!IsNext(first->first)) Lose(NextSeq(), first->first - NextSeq(), sink);
    ApplyNext(first->first, std::move(first->second.item), first->second.hash, sink);
    held_.erase(first);
  }

  template <typename Sink>
  void Drain(Sink& sink) {
    while (!held_.empty() && IsNext(held_.begin()->first)) {
      auto first = held_.begin();
      ApplyNext(first->first, std::move(first->second.item), first->second.hash, sink);
      held_.erase(first);
    }
  }

  // The held batches follow the watermark without a hole, up to the highest sequence seen.
  bool HeldContiguous() const {
    if (held_.empty()) return !HorizonAhead();
    const uint64_t first = held_.begin()->first;
    const uint64_t last = held_.rbegin()->first;
    return IsNext(first) && last - first + 1 == held_.size() && horizon_ == last;
  }

  void MaybeCloseHole() {
    if (held_.empty() && !HorizonAhead()) hole_open_ = false;
  }

  template <typename Sink>
  void OpenHole(Sink& sink) {
    if (!hole_open_) {
      hole_open_ = true;
      ++counters_.gaps;
    }
    if (!replay_outstanding_) RequestReplayFrom(NextSeq(), sink);
  }

  template <typename Sink>
  void RequestReplayFrom(uint64_t from, Sink& sink) {
    replay_outstanding_ = true;
    replay_progress_ = false;
    // Every sequence up to the highest seen had been published when the request was sent.
    const bool seen = has_watermark_ || counters_.received + counters_.replayed > 0;
    request_unseen_ = seen ? horizon_ + 1 : 0;
    ++counters_.replay_requests;
    sink.RequestReplay(from);
  }

  template <typename Sink>
  void Lose(uint64_t first, uint64_t count, Sink& sink) {
    if (count == 0) return;
    counters_.lost += count;
    sink.Lost(first, count);
    SetWatermark(first + count - 1);
  }

  template <typename Sink>
  void Restart(uint64_t seq, std::optional<Item> item, uint64_t hash, Sink& sink) {
    ++counters_.restarts;
    counters_.dropped_held += held_.size();
    // The old incarnation's sequences still missing or held will never be applied now.
    if (HorizonAhead()) Lose(NextSeq(), horizon_ - NextSeq() + 1, sink);
    held_.clear();
    ForgetHashes();
    replay_outstanding_ = false;
    orphan_replay_ = false;
    hole_open_ = false;
    sink.Clear();
    horizon_ = seq;
    CountLateJoin(seq);
    if (!item) {
      has_watermark_ = seq > 0;
      watermark_ = seq - 1;
      OpenHole(sink);
      return;
    }
    SetWatermark(seq);
    ApplyFirst(seq, std::move(*item), hash, sink);
  }

  SequencerOptions options_;
  bool initialized_ = false;
  bool backfilling_ = false;
  bool has_watermark_ = false;
  uint64_t watermark_ = 0;
  uint64_t horizon_ = 0;  // the highest sequence seen in this incarnation
  bool replay_outstanding_ = false;
  bool replay_progress_ = false;  // the outstanding replay has recovered a batch
  uint64_t request_unseen_ = 0;   // the lowest sequence not yet seen when it was sent
  bool orphan_replay_ = false;    // the outstanding replay was asked for because of orphans
  uint64_t orphan_floor_ = 0;     // the watermark when it was asked for
  bool hole_open_ = false;
  std::map<uint64_t, Held> held_;
  // Payload hashes of applied batches (the content rule): seqs 0 and 1, and the latest ones.
  Applied early_[2];
  Applied recent_[kRecentHashes];
  SequencerCounters counters_;
};

}  // namespace kvindex

#endif  // KVINDEX_INGEST_SEQUENCER_H_
