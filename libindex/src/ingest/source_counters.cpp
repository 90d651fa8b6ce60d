#include "kvindex/ingest/source_counters.h"

namespace kvindex {

std::array<SourceCounterField, kSourceCounterCount> SourceCounterFields(
    const SourceCounters& ingest, const TransportCounters& transport) {
  const SequencerCounters& q = ingest.sequence;
  const ApplyResult& index = ingest.index;
  // Keep in step with docs/http-api.md "Per-source counters" (tests/cli/counter_keys.sh checks).
  return {{
      {"received", "Live batches received (good or malformed).", q.received},
      {"replayed", "Replayed batches received.", q.replayed},
      {"applied", "Batches applied to the index.", q.applied},
      {"events", "Events applied.", ingest.events},
      {"duplicates", "Batches ignored as already applied or held.", q.duplicates},
      {"gaps", "Sequence gap episodes.", q.gaps},
      {"recovered", "Batches that filled a gap from a replay.", q.recovered},
      {"lost", "Sequences given up on.", q.lost},
      {"restarts", "Publisher restarts detected.", q.restarts},
      {"malformed", "Payloads that did not decode (live or replayed).", q.malformed},
      {"frame_errors", "Live messages whose frames were not [topic, seq, payload].",
       ingest.frame_errors},
      {"replay_frame_errors", "Replay replies of no known layout.", ingest.replay_frame_errors},
      {"event_errors", "Events that failed alone inside good batches.", ingest.event_errors},
      {"bigram_events", "Stored events whose token ids came as EAGLE bigram pairs.",
       ingest.bigram_events},
      {"token_form_mismatches",
       "Stored events whose token form (bigram pairs or plain) is not the source format's.",
       ingest.token_form_mismatches},
      {"replay_requests", "Replay requests sent.", q.replay_requests},
      {"dropped_held", "Held batches of an old incarnation dropped by a restart.",
       q.dropped_held},
      {"orphans", "Blocks not indexed because their parent was unknown.", index.orphans},
      {"orphan_replays", "Replays requested because a batch had orphans.", q.orphan_replays},
      {"reapplied", "Batches applied again by an orphan replay.", q.reapplied},
      {"corrupt_seqs", "Batches refused: a sequence jump no publisher makes (corrupt frame).",
       q.corrupt_seqs},
      {"late_joins", "Streams first seen past the publisher's first sequence, unfillable.",
       q.late_joins},
      {"late_join_batches", "Batches before a late-joined stream's first one (never seen).",
       q.late_join_batches},
      {"tokenless", "Blocks indexed by engine hash only.", index.tokenless},
      {"unmapped", "Removes naming a hash or key never stored.", index.unmapped},
      {"rejected", "Events not applied (inconsistent shapes).", index.rejected},
      {"dp_rank_mismatches", "Batches whose DP rank differed from the source's label.",
       index.dp_rank_mismatches},
      {"stored", "Presences added.", index.stored},
      {"removed", "Presences removed.", index.removed},
      {"evicted", "Blocks evicted by --max-blocks while applying.", index.evicted},
      {"messages", "Live messages received (any shape).", transport.messages},
      {"bytes", "Bytes of live messages (all frames).", transport.bytes},
      {"replay_messages", "Messages received on the replay socket.", transport.replay_messages},
      {"replay_timeouts", "Replays given up on.", transport.replay_timeouts},
      {"replay_send_failures", "Replay requests that could not be sent.",
       transport.replay_send_failures},
      {"unsupported", "Payloads of an unsupported format or era (also malformed).",
       transport.unsupported},
      {"unrecorded", "Messages the capture refused (larger than a record may be).",
       transport.unrecorded},
  }};
}

}  // namespace kvindex
