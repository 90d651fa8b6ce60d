// Subscriber::Impl's poll loop (Subscriber::Run()): one zmq::poll over every source's sockets and
// the wake-up eventfd, a burst of messages read from each readable socket, each recorded and handed
// to the ingestor as it arrives, replays given up on at their deadline, and the records of a poll
// cycle flushed to the capture before poll blocks again.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include <malloc.h>
#include <unistd.h>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"

#include "kvindex/files/capture_record.h"

#include "subscriber_impl.h"

namespace kvindex {
namespace {

// Messages read from one socket before the poll set is looked at again (fairness between sources).
constexpr int kBurst = 512;
// Frames kept per message; the rest are drained and dropped (the message is then a frame error).
constexpr size_t kMaxFrames = 64;
// A backlog worth returning memory after: this many live bytes read while sockets stayed readable,
// or this many batches held behind a hole. Smaller ones are not worth a heap walk.
constexpr uint64_t kTrimAfterBytes = uint64_t{16} << 20;
constexpr size_t kTrimAfterHeld = 10'000;

}  // namespace

Status Subscriber::Run() { return impl_->Run(); }

Status Subscriber::Impl::Run() {
  // Backfill from each publisher's ring before the first live batch.
  if (options.backfill) {
    for (auto& s : sources) {
      if (s && s->dealer) StartBackfill(*s);
    }
  }
  PollSet poll;
  RebuildPollSet(poll);
  sockets_changed = false;
  // Records of one poll cycle are coalesced and flushed at its end (docs/capture-format.md).
  if (recorder != nullptr) recorder->set_coalescing(true);
  SteadyClock::time_point next_publish = SteadyClock::now();
  Publish(true);
  while (!stop_requested.load() && fatal.ok()) {
    // Wait until a socket is readable, the next replay deadline, or the next status refresh.
    const auto now = SteadyClock::now();
    auto wake_at = next_publish;
    for (auto& s : sources) {
      if (s && s->replay_pending) wake_at = std::min(wake_at, s->replay_deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now);
    const long timeout_ms = std::max<long>(0, static_cast<long>(wait.count()) + 1);
    int ready = 0;
    try {
      ready =
          zmq::poll(poll.items.data(), poll.items.size(), std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("subscriber: poll failed: ") + e.what());
    }
    cycle_backlogged = false;
    if (ready > 0) DrainReady(poll);
    ReturnMemoryAfterBacklog();
    const auto after = SteadyClock::now();
    ExpireReplays(after);
    if (tap != nullptr) tap->EndOfCycle();
    if (recorder != nullptr) {
      // The records of this cycle reach the kernel (one write(2)) before poll blocks again.
      Record(recorder->Flush());
      Record(recorder->MaybeSync());
    }
    if (sockets_changed) {
      sockets_changed = false;
      RebuildPollSet(poll);
    }
    if (after >= next_publish) {
      Publish(true);
      next_publish = after + options.status_interval;
    }
  }
  RunTasks();
  if (tap != nullptr) tap->EndOfCycle();
  if (recorder != nullptr) {
    Record(recorder->Flush());
    recorder->set_coalescing(false);
  }
  Publish(false);
  return fatal;
}

void Subscriber::Impl::RebuildPollSet(PollSet& poll) {
  poll.items.clear();
  poll.owners.clear();
  poll.items.push_back(zmq::pollitem_t{nullptr, wake_fd, ZMQ_POLLIN, 0});
  poll.owners.emplace_back(nullptr, false);
  for (auto& s : sources) {
    if (!s) continue;
    poll.items.push_back(zmq::pollitem_t{s->sub->handle(), 0, ZMQ_POLLIN, 0});
    poll.owners.emplace_back(s.get(), false);
    if (s->dealer) {
      poll.items.push_back(zmq::pollitem_t{s->dealer->handle(), 0, ZMQ_POLLIN, 0});
      poll.owners.emplace_back(s.get(), true);
    }
  }
}

void Subscriber::Impl::DrainReady(const PollSet& poll) {
  for (size_t i = 0; i < poll.items.size() && fatal.ok(); ++i) {
    if ((poll.items[i].revents & ZMQ_POLLIN) == 0) continue;
    auto [source, is_dealer] = poll.owners[i];
    if (source == nullptr) {
      uint64_t value = 0;
      (void)!read(wake_fd, &value, sizeof(value));
      RunTasks();
      // A task may have removed sources (unregister): the poll set's pointers to them are stale,
      // so the rest of this poll's results waits for the rebuilt set (sockets stay readable).
      if (sockets_changed) return;
      continue;
    }
    if (is_dealer) {
      if (!sockets_changed) DrainDealer(*source);
    } else {
      DrainSub(*source);
    }
    if (stop_requested.load()) break;
  }
}

void Subscriber::Impl::ReturnMemoryAfterBacklog() {
  size_t held = 0;
  for (auto& s : sources) {
    if (s) held += ingestor.held(s->id);
  }
  backlog_held = std::max(backlog_held, held);
  if (cycle_backlogged || held != 0) return;  // still draining
  if (backlog_bytes >= kTrimAfterBytes || backlog_held >= kTrimAfterHeld) {
    malloc_trim(0);
    ++memory_trims;
    Log(LogLevel::kDebug, "returned free memory to the system after a backlog of " +
                              std::to_string(backlog_bytes >> 20) + " MiB, " +
                              std::to_string(backlog_held) + " batches held");
  }
  backlog_bytes = 0;
  backlog_held = 0;
}

void Subscriber::Impl::ExpireReplays(SteadyClock::time_point now) {
  // Replays that stayed silent too long.
  for (auto& s : sources) {
    if (s && s->replay_pending && now >= s->replay_deadline && fatal.ok()) {
      Log(LogLevel::kInfo, "source '" + s->display + "': replay timed out; giving up");
      GiveUp(*s);
    }
  }
}

bool Subscriber::Impl::ReadMessage(zmq::socket_t& socket, uint64_t* bytes) {
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

void Subscriber::Impl::RecordFrames(CaptureRecordType type, Source& s, int64_t now) {
  if (recorder == nullptr && tap == nullptr) return;
  // A member, not a local array of kMaxFrames: zeroing 1 KiB per message was a visible share of
  // recording 1-event batches.
  record_spans.assign(frames.begin(), frames.end());
  if (tap != nullptr && EncodeCaptureFrames(tap_record, type, s.id, now, record_spans).ok()) {
    tap->Put(tap_record);
  }
  if (recorder == nullptr) return;
  const Status status = recorder->WriteFrames(type, s.id, now, record_spans);
  if (status.code() == StatusCode::kLimitExceeded) {
    ++s.status.unrecorded;
    return;
  }
  Record(status);
}

void Subscriber::Impl::DrainSub(Source& s) {
  for (int i = 0; i < kBurst && fatal.ok(); ++i) {
    uint64_t bytes = 0;
    if (!ReadMessage(*s.sub, &bytes)) return;
    const int64_t now = RealtimeNs();
    ++s.status.messages;
    s.status.bytes += bytes;
    s.status.last_message_ns = now;
    ++live_messages;
    if (first_message_ns == 0) first_message_ns = now;
    last_message_ns = now;
    RecordFrames(CaptureRecordType::kMessage, s, now);
    ingestor.OnMessage(s.id, frames, now);
    FlushRequests();
    backlog_bytes += bytes;
    if (options.max_messages != 0 && live_messages >= options.max_messages) {
      stop_requested.store(true);
      return;
    }
  }
  cycle_backlogged = true;  // a full burst: more may be waiting
}

void Subscriber::Impl::DrainDealer(Source& s) {
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
        s.replay_deadline = SteadyClock::now() + options.replay_timeout;  // progress: keep waiting
      }
    }
    FlushRequests();
  }
}

}  // namespace kvindex
