// Subscriber's public API (creation, warm-up, adding sources, tasks, status) and the status
// snapshot; the I/O thread's work is in the other subscriber_*.cpp files (subscriber_impl.h).
#include "kvindex/zmq/subscriber.h"

#include <algorithm>
#include <future>
#include <utility>

#include <sys/eventfd.h>
#include <unistd.h>

#include "kvindex/core/log.h"
#include "kvindex/ingest/capture_replay.h"

#include "subscriber_impl.h"

namespace kvindex {

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
    b.corrupt_seqs += a.corrupt_seqs;
    b.late_joins += a.late_joins;
    b.late_join_batches += a.late_join_batches;
    t.ingest.frame_errors += s.ingest.frame_errors;
    t.ingest.replay_frame_errors += s.ingest.replay_frame_errors;
    t.ingest.event_errors += s.ingest.event_errors;
    t.ingest.events += s.ingest.events;
    t.ingest.bigram_events += s.ingest.bigram_events;
    t.ingest.token_form_mismatches += s.ingest.token_form_mismatches;
    t.ingest.index += s.ingest.index;
    t.messages += s.messages;
    t.bytes += s.bytes;
    t.replay_messages += s.replay_messages;
    t.replay_timeouts += s.replay_timeouts;
    t.replay_send_failures += s.replay_send_failures;
    t.dealers_recreated += s.dealers_recreated;
    t.unsupported += s.unsupported;
    t.unrecorded += s.unrecorded;
    t.last_message_ns = std::max(t.last_message_ns, s.last_message_ns);
  }
  return t;
}

Subscriber::Impl::Impl(PrefixIndex* index_in, CaptureWriter* recorder_in,
                       SubscriberOptions options_in)
    : index(index_in),
      recorder(recorder_in),
      options(options_in),
      ingestor(index_in, this, options_in.sequencer) {
  // ZeroMQ allows 1,023 sockets per context by default: about 500 sources with a replay endpoint
  // (and fewer while its reaper thread is still closing unregistered ones). Raised to what the
  // library's poller allows, at most 16,384; the process's descriptor limit still applies.
  const int limit = zmq_ctx_get(context.handle(), ZMQ_SOCKET_LIMIT);
  if (limit > 0) (void)zmq_ctx_set(context.handle(), ZMQ_MAX_SOCKETS, std::min(limit, 16384));
}

Subscriber::Impl::~Impl() {
  for (auto& s : sources) {
    if (!s) continue;
    s->sub.reset();
    s->dealer.reset();
  }
  if (wake_fd >= 0) close(wake_fd);
}

void Subscriber::Impl::RunTasks() {
  std::deque<std::function<void(Ingestor&)>> todo;
  {
    std::lock_guard lock(tasks_mutex);
    todo.swap(tasks);
  }
  for (auto& task : todo) task(ingestor);
}

void Subscriber::Impl::Publish(bool running) {
  SubscriberStatus snapshot;
  snapshot.running = running;
  snapshot.messages = live_messages;
  snapshot.first_message_ns = first_message_ns;
  snapshot.last_message_ns = last_message_ns;
  if (recorder != nullptr) {
    snapshot.records_written = recorder->records_written();
    snapshot.bytes_written = recorder->bytes_written();
  }
  const int64_t now = RealtimeNs();
  const int64_t stale_after_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.stale_after).count();
  for (const auto& s : sources) {
    if (!s) continue;
    if (running) ingestor.CheckSilence(s->id, now, stale_after_ns);
    SubscriberSourceStatus st = s->status;
    st.ingest = ingestor.counters(s->id);
    st.waiting = ingestor.waiting(s->id);
    st.backfilling = st.waiting && !st.ingest.sequence.applied;
    snapshot.sources.push_back(std::move(st));
  }
  {
    std::lock_guard lock(status_mutex);
    published = std::move(snapshot);
  }
  status_generation.fetch_add(1);
}

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

void Subscriber::SetRecordSink(CaptureRecordSink* sink) { impl_->tap = sink; }

Status Subscriber::WarmFrom(const std::vector<std::string>& capture_paths) {
  Impl& m = *impl_;
  if (m.added_any) return Status::Internal("subscriber: WarmFrom() after AddSource()");
  if (capture_paths.empty()) return Status::Ok();
  KVINDEX_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(capture_paths));
  CaptureReplayer replayer(m.ingestor);
  // Observations of the warm-up are not live events: mute the recorder and requests meanwhile.
  CaptureWriter* recorder = std::exchange(m.recorder, nullptr);
  CaptureRecordSink* tap = std::exchange(m.tap, nullptr);
  const Status status = replayer.ApplyAll(*reader);
  m.recorder = recorder;
  m.tap = tap;
  m.pending_requests.clear();
  for (auto& s : m.sources) {
    if (s) s->orphans_seen = false;
  }
  m.any_orphans_seen = false;
  for (const auto& problem : reader->problems()) {
    Log(LogLevel::kWarn, "--warm-from " + problem.file + ": byte " +
                             std::to_string(problem.offset) + ": " + problem.status.message());
  }
  for (const CaptureDamageLoss& loss : replayer.stats().damage_losses) {
    const size_t file = std::min(loss.file_index, reader->paths().size() - 1);
    const std::string source = SourceDisplayName(m.ingestor.config(loss.source));
    Log(LogLevel::kWarn, "--warm-from " + reader->paths()[file] + ": byte " +
                             std::to_string(loss.offset) + ": damage: source '" + source +
                             "': " + std::to_string(loss.count) + " batch(es) lost from seq " +
                             std::to_string(loss.first_seq));
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

Status Subscriber::AdoptSources(std::span<const SourceConfig> configs,
                                std::span<const SourceSeqState> states) {
  Impl& m = *impl_;
  if (m.added_any || m.ingestor.source_count() != 0) {
    return Status::Internal("subscriber: AdoptSources() after sources were defined");
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    KVINDEX_ASSIGN_OR_RETURN(SourceId id, m.ingestor.AdoptSource(
                                              configs[i], SourceId{static_cast<uint32_t>(i)}));
    if (i < states.size()) m.ingestor.SeedSequence(id, states[i]);
  }
  m.sources.resize(m.ingestor.source_count());
  return Status::Ok();
}

Status Subscriber::AddSource(const SourceConfig& config) {
  KVINDEX_ASSIGN_OR_RETURN(auto source, impl_->OpenSource(config));
  return impl_->Define(std::move(source));
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
  Submit([this, wanted = std::vector<SourceConfig>(configs.begin(), configs.end()),
          done](Ingestor&) { done->set_value(impl_->AddSources(wanted)); });
  if (result.wait_for(timeout) != std::future_status::ready) {
    return Status::Unavailable("adding source '" +
                               (configs.empty() ? std::string() : SourceDisplayName(configs[0])) +
                               "': the subscriber's I/O loop is not running");
  }
  return result.get();
}

Result<ApplyResult> Subscriber::RemoveInstanceWhileRunning(const std::string& instance,
                                                           std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<Result<ApplyResult>>>();
  std::future<Result<ApplyResult>> result = done->get_future();
  Submit([this, instance, done](Ingestor&) { done->set_value(impl_->RemoveInstance(instance)); });
  if (result.wait_for(timeout) != std::future_status::ready) {
    return Status::Unavailable("unregistering '" + instance +
                               "': the subscriber's I/O loop is not running");
  }
  return result.get();
}

SubscriberStatus Subscriber::status() const {
  std::lock_guard lock(impl_->status_mutex);
  return impl_->published;
}

uint64_t Subscriber::status_generation() const { return impl_->status_generation.load(); }

Ingestor& Subscriber::ingestor() { return impl_->ingestor; }

}  // namespace kvindex
