// Subscriber: the live path. Many sources on ONE I/O thread: a SUB socket per source (connect, or
// bind with `bind`) and, when the source has a replay endpoint, a DEALER for the replay protocol
// (docs/wire-formats.md "Replay"). Every message goes through an Ingestor (frame checks, decode,
// sequence rules, the index); replay requests the sequence rules make are sent on the DEALER and
// replies are read at once; a replay that stays silent for `replay_timeout` is given up on (a
// `timeout` record is written first when recording, then Ingestor::GiveUp), and the DEALER is
// re-created so late replies cannot be mistaken for the next request's. With a replay endpoint,
// each source first backfills from the publisher's ring. A batch whose blocks are orphans (parent
// unknown) asks the source's ring again (docs/sequence-rules.md "Orphan replay";
// Ingestor::StartOrphanReplay). Optionally every live message, replay reply and observation is
// recorded to a CaptureWriter: the records of one poll cycle are coalesced and reach the kernel
// with one write(2) before the next poll cycle.
//
// A bad message never stops the subscriber: it is counted, logged (rate-limited) and skipped,
// unless `strict` is set (then the first one ends Run() with its Status).
//
// Concurrency (the index's model, docs/architecture.md): the I/O thread running Run() is the
// index's single writer. Other threads may, at any time: query the PrefixIndex directly (it takes
// readers concurrently with its writer), read counters through status() (a snapshot refreshed by
// the I/O thread at least every `status_interval`), hand writer work to the I/O thread with
// Submit() (e.g. HTTP /unregister), and end the run with Stop() (async-signal-safe).
//
// This header names no ZeroMQ type; the implementation uses libzmq through cppzmq.
#ifndef KVINDEX_ZMQ_SUBSCRIBER_H_
#define KVINDEX_ZMQ_SUBSCRIBER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/ingest/sequencer.h"

namespace kvindex {

struct SubscriberOptions {
  int receive_hwm = 100'000;  // ZMQ_RCVHWM of every SUB (and DEALER)
  std::chrono::milliseconds replay_timeout{2000};
  std::chrono::milliseconds reconnect_interval{100};  // ZMQ_RECONNECT_IVL
  // ZMQ_RECONNECT_IVL_MAX: 0 = no backoff, a source is retried every reconnect_interval. A
  // publisher that binds after the subscriber started is then reached within about 100 ms (with
  // a backoff growing to 5 s, its whole first burst of events could be lost before the first
  // successful connect).
  std::chrono::milliseconds reconnect_interval_max{0};
  bool backfill = true;   // ask each source with a replay endpoint for its ring at start
  bool strict = false;    // the first bad message ends Run() with its Status
  uint64_t max_messages = 0;  // stop after this many live messages (all sources); 0 = no limit
  std::chrono::milliseconds status_interval{100};  // how often status() is refreshed
  // A batch with orphans (a block whose parent is unknown) asks its source's ring again, at most
  // once per this interval per source (doubling up to 64x while orphans keep coming back), and
  // never while another replay is outstanding.
  std::chrono::milliseconds orphan_replay_interval{1000};
  // A source silent this long is stale (SourceTrust; checked at every status refresh); 0: never.
  std::chrono::milliseconds stale_after{30'000};
  SequencerOptions sequencer;
};

// Counters of one source: the ingestor's plus the transport's.
struct SubscriberSourceStatus {
  std::string name;  // SourceDisplayName()
  std::string endpoint;
  SourceCounters ingest;
  uint64_t messages = 0;         // live messages received (any shape)
  uint64_t bytes = 0;            // bytes of live messages (all frames)
  uint64_t replay_messages = 0;  // messages received on the DEALER
  uint64_t replay_timeouts = 0;  // replays given up on (timeout, or no replay endpoint)
  uint64_t replay_send_failures = 0;
  uint64_t dealers_recreated = 0;
  uint64_t unsupported = 0;      // payloads of an unsupported format/era (also in malformed)
  uint64_t unrecorded = 0;       // messages the capture refused (larger than a record may be)
  int64_t last_message_ns = 0;   // receive time (realtime ns) of the latest live message; 0: none
  bool backfilling = false;
  bool waiting = false;  // sequences are missing (a hole is open or a replay outstanding)
};

struct SubscriberStatus {
  std::vector<SubscriberSourceStatus> sources;
  uint64_t messages = 0;  // live messages, all sources
  // Receive times (realtime ns) of the first and the latest live message (0: none yet).
  int64_t first_message_ns = 0;
  int64_t last_message_ns = 0;
  uint64_t records_written = 0;
  uint64_t bytes_written = 0;
  bool running = false;
  // Sums over sources.
  SubscriberSourceStatus Total() const;
};

class Subscriber {
 public:
  // `index` may be null (record); `recorder` may be null (no recording). Both must outlive the
  // subscriber. No socket is opened yet.
  static Result<std::unique_ptr<Subscriber>> Create(PrefixIndex* index, CaptureWriter* recorder,
                                                    SubscriberOptions options = {});
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Hands every record the subscriber would write to a capture to `sink` too, encoded
  // (capture_record.h), on the I/O thread, whether or not it records a capture (`subscribe
  // --journal`). `sink` must outlive the subscriber. Call before AddSource().
  void SetRecordSink(CaptureRecordSink* sink);

  // Applies captures (`--warm-from`) through the subscriber's ingestor before any source is
  // added: a source added later whose definition equals one in the captures continues it (same
  // sequence state, so a gap since the capture ended is replayed). Call before AddSource().
  Status WarmFrom(const std::vector<std::string>& capture_paths);

  // Continues sources a loaded snapshot defined in the index (in their index order, with their
  // sequence states): a source added later whose definition equals one of them continues it
  // from its stored watermark (Ingestor::SeedSequence). Call before AddSource().
  Status AdoptSources(std::span<const SourceConfig> configs,
                      std::span<const SourceSeqState> states);

  // Defines a source and opens its sockets. kInvalidArgument for an endpoint ZeroMQ rejects,
  // kUnavailable when it cannot be bound. Call before Run().
  Status AddSource(const SourceConfig& config);

  // Adds sources while Run() runs (HTTP /register, one per DP rank): AddSource() and, with a
  // replay endpoint, the backfill happen on the I/O thread between messages, which then polls the
  // new sockets too. Every socket is opened before any source is defined, so when one cannot be
  // opened (AddSource()'s errors) none is added. Blocks until done; kUnavailable when Run() does
  // not take it within `timeout` (not running). Any thread but the I/O thread.
  Status AddSourceWhileRunning(std::span<const SourceConfig> configs,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Unregisters `instance` while Run() runs (HTTP /unregister): on the I/O thread, between
  // messages, every source of the instance stops being read, its SUB and DEALER are closed (so
  // register/unregister cycles hold no sockets, descriptors or ZeroMQ socket slots) and, with an
  // index, the instance's presence is purged and it is unlisted (PrefixIndex::RemoveInstance).
  // A later AddSourceWhileRunning() of the instance opens new sockets and starts a new source.
  // Returns what the purge removed. kNotFound when no source of the subscriber belongs to
  // `instance` and the index does not list it; kUnavailable when Run() does not take it within
  // `timeout` (not running). Any thread but the I/O thread; `instance` is copied.
  Result<ApplyResult> RemoveInstanceWhileRunning(
      const std::string& instance, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // The I/O loop, on the calling thread, until Stop(), max_messages, or a fatal error (strict
  // mode's first bad message; a capture write failure). Returns Ok on a clean stop.
  Status Run();

  // Ends Run() soon. Any thread; async-signal-safe.
  void Stop();

  // Runs `task` on the I/O thread (the index's writer) during Run(), between messages.
  void Submit(std::function<void(Ingestor&)> task);

  // A snapshot of the counters. Any thread.
  SubscriberStatus status() const;
  // Changes after every change of status() (the I/O thread refreshes it each status interval).
  // Any thread.
  uint64_t status_generation() const;

  // The ingestor (I/O thread only, or before/after Run()).
  Ingestor& ingestor();

 private:
  struct Impl;
  explicit Subscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_ZMQ_SUBSCRIBER_H_
