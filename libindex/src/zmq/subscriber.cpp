#include "kvindex/zmq/subscriber.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <utility>

#include <zmq.hpp>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/log.h"
#include "kvindex/ingest/capture_replay.h"

namespace kvindex {
namespace {

// Messages read from one socket before the poll set is looked at again (fairness between sources).
constexpr int kBurst = 512;
// Frames kept per message; the rest are drained and dropped (the message is then a frame error).
constexpr size_t kMaxFrames = 64;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

using Clock = std::chrono::steady_clock;

// The text CaptureReplayer recognises in a note record: the subscriber asked this source for its
// ring before any live batch (docs/capture-format.md).
constexpr std::string_view kBackfillNote = "backfill";
// ... and asked it for its ring again because a batch had orphans (SPEC §3).
constexpr std::string_view kOrphanReplayNote = "orphan-replay";

}  // namespace

SubscriberSourceStatus SubscriberStatus::Total() const {
  SubscriberSourceStatus t;
  t.name = "total";
  for (const auto& s : sources) {
    const auto& a = s.ingest.sequence;
    auto& b = t.ingest.sequence;
    b.received += a.received;
    b.replayed += a.replayed;
    b.applied += a.applied;
    b.duplicates += a.duplicates;
    b.gaps += a.gaps;
    b.recovered += a.recovered;
    b.lost += a.lost;
    b.restarts += a.restarts;
    b.malformed += a.malformed;
    b.replay_requests += a.replay_requests;
    b.dropped_held += a.dropped_held;
    b.orphan_replays += a.orphan_replays;
    b.reapplied += a.reapplied;
    t.ingest.frame_errors += s.ingest.frame_errors;
    t.ingest.replay_frame_errors += s.ingest.replay_frame_errors;
    t.ingest.event_errors += s.ingest.event_errors;
    t.ingest.events += s.ingest.events;
    t.ingest.index += s.ingest.index;
    t.messages += s.messages;
    t.bytes += s.bytes;
    t.replay_messages += s.replay_messages;
    t.replay_timeouts += s.replay_timeouts;
    t.replay_send_failures += s.replay_send_failures;
    t.dealers_recreated += s.dealers_recreated;
    t.unsupported += s.unsupported;
    t.unrecorded += s.unrecorded;
  }
  return t;
}

struct Subscriber::Impl : IngestObserver {
  struct Source {
    SourceId id;
    SourceConfig config;
    std::string display;
    std::optional<zmq::socket_t> sub;
    std::optional<zmq::socket_t> dealer;
    bool replay_pending = false;  // a request was sent and is not answered to the end
    Clock::time_point replay_deadline;
    uint64_t last_applied = 0;
    bool orphans_seen = false;  // a batch had orphans: consider an orphan replay
    Clock::time_point next_orphan_replay;  // no orphan replay before this (rate limit)
    Clock::time_point last_orphan_replay;
    Clock::duration orphan_backoff{0};
    SubscriberSourceStatus status;
  };

  PrefixIndex* index;
  CaptureWriter* recorder;
  SubscriberOptions options;
  zmq::context_t context{1};
  Ingestor ingestor;
  std::vector<std::unique_ptr<Source>> sources;  // by ingestor SourceId (null: warm-only)
  int wake_fd = -1;
  std::atomic<bool> stop_requested{false};
  bool added_any = false;
  bool sockets_changed = false;  // a DEALER was re-created: rebuild the poll set
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
  std::mutex tasks_mutex;
  std::deque<std::function<void(Ingestor&)>> tasks;

  LogRateLimiter malformed_log{std::chrono::seconds(1)};
  LogRateLimiter gap_log{std::chrono::seconds(1)};
  uint64_t live_messages = 0;
  int64_t first_message_ns = 0;
  int64_t last_message_ns = 0;

  Impl(PrefixIndex* index_in, CaptureWriter* recorder_in, SubscriberOptions options_in)
      : index(index_in),
        recorder(recorder_in),
        options(options_in),
        ingestor(index_in, this, options_in.sequencer) {}

  ~Impl() override {
    for (auto& s : sources) {
      if (!s) continue;
      s->sub.reset();
      s->dealer.reset();
    }
    if (wake_fd >= 0) close(wake_fd);
  }

  Source* Find(SourceId id) {
    if (id.value >= sources.size()) return nullptr;
    return sources[id.value].get();
  }

  void Record(const Status& status) {
    if (!status.ok() && fatal.ok()) {
      fatal = status.WithContext("capture");
    }
  }

  void RecordObservation(CaptureRecordType type, SourceId id, uint64_t a, uint64_t b) {
    if (recorder == nullptr) return;
    Record(recorder->WriteObservation(type, id, RealtimeNs(), a, b));
  }

  // IngestObserver.
  void OnApplied(SourceId id, uint64_t seq, int64_t, const EventBatch&) override {
    if (Source* s = Find(id)) s->last_applied = seq;
  }
  void OnReplayRequest(SourceId id, uint64_t from_seq) override {
    pending_requests.emplace_back(id, from_seq);
  }
  void OnOrphans(SourceId id, uint64_t, uint64_t) override {
    Source* s = Find(id);
    if (s != nullptr && s->dealer) s->orphans_seen = any_orphans_seen = true;
  }

  // Orphans ask for a replay of the source's ring (SPEC §3): at most one outstanding request per
  // source (the sequencer refuses while one is), and at most one orphan replay per
  // `orphan_replay_interval`, doubled (up to 64x) while orphans keep coming back (their parents
  // have probably left the ring: a lost batch orphans the rest of its chains), reset after a
  // quiet spell. The decision depends on the clock, so it is recorded (a note that capture replay
  // follows), right after the record of the message that caused it.
  void StartOrphanReplays() {
    if (!any_orphans_seen) return;
    any_orphans_seen = false;
    for (auto& s : sources) {
      if (!s || !s->orphans_seen) continue;
      const auto now = Clock::now();
      if (now < s->next_orphan_replay) {
        s->orphans_seen = false;  // rate-limited: later orphans ask again
        continue;
      }
      if (!ingestor.StartOrphanReplay(s->id)) {
        // Another replay is outstanding (the orphans may come from its own batches): ask once
        // it has ended.
        any_orphans_seen = true;
        continue;
      }
      s->orphans_seen = false;
      const Clock::duration base = options.orphan_replay_interval;
      const Clock::duration most = 64 * base;
      const bool quiet = now - s->last_orphan_replay > 2 * most;
      s->orphan_backoff = quiet || s->orphan_backoff == Clock::duration::zero()
                              ? base
                              : std::min(2 * s->orphan_backoff, most);
      s->last_orphan_replay = now;
      s->next_orphan_replay = now + s->orphan_backoff;
      if (recorder != nullptr) {
        Record(recorder->WriteText(CaptureRecordType::kNote, s->id, RealtimeNs(),
                                   kOrphanReplayNote));
      }
    }
  }
  void OnGap(SourceId id, uint64_t expected, uint64_t received) override {
    RecordObservation(CaptureRecordType::kGap, id, expected, received);
    uint64_t suppressed = 0;
    if (LogEnabled(LogLevel::kInfo) && gap_log.Allow(&suppressed)) {
      Log(LogLevel::kInfo, "source '" + Name(id) + "': gap: expected seq " +
                               std::to_string(expected) + ", received " + std::to_string(received) +
                               Suppressed(suppressed));
    }
  }
  void OnLost(SourceId id, uint64_t first, uint64_t count) override {
    RecordObservation(CaptureRecordType::kLost, id, first, count);
    Log(LogLevel::kWarn, "source '" + Name(id) + "': " + std::to_string(count) +
                             " batch(es) lost from seq " + std::to_string(first));
  }
  void OnRestart(SourceId id, uint64_t previous, uint64_t seq) override {
    RecordObservation(CaptureRecordType::kRestart, id, previous, seq);
    Log(LogLevel::kWarn, "source '" + Name(id) + "': publisher restart (seq " + std::to_string(seq) +
                             " after " + std::to_string(previous) + "): source cleared");
  }
  void OnMalformed(SourceId id, const Status& why) override {
    Source* s = Find(id);
    if (s != nullptr && why.code() == StatusCode::kUnsupported) ++s->status.unsupported;
    if (recorder != nullptr) {
      Record(recorder->WriteText(CaptureRecordType::kMalformed, id, RealtimeNs(), why.message()));
    }
    if (options.strict && fatal.ok()) {
      fatal = why.WithContext("source '" + Name(id) + "' (--strict)");
      return;
    }
    uint64_t suppressed = 0;
    if (LogEnabled(LogLevel::kWarn) && malformed_log.Allow(&suppressed)) {
      Log(LogLevel::kWarn, "source '" + Name(id) + "': skipped: " + why.message() +
                               Suppressed(suppressed));
    }
  }

  static std::string Suppressed(uint64_t n) {
    return n == 0 ? std::string() : " (" + std::to_string(n) + " similar suppressed)";
  }
  std::string Name(SourceId id) {
    Source* s = Find(id);
    return s != nullptr ? s->display : SourceDisplayName(ingestor.config(id));
  }

  Status OpenDealer(Source& s) {
    try {
      zmq::socket_t dealer(context, zmq::socket_type::dealer);
      dealer.set(zmq::sockopt::linger, 0);
      dealer.set(zmq::sockopt::rcvhwm, options.receive_hwm);
      dealer.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect_interval.count()));
      dealer.set(zmq::sockopt::reconnect_ivl_max,
                 static_cast<int>(options.reconnect_interval_max.count()));
      dealer.connect(s.config.replay_endpoint);
      s.dealer.emplace(std::move(dealer));
    } catch (const zmq::error_t& e) {
      return Status::InvalidArgument("source '" + s.display + "': replay endpoint '" +
                                     s.config.replay_endpoint + "': " + e.what());
    }
    return Status::Ok();
  }

  Status OpenSub(Source& s) {
    try {
      zmq::socket_t sub(context, zmq::socket_type::sub);
      sub.set(zmq::sockopt::linger, 0);
      sub.set(zmq::sockopt::rcvhwm, options.receive_hwm);
      sub.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect_interval.count()));
      sub.set(zmq::sockopt::reconnect_ivl_max,
              static_cast<int>(options.reconnect_interval_max.count()));
      sub.set(zmq::sockopt::subscribe, s.config.topic);
      if (s.config.bind) {
        sub.bind(s.config.endpoint);
      } else {
        sub.connect(s.config.endpoint);
      }
      s.sub.emplace(std::move(sub));
    } catch (const zmq::error_t& e) {
      const std::string what = "source '" + s.display + "': " +
                               (s.config.bind ? "cannot bind '" : "cannot connect to '") +
                               s.config.endpoint + "': " + e.what();
      if (e.num() == EADDRINUSE || e.num() == EADDRNOTAVAIL || e.num() == EACCES) {
        return Status::Unavailable(what);
      }
      return Status::InvalidArgument(what);
    }
    return Status::Ok();
  }

  // A new source's sockets, opened before anything defines it (ingestor, index, capture): a
  // source whose endpoint cannot be opened leaves no trace (HTTP /register is all or nothing).
  Result<std::unique_ptr<Source>> OpenSource(const SourceConfig& config) {
    auto source = std::make_unique<Source>();
    source->config = config;
    source->display = SourceDisplayName(config);
    source->status.name = source->display;
    source->status.endpoint = config.endpoint;
    KVINDEX_RETURN_IF_ERROR(OpenSub(*source));
    if (!config.replay_endpoint.empty()) KVINDEX_RETURN_IF_ERROR(OpenDealer(*source));
    return source;
  }

  // Defines an opened source: continues a warmed source with the same definition, else adds it.
  Status Define(std::unique_ptr<Source> source) {
    added_any = true;
    std::optional<SourceId> id;
    const std::string json = SourceConfigToJson(source->config);
    for (size_t i = 0; i < ingestor.source_count(); ++i) {
      if (i < sources.size() && sources[i]) continue;
      if (SourceConfigToJson(ingestor.config(SourceId{static_cast<uint32_t>(i)})) == json) {
        id = SourceId{static_cast<uint32_t>(i)};
        break;
      }
    }
    if (!id) {
      KVINDEX_ASSIGN_OR_RETURN(SourceId added, ingestor.AddSource(source->config));
      id = added;
    }
    source->id = *id;
    if (recorder != nullptr) {
      KVINDEX_RETURN_IF_ERROR(recorder->WriteSourceDefinition(*id, json, RealtimeNs()));
    }
    if (sources.size() <= id->value) sources.resize(id->value + 1);
    sources[id->value] = std::move(source);
    return Status::Ok();
  }

  // Sends the requests the ingestor made; a source that cannot be asked gives up at once (its
  // `timeout` record first, so a replay of the capture gives up at the same point).
  void FlushRequests() {
    StartOrphanReplays();
    while (!pending_requests.empty()) {
      auto requests = std::move(pending_requests);
      pending_requests.clear();
      for (const auto& [id, from] : requests) {
        Source* s = Find(id);
        bool sent = false;
        if (s != nullptr && s->dealer) {
          const std::vector<Frame> request = BuildReplayRequest(from);
          try {
            auto r1 = s->dealer->send(zmq::buffer(request[0].data(), request[0].size()),
                                      zmq::send_flags::sndmore | zmq::send_flags::dontwait);
            auto r2 = r1 ? s->dealer->send(zmq::buffer(request[1].data(), request[1].size()),
                                           zmq::send_flags::dontwait)
                         : zmq::send_result_t{};
            sent = r1.has_value() && r2.has_value();
          } catch (const zmq::error_t&) {
            sent = false;
          }
          if (!sent) ++s->status.replay_send_failures;
        }
        if (sent) {
          s->replay_pending = true;
          s->replay_deadline = Clock::now() + options.replay_timeout;
          continue;
        }
        if (s == nullptr) continue;  // a warm-only source: nothing to ask (offline semantics)
        GiveUp(*s);
      }
    }
  }

  void GiveUp(Source& s) {
    ++s.status.replay_timeouts;
    s.replay_pending = false;
    RecordObservation(CaptureRecordType::kTimeout, s.id, s.last_applied, 0);
    ingestor.GiveUp(s.id);
    if (s.dealer) {
      // Late replies to the abandoned request must not answer the next one.
      s.dealer.reset();
      ++s.status.dealers_recreated;
      sockets_changed = true;
      Record(OpenDealer(s));
    }
    FlushRequests();
  }

  // Reads one multipart message from `socket` without blocking into `frames`. False when none.
  bool ReadMessage(zmq::socket_t& socket, uint64_t* bytes) {
    size_t count = 0;
    bool more = true;
    bool first = true;
    while (more) {
      zmq::recv_result_t r;
      try {
        r = socket.recv(part, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
      } catch (const zmq::error_t&) {
        return false;
      }
      if (!r) return false;
      first = false;
      *bytes += part.size();
      if (count < kMaxFrames) {
        if (frames.size() <= count) frames.emplace_back();
        const auto* data = static_cast<const std::byte*>(part.data());
        frames[count].assign(data, data + part.size());
        ++count;
      }
      more = part.more();
    }
    frames.resize(count);
    return true;
  }

  void RecordFrames(CaptureRecordType type, Source& s, int64_t now) {
    if (recorder == nullptr) return;
    // A member, not a local array of kMaxFrames: zeroing 1 KiB per message was a visible share of
    // recording 1-event batches.
    record_spans.assign(frames.begin(), frames.end());
    const Status status = recorder->WriteFrames(type, s.id, now, record_spans);
    if (status.code() == StatusCode::kLimitExceeded) {
      ++s.status.unrecorded;
      return;
    }
    Record(status);
  }

  void DrainSub(Source& s) {
    for (int i = 0; i < kBurst && fatal.ok(); ++i) {
      uint64_t bytes = 0;
      if (!ReadMessage(*s.sub, &bytes)) return;
      const int64_t now = RealtimeNs();
      ++s.status.messages;
      s.status.bytes += bytes;
      ++live_messages;
      if (first_message_ns == 0) first_message_ns = now;
      last_message_ns = now;
      RecordFrames(CaptureRecordType::kMessage, s, now);
      ingestor.OnMessage(s.id, frames, now);
      FlushRequests();
      if (options.max_messages != 0 && live_messages >= options.max_messages) {
        stop_requested.store(true);
        return;
      }
    }
  }

  void DrainDealer(Source& s) {
    for (int i = 0; i < 16 * kBurst && fatal.ok() && s.dealer; ++i) {
      uint64_t bytes = 0;
      if (!ReadMessage(*s.dealer, &bytes)) return;
      const int64_t now = RealtimeNs();
      ++s.status.replay_messages;
      RecordFrames(CaptureRecordType::kReplayed, s, now);
      ingestor.OnReplayReply(s.id, frames, now);
      if (s.replay_pending) {
        if (!ingestor.replay_outstanding(s.id)) {
          s.replay_pending = false;  // the end marker (or the hole filled and closed)
        } else {
          s.replay_deadline = Clock::now() + options.replay_timeout;  // progress: keep waiting
        }
      }
      FlushRequests();
    }
  }

  void RunTasks() {
    std::deque<std::function<void(Ingestor&)>> todo;
    {
      std::lock_guard lock(tasks_mutex);
      todo.swap(tasks);
    }
    for (auto& task : todo) task(ingestor);
  }

  void Publish(bool running) {
    SubscriberStatus snapshot;
    snapshot.running = running;
    snapshot.messages = live_messages;
    snapshot.first_message_ns = first_message_ns;
    snapshot.last_message_ns = last_message_ns;
    if (recorder != nullptr) {
      snapshot.records_written = recorder->records_written();
      snapshot.bytes_written = recorder->bytes_written();
    }
    for (const auto& s : sources) {
      if (!s) continue;
      SubscriberSourceStatus st = s->status;
      st.ingest = ingestor.counters(s->id);
      st.waiting = ingestor.waiting(s->id);
      st.backfilling = st.waiting && !st.ingest.sequence.applied;
      snapshot.sources.push_back(std::move(st));
    }
    std::lock_guard lock(status_mutex);
    published = std::move(snapshot);
  }
};

Subscriber::Subscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Subscriber::~Subscriber() = default;

Result<std::unique_ptr<Subscriber>> Subscriber::Create(PrefixIndex* index, CaptureWriter* recorder,
                                                       SubscriberOptions options) {
  auto impl = std::make_unique<Impl>(index, recorder, options);
  impl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake_fd < 0) return Status::IoError("subscriber: eventfd failed");
  impl->context.set(zmq::ctxopt::blocky, false);
  return std::unique_ptr<Subscriber>(new Subscriber(std::move(impl)));
}

Status Subscriber::WarmFrom(const std::vector<std::string>& capture_paths) {
  Impl& m = *impl_;
  if (m.added_any) return Status::Internal("subscriber: WarmFrom() after AddSource()");
  if (capture_paths.empty()) return Status::Ok();
  KVINDEX_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(capture_paths));
  CaptureReplayer replayer(m.ingestor);
  // Observations of the warm-up are not live events: mute the recorder and requests meanwhile.
  CaptureWriter* recorder = m.recorder;
  m.recorder = nullptr;
  const Status status = replayer.ApplyAll(*reader);
  m.recorder = recorder;
  m.pending_requests.clear();
  for (auto& s : m.sources) {
    if (s) s->orphans_seen = false;
  }
  m.any_orphans_seen = false;
  for (const auto& problem : reader->problems()) {
    Log(LogLevel::kWarn, "--warm-from " + problem.file + ": byte " +
                             std::to_string(problem.offset) + ": " + problem.status.message());
  }
  // Sources the captures left waiting for a replay give up now (the capture ended).
  for (size_t i = 0; i < m.ingestor.source_count(); ++i) {
    const SourceId id{static_cast<uint32_t>(i)};
    if (m.ingestor.waiting(id)) m.ingestor.GiveUp(id);
  }
  m.pending_requests.clear();
  m.sources.resize(m.ingestor.source_count());
  return status;
}

Status Subscriber::AddSource(const SourceConfig& config) {
  KVINDEX_ASSIGN_OR_RETURN(auto source, impl_->OpenSource(config));
  return impl_->Define(std::move(source));
}

Status Subscriber::Run() {
  Impl& m = *impl_;
  // Backfill from each publisher's ring before the first live batch.
  if (m.options.backfill) {
    for (auto& s : m.sources) {
      if (!s || !s->dealer) continue;
      if (m.recorder != nullptr) {
        m.Record(m.recorder->WriteText(CaptureRecordType::kNote, s->id, RealtimeNs(),
                                       kBackfillNote));
      }
      m.ingestor.StartBackfill(s->id);
      m.FlushRequests();
    }
  }
  std::vector<zmq::pollitem_t> items;
  std::vector<std::pair<Impl::Source*, bool>> owners;  // (source, is_dealer)
  auto rebuild = [&] {
    items.clear();
    owners.clear();
    items.push_back(zmq::pollitem_t{nullptr, m.wake_fd, ZMQ_POLLIN, 0});
    owners.emplace_back(nullptr, false);
    for (auto& s : m.sources) {
      if (!s) continue;
      items.push_back(zmq::pollitem_t{s->sub->handle(), 0, ZMQ_POLLIN, 0});
      owners.emplace_back(s.get(), false);
      if (s->dealer) {
        items.push_back(zmq::pollitem_t{s->dealer->handle(), 0, ZMQ_POLLIN, 0});
        owners.emplace_back(s.get(), true);
      }
    }
  };
  rebuild();
  m.sockets_changed = false;
  // Records of one poll cycle are coalesced and flushed at its end (docs/capture-format.md).
  if (m.recorder != nullptr) m.recorder->set_coalescing(true);
  Clock::time_point next_publish = Clock::now();
  m.Publish(true);
  while (!m.stop_requested.load() && m.fatal.ok()) {
    // Wait until a socket is readable, the next replay deadline, or the next status refresh.
    const auto now = Clock::now();
    auto wake_at = next_publish;
    for (auto& s : m.sources) {
      if (s && s->replay_pending) wake_at = std::min(wake_at, s->replay_deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now);
    const long timeout_ms = std::max<long>(0, static_cast<long>(wait.count()) + 1);
    int ready = 0;
    try {
      ready = zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("subscriber: poll failed: ") + e.what());
    }
    if (ready > 0) {
      for (size_t i = 0; i < items.size() && m.fatal.ok(); ++i) {
        if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
        auto [source, is_dealer] = owners[i];
        if (source == nullptr) {
          uint64_t value = 0;
          (void)!read(m.wake_fd, &value, sizeof(value));
          m.RunTasks();
          continue;
        }
        if (is_dealer) {
          if (!m.sockets_changed) m.DrainDealer(*source);
        } else {
          m.DrainSub(*source);
        }
        if (m.stop_requested.load()) break;
      }
    }
    // Replays that stayed silent too long.
    const auto after = Clock::now();
    for (auto& s : m.sources) {
      if (s && s->replay_pending && after >= s->replay_deadline && m.fatal.ok()) {
        Log(LogLevel::kInfo, "source '" + s->display + "': replay timed out; giving up");
        m.GiveUp(*s);
      }
    }
    if (m.recorder != nullptr) {
      // The records of this cycle reach the kernel (one write(2)) before poll blocks again.
      m.Record(m.recorder->Flush());
      m.Record(m.recorder->MaybeSync());
    }
    if (m.sockets_changed) {
      m.sockets_changed = false;
      rebuild();
    }
    if (after >= next_publish) {
      m.Publish(true);
      next_publish = after + m.options.status_interval;
    }
  }
  m.RunTasks();
  if (m.recorder != nullptr) {
    m.Record(m.recorder->Flush());
    m.recorder->set_coalescing(false);
  }
  m.Publish(false);
  return m.fatal;
}

void Subscriber::Stop() {
  impl_->stop_requested.store(true);
  const uint64_t one = 1;
  (void)!write(impl_->wake_fd, &one, sizeof(one));
}

void Subscriber::Submit(std::function<void(Ingestor&)> task) {
  {
    std::lock_guard lock(impl_->tasks_mutex);
    impl_->tasks.push_back(std::move(task));
  }
  const uint64_t one = 1;
  (void)!write(impl_->wake_fd, &one, sizeof(one));
}

Status Subscriber::AddSourceWhileRunning(std::span<const SourceConfig> configs,
                                         std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  Submit([this, wanted = std::vector<SourceConfig>(configs.begin(), configs.end()), done](Ingestor&) {
    Impl& m = *impl_;
    // Every socket first: one that cannot be opened leaves none of them defined.
    std::vector<std::unique_ptr<Impl::Source>> opened;
    for (const SourceConfig& config : wanted) {
      Result<std::unique_ptr<Impl::Source>> source = m.OpenSource(config);
      if (!source.ok()) {
        done->set_value(source.status());
        return;
      }
      opened.push_back(std::move(*source));
    }
    Status added;
    for (auto& source : opened) {
      added = m.Define(std::move(source));
      if (!added.ok()) break;
    }
    if (added.ok()) {
      m.sockets_changed = true;  // Run() rebuilds its poll list after this cycle
      for (const SourceConfig& config : wanted) {
        const std::string display = SourceDisplayName(config);
        for (auto& s : m.sources) {
          if (!s || s->display != display || s->config.endpoint != config.endpoint) continue;
          if (m.options.backfill && s->dealer) {
            if (m.recorder != nullptr) {
              m.Record(m.recorder->WriteText(CaptureRecordType::kNote, s->id, RealtimeNs(),
                                             kBackfillNote));
            }
            m.ingestor.StartBackfill(s->id);
            m.FlushRequests();
          }
        }
      }
    }
    done->set_value(added);
  });
  if (result.wait_for(timeout) != std::future_status::ready) {
    return Status::Unavailable("adding source '" +
                               (configs.empty() ? std::string() : SourceDisplayName(configs[0])) +
                               "': the subscriber's I/O loop is not running");
  }
  return result.get();
}

SubscriberStatus Subscriber::status() const {
  std::lock_guard lock(impl_->status_mutex);
  return impl_->published;
}

Ingestor& Subscriber::ingestor() { return impl_->ingestor; }

}  // namespace kvindex
