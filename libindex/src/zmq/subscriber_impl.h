// Subscriber::Impl: the state of one Subscriber and the work of its I/O thread (private to the zmq
// layer). Its member functions are defined by concept:
//   subscriber.cpp           the public API: creation, warm-up, adding sources, tasks, status
//   subscriber_sources.cpp   opening a source's sockets and defining the source
//   subscriber_observer.cpp  what the ingestor reports: recorded, logged, replays queued
//   subscriber_replay.cpp    the replay client: requests, backfill, orphan replays, giving up
//   subscriber_loop.cpp      the poll loop: reading messages, recording them, ingesting them
//
// Thread safety: everything is the I/O thread's (the thread running Run(), or the caller before
// and after it) except `published` (under status_mutex), `tasks` (under tasks_mutex),
// `stop_requested` and writes to `wake_fd`, which other threads use through the Subscriber.
#ifndef KVINDEX_ZMQ_SUBSCRIBER_IMPL_H_
#define KVINDEX_ZMQ_SUBSCRIBER_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"
#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex {

struct Subscriber::Impl : IngestObserver {
  struct Source {
    SourceId id;
    SourceConfig config;
    std::string display;
    std::optional<zmq::socket_t> sub;
    std::optional<zmq::socket_t> dealer;
    bool replay_pending = false;  // a request was sent and is not answered to the end
    SteadyClock::time_point replay_deadline;
    uint64_t last_applied = 0;
    bool orphans_seen = false;                   // a batch had orphans: consider an orphan replay
    SteadyClock::time_point next_orphan_replay;  // no orphan replay before this (rate limit)
    SteadyClock::time_point last_orphan_replay;
    SteadyClock::duration orphan_backoff{0};
    SubscriberSourceStatus status;
  };

  // The sockets Run() polls: the wake-up eventfd first, then each source's SUB and DEALER.
  struct PollSet {
    std::vector<zmq::pollitem_t> items;
    std::vector<std::pair<Source*, bool>> owners;  // per item: (source, is_dealer); null: wake_fd
  };

  PrefixIndex* index;
  CaptureWriter* recorder;
  CaptureRecordSink* tap = nullptr;  // SetRecordSink(): every record also goes here
  std::vector<std::byte> tap_record;  // the record being handed to `tap` (capacity kept)
  SubscriberOptions options;
  zmq::context_t context{1};
  Ingestor ingestor;
  std::vector<std::unique_ptr<Source>> sources;  // by ingestor SourceId (null: warm-only/removed)
  // Ingestor sources whose instance was unregistered: never continued by a later Define().
  std::vector<bool> retired;
  int wake_fd = -1;
  std::atomic<bool> stop_requested{false};
  bool added_any = false;
  bool sockets_changed = false;   // a DEALER was re-created: rebuild the poll set
  bool any_orphans_seen = false;  // some source's orphans_seen is set

  // Work the ingestor asked for during a call, done after it returns.
  std::vector<std::pair<SourceId, uint64_t>> pending_requests;
  Status fatal;

  // Scratch frames, reused (capacity kept).
  std::vector<Frame> frames;
  std::vector<FrameView> record_spans;  // views of `frames` for the recorder
  zmq::message_t part;

  mutable std::mutex status_mutex;
  SubscriberStatus published;
  std::atomic<uint64_t> status_generation{1};  // bumped after each change of `published`
  std::mutex tasks_mutex;
  std::deque<std::function<void(Ingestor&)>> tasks;

  LogRateLimiter malformed_log{std::chrono::seconds(1)};
  LogRateLimiter gap_log{std::chrono::seconds(1)};
  // Memory after a backlog (subscriber_loop.cpp, ReturnMemoryAfterBacklog): live bytes read
  // while sockets stayed readable past a burst, and the most batches held meanwhile.
  bool cycle_backlogged = false;  // this poll cycle left a socket with messages unread
  uint64_t backlog_bytes = 0;
  size_t backlog_held = 0;
  uint64_t memory_trims = 0;
  uint64_t live_messages = 0;
  int64_t first_message_ns = 0;
  int64_t last_message_ns = 0;

  // `index` and `recorder` (either may be null) must outlive the Impl.
  Impl(PrefixIndex* index_in, CaptureWriter* recorder_in, SubscriberOptions options_in);
  ~Impl() override;  // closes the sockets, then wake_fd

  // The live source `id`, or null (unknown, or defined only by a warm-up capture).
  Source* Find(SourceId id) {
    if (id.value >= sources.size()) return nullptr;
    return sources[id.value].get();
  }

  // Keeps the first capture write failure as the fatal Status that ends Run().
  void Record(const Status& status) {
    if (!status.ok() && fatal.ok()) {
      fatal = status.WithContext("capture");
    }
  }

  // subscriber.cpp.
  void RunTasks();             // the tasks Submit() queued, in order
  void Publish(bool running);  // refreshes the snapshot status() returns

  // subscriber_sources.cpp.
  // (Re)opens the replay DEALER. kInvalidArgument naming the endpoint when ZeroMQ rejects it.
  Status OpenDealer(Source& s);
  // Opens the SUB. kUnavailable when the endpoint cannot be bound, else kInvalidArgument.
  Status OpenSub(Source& s);
  // A new source's sockets, opened before anything defines it (ingestor, index, capture): a
  // source whose endpoint cannot be opened leaves no trace (HTTP /register is all or nothing).
  Result<std::unique_ptr<Source>> OpenSource(const SourceConfig& config);
  // Defines an opened source: continues a warmed source with the same definition, else adds it.
  Status Define(std::unique_ptr<Source> source);
  // AddSourceWhileRunning() on the I/O thread: opens every source's sockets, then defines them
  // all and starts their backfill. The first failure, with none defined if a socket failed.
  Status AddSources(const std::vector<SourceConfig>& configs);
  // RemoveInstanceWhileRunning() on the I/O thread: closes the sockets of every source of
  // `instance`, retires them, then purges the instance from the index.
  Result<ApplyResult> RemoveInstance(const std::string& instance);

  // subscriber_observer.cpp: IngestObserver.
  void OnApplied(SourceId id, uint64_t seq, int64_t, const EventBatch&) override;
  void OnReplayRequest(SourceId id, uint64_t from_seq) override;
  void OnOrphans(SourceId id, uint64_t, uint64_t) override;
  void OnGap(SourceId id, uint64_t expected, uint64_t received) override;
  void OnLost(SourceId id, uint64_t first, uint64_t count) override;
  void OnRestart(SourceId id, uint64_t previous, uint64_t seq) override;
  void OnMalformed(SourceId id, const Status& why) override;
  void OnLateJoin(SourceId id, uint64_t seq, uint64_t unknown) override;
  // Writes an observation record when recording (to the capture and the record sink).
  void RecordObservation(CaptureRecordType type, SourceId id, uint64_t a, uint64_t b);
  // Writes a text record (a source definition, a note, a malformed reason) the same way.
  void RecordText(CaptureRecordType type, SourceId id, std::string_view text);
  // The display name of source `id` for logs.
  std::string Name(SourceId id);

  // subscriber_replay.cpp.
  // Does the work the ingestor asked for during a call: orphan replays, then replay requests.
  // Inline because it runs after every message and there is rarely anything to do.
  void FlushRequests() {
    if (!any_orphans_seen && pending_requests.empty()) return;
    SendRequests();
  }
  // Starts the orphan replays due (StartOrphanReplays()), then sends the requests the ingestor
  // made; a source that cannot be asked gives up at once.
  void SendRequests();
  // Starts the orphan replays the sources with orphans are due, rate-limited per source.
  void StartOrphanReplays();
  // Asks `s` for its publisher's ring (a `backfill` note when recording), unless it already has a
  // position (a warm start).
  void StartBackfill(Source& s);
  // Gives up on the replay `s` waits for (its `timeout` record first), and re-creates its DEALER
  // so that late replies cannot answer the next request.
  void GiveUp(Source& s);
  // GiveUp() without the new DEALER and the requests it may open (a source being removed).
  void StopWaiting(Source& s);
  // Closes the source's DEALER (unread replies are dropped) and opens a fresh one.
  void RecreateDealer(Source& s);

  // subscriber_loop.cpp.
  Status Run();  // Subscriber::Run()
  void RebuildPollSet(PollSet& poll);
  // Drains every socket poll found readable (and runs the queued tasks on a wake-up).
  void DrainReady(const PollSet& poll);
  // Once a large backlog has drained (sockets read to empty, nothing held), hands the memory it
  // took back to the operating system: libzmq's queues and the held batches were freed to the
  // allocator, which keeps them otherwise.
  void ReturnMemoryAfterBacklog();
  // Gives up on the replays silent past their deadline, as of `now`.
  void ExpireReplays(SteadyClock::time_point now);
  // Reads one multipart message from `socket` without blocking into `frames`, adding its size to
  // `*bytes`. False when none.
  bool ReadMessage(zmq::socket_t& socket, uint64_t* bytes);
  // Records `frames` as one `type` record of `s` received at `now`, when recording.
  void RecordFrames(CaptureRecordType type, Source& s, int64_t now);
  void DrainSub(Source& s);     // up to a burst of live messages
  void DrainDealer(Source& s);  // up to 16 bursts of replay replies
};

}  // namespace kvindex

#endif  // KVINDEX_ZMQ_SUBSCRIBER_IMPL_H_
