// JournalPublisher (journal.h): the ingest thread's Put() keeps each record in an ordered buffer;
// the publishing thread connects, makes sure the stream exists, and publishes the buffer in order
// with js_PublishMsgAsync, at most max_in_flight unacknowledged. nats.c calls OnAck() on its own
// thread for each acknowledgement or failure (a timeout after ack_wait included); acknowledged
// records leave the buffer from its front. After a failure no new record is sent until every
// record in flight is resolved, then every unacknowledged record is sent again from the first, in
// order: JetStream's duplicate window drops the copies of records it had already stored. With
// batch_records above 1, the first send of a record makes it the leader of a group: the queued
// records of its source that follow it (FormGroup()), sent, acknowledged and sent again as one
// message under the leader's ordinal. Each batch record carries its predecessor (record_order.h).
#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvindex/core/clock.h"
#include "kvindex/ingest/record_order.h"
#include "kvindex/nats/journal.h"

#include "journal_publisher_impl.h"
#include "nats_link.h"

namespace kvindex {

using nats_internal::Hex64;
using journal_internal::Entry;
using journal_internal::EntryState;
using journal_internal::kOrdinalHeader;
using journal_internal::Le32;

namespace {

void AckHandler(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  static_cast<JournalPublisher::Impl*>(closure)->OnAck(msg, ack, error);
  natsMsg_Destroy(msg);
}

}  // namespace

Result<std::unique_ptr<JournalPublisher>> JournalPublisher::Start(JournalOptions options) {
  if (options.servers.empty()) return Status::InvalidArgument("journal: no NATS server");
  KVINDEX_RETURN_IF_ERROR(CheckJournalStreamName(options.stream, "--journal-stream"));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  Impl* raw = impl.get();
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = 2000;
  js_options.PublishAsync.MaxPending = static_cast<int64_t>(raw->options.max_in_flight) + 64;
  js_options.PublishAsync.AckHandler = AckHandler;
  js_options.PublishAsync.AckHandlerClosure = raw;
  KVINDEX_RETURN_IF_ERROR(raw->link.Connect(raw->options.servers, /*retry_in_background=*/true,
                                            &js_options));
  raw->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<JournalPublisher>(new JournalPublisher(std::move(impl)));
}

JournalPublisher::JournalPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

JournalPublisher::~JournalPublisher() { Close(std::chrono::milliseconds(0)); }

void JournalPublisher::Put(std::span<const std::byte> record) {
  Impl& m = *impl_;
  if (record.size() < kCaptureRecordHeaderSize) return;
  const auto type = static_cast<CaptureRecordType>(record[4]);
  const uint32_t source = Le32(record.data() + 24);
  const std::span<const std::byte> body = record.subspan(kCaptureRecordHeaderSize);
  const uint64_t hash = XXH3_64bits(body.data(), body.size());
  if (type == CaptureRecordType::kSourceDefinition) {
    // The source's identity: its definition, the same on every ingester of the same engines. A
    // later incarnation's definition gets an id of its own ("-d2", ...), or the duplicate window
    // would drop it.
    m.keys[source] = hash;
    const uint64_t n = ++m.occurrences[hash][static_cast<uint8_t>(type)];
    m.Keep(hash, Hex64(hash) + "-d" + (n == 1 ? std::string() : std::to_string(n)), record,
           /*may_drop=*/false);
    return;
  }
  const auto it = m.keys.find(source);
  const uint64_t key = it == m.keys.end() ? 0 : it->second;
  std::string id = Hex64(key);
  CaptureRecordView view;
  const bool batch = type == CaptureRecordType::kMessage || type == CaptureRecordType::kReplayed;
  const bool parsed = batch && ParseCaptureRecord(record, view).ok();
  // A record names the batch record of its source kept before it, so that a reader can put
  // records the stream holds out of order back in order (an observation or a note as well: a
  // replica must not give up on a replay before a reply the stream holds after it).
  const std::optional<uint64_t> link = parsed ? RecordLinkId(view) : std::nullopt;
  std::optional<uint64_t> prev, chained_prev;
  if (const auto last = m.last_link.find(source); last != m.last_link.end()) {
    prev = last->second.link;
    chained_prev = last->second.chained;
  }
  if (type == CaptureRecordType::kMessage && parsed && view.frames.size() >= 2 &&
      view.frames[1].size() == 8) {
    // A live batch: its publisher's sequence (big-endian) and its bytes, so two ingesters give
    // it the same id and a restarted publisher's reused sequence does not.
    uint64_t seq = 0;
    for (const std::byte b : view.frames[1]) seq = seq << 8 | static_cast<uint8_t>(b);
    id += "-m" + std::to_string(seq) + "-" + Hex64(hash);
  } else {
    const size_t slot = std::min<size_t>(static_cast<uint8_t>(type), 15);
    const uint64_t n = ++m.occurrences[key][slot];
    id += "-t" + std::to_string(slot) + "-" + std::to_string(n) + "-" + Hex64(hash);
  }
  // An instance's removal is never dropped (a replica would keep the instance).
  const bool unregister = type == CaptureRecordType::kNote &&
                          body.size() == kUnregisterNote.size() &&
                          std::memcmp(body.data(), kUnregisterNote.data(), body.size()) == 0;
  const bool kept = m.Keep(key, std::move(id), record, /*may_drop=*/!unregister, /*names=*/true,
                           prev, chained_prev);
  if (kept && link.has_value()) {
    const uint64_t kept_link = link.value_or(0);
    m.last_link[source] = {kept_link, ChainedLinkId(type, kept_link, chained_prev)};
  }
  if (unregister) {
    // The source is retired: a cut no longer names it, so that a replica starting from a snapshot
    // maps its key to a later incarnation.
    m.keys.erase(source);
    m.last_link.erase(source);
  }
}

bool JournalPublisher::Impl::Keep(uint64_t key, std::string msg_id,
                                  std::span<const std::byte> record, bool may_drop, bool names,
                                  std::optional<uint64_t> prev,
                                  std::optional<uint64_t> chained_prev) {
  const uint32_t source = Le32(record.data() + 24);
  {
    std::lock_guard lock(mutex);
    lost_sources.merge(lost_at_send_sources);
    // A record larger than the server takes cannot be journaled at all.
    const bool too_large = record.size() + 512 > max_payload;
    if (too_large || (may_drop && counters.bytes_pending + record.size() > options.buffer_bytes)) {
      ++counters.lost_records;
      counters.lost_bytes += record.size();
      lost_sources.insert(source);
      return false;
    }
  }
  if (!lost_sources.empty()) MarkLosses();
  Entry entry;
  entry.subject = nats_internal::SourceSubject(options.stream, key);
  entry.msg_id = std::move(msg_id);
  entry.data.assign(record.begin(), record.end());
  entry.key = key;
  entry.names = names;
  entry.prev = prev;
  entry.chained_prev = chained_prev;
  std::lock_guard lock(mutex);
  counters.bytes_pending += entry.data.size();
  ++counters.records_pending;
  ++counters.records_accepted;
  entries.push_back(std::move(entry));
  ++next_ordinal;
  return true;
}

// Records were dropped: before the next kept record of any source, each source that lost some
// gets a journal-lost note (never dropped itself), so a replica stops waiting for the hole.
void JournalPublisher::Impl::MarkLosses() {
  const std::set<uint32_t> sources = std::move(lost_sources);
  lost_sources.clear();
  for (const uint32_t source : sources) {
    const auto it = keys.find(source);
    const uint64_t key = it == keys.end() ? 0 : it->second;
    if (!EncodeCaptureText(note, CaptureRecordType::kNote, SourceId{source}, RealtimeNs(),
                           kJournalLostNote)
             .ok()) {
      continue;
    }
    const uint64_t n = ++occurrences[key][static_cast<uint8_t>(CaptureRecordType::kNote)];
    Keep(key, Hex64(key) + "-lost-" + std::to_string(n), note, /*may_drop=*/false);
  }
}

void JournalPublisher::EndOfCycle() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mutex);
    m.cycle_ended = true;
  }
  m.wake.notify_one();
}

void JournalPublisher::Impl::Loop() {
  std::unique_lock lock(mutex);
  while (!stop) {
    lock.unlock();
    const bool up = link.connected();
    bool ready = false;
    std::string error;
    if (up) {
      bool need_stream;
      {
        std::lock_guard guard(mutex);
        need_stream = !counters.stream_ready;
      }
      if (need_stream) {
        const Status made = nats_internal::EnsureStream(link.js(), options);
        if (!made.ok()) error = made.message();
        ready = made.ok();
        bool start_known;
        {
          std::lock_guard guard(mutex);
          start_known = counters.stream_start_known;
        }
        if (ready && !start_known) {
          // What the stream held before this ingester sent anything (the snapshot writer's
          // test of whether its index can stand for the journal).
          const Result<uint64_t> last = nats_internal::StreamLastSeq(link.js(), options.stream);
          if (last.ok()) {
            std::lock_guard guard(mutex);
            counters.stream_start_known = true;
            counters.stream_start_seq = *last;
          } else {
            ready = false;  // asked again on the next round
            error = last.status().message();
          }
        }
      } else {
        ready = true;
      }
    }
    const int64_t payload = up ? natsConnection_GetMaxPayload(link.connection()) : 0;
    lock.lock();
    if (payload > 0) max_payload = static_cast<size_t>(payload);
    counters.connected = up;
    if (ready) counters.stream_ready = true;
    if (!error.empty()) counters.last_error = error;
    if (up && counters.stream_ready) SendSome(lock);
    cycle_ended = false;
    wake.wait_for(lock, std::chrono::milliseconds(up ? 20 : 100),
                  [this] { return stop || cycle_ended; });
  }
}

void JournalPublisher::Impl::SendSome(std::unique_lock<std::mutex>& lock) {
  if (failure) {
    if (in_flight != 0) return;
    // Everything in flight is resolved: send every unacknowledged record again, in order.
    failure = false;
    next_send = 0;
    while (next_send < entries.size() && entries[next_send].state == EntryState::kAcked) {
      ++next_send;
    }
  }
  std::vector<std::byte> body;
  while (!stop && !failure && in_flight < options.max_in_flight && next_send < entries.size()) {
    Entry& entry = entries[next_send];
    // A group's members go with their leader.
    if (entry.state != EntryState::kQueued || entry.member) {
      ++next_send;
      continue;
    }
    const uint64_t ordinal = front_ordinal + next_send;
    if (!entry.grouped) FormGroup(next_send);
    ++in_flight;
    ++next_send;
    // Copied into the message before the lock is released: entries may move meanwhile. A group is
    // its records' bytes one after the other, under its leader's id (the same when sent again).
    const bool single = entry.members.empty();
    if (!single) {
      body = entry.data;
      for (const uint64_t m : entry.members) {
        const Entry& member = entries[m - front_ordinal];
        body.insert(body.end(), member.data.begin(), member.data.end());
      }
    }
    const std::vector<std::byte>& data = single ? entry.data : body;
    ForGroup(ordinal, [this](Entry& e) {
      e.state = EntryState::kInFlight;
      if (e.sent_before) ++counters.resent;
      e.sent_before = true;
    });
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, entry.subject.c_str(), nullptr,
                                  reinterpret_cast<const char*>(data.data()),
                                  static_cast<int>(data.size()));
    const std::string id =
        single ? entry.msg_id : entry.msg_id + "+" + std::to_string(entry.members.size());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", id.c_str());
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, kOrdinalHeader, std::to_string(ordinal).c_str());
    // The predecessor named by the group's first record that names one (none before the source's
    // first batch record), by both ids (a reader that knows only link ids reads the first header):
    // the same for every record up to the group's first batch record; the reader chains the others.
    std::optional<uint64_t> prev, chained_prev;
    ForGroup(ordinal, [&prev, &chained_prev, first = true](Entry& e) mutable {
      if (first && e.names) {
        prev = e.prev;
        chained_prev = e.chained_prev;
        first = false;
      }
    });
    if (s == NATS_OK && prev) {
      s = natsMsgHeader_Set(msg, nats_internal::kPrevHeader, Hex64(*prev).c_str());
    }
    if (s == NATS_OK && chained_prev) {
      s = natsMsgHeader_Set(msg, nats_internal::kChainedPrevHeader, Hex64(*chained_prev).c_str());
    }
    lock.unlock();
    jsPubOptions pub;
    jsPubOptions_Init(&pub);
    pub.MaxWait = options.ack_wait.count();
    if (s == NATS_OK) s = js_PublishMsgAsync(link.js(), &msg, &pub);
    natsMsg_Destroy(msg);  // null when nats.c took it
    lock.lock();
    if (s == NATS_MAX_PAYLOAD) {
      // Larger than the server takes (it lowered its limit): lost, not retried.
      ForGroup(ordinal, [this](Entry& e) {
        ++counters.lost_records;
        counters.lost_bytes += e.data.size();
        e.state = EntryState::kAcked;
        lost_at_send_sources.insert(Le32(e.data.data() + 24));
        ++lost_at_send;
      });
      --in_flight;
      PopAcked();
    } else if (s != NATS_OK) {
      // Not sent: these records and the ones after them go again once in-flight ones resolve.
      counters.last_error = std::string("publish: ") + natsStatus_GetText(s);
      ForGroup(ordinal, [](Entry& e) {
        if (e.state == EntryState::kInFlight) e.state = EntryState::kQueued;
      });
      --in_flight;
      failure = true;
    }
  }
}

void JournalPublisher::Impl::FormGroup(size_t index) {
  Entry& leader = entries[index];
  leader.grouped = true;
  if (options.batch_records <= 1) return;
  // The records of the same source that follow, in order: a record of that source that cannot
  // join (sent before, or too large to fit) ends the group, so the source's order is kept.
  size_t bytes = leader.data.size();
  const size_t limit = max_payload > 1024 ? max_payload - 1024 : max_payload;
  const bool before_barrier = front_ordinal + index < cut_ordinal;
  const size_t scan_end = std::min(entries.size(), index + 1 + 4 * options.batch_records);
  for (size_t j = index + 1; j < scan_end && leader.members.size() + 1 < options.batch_records;
       ++j) {
    Entry& e = entries[j];
    if (e.key != leader.key) continue;
    if (e.state != EntryState::kQueued || e.grouped || bytes + e.data.size() > limit ||
        (before_barrier && front_ordinal + j >= cut_ordinal)) {
      break;
    }
    e.grouped = true;
    e.member = true;
    leader.members.push_back(front_ordinal + j);
    bytes += e.data.size();
  }
}

template <typename F>
void JournalPublisher::Impl::ForGroup(uint64_t leader_ordinal, F&& f) {
  if (leader_ordinal < front_ordinal || leader_ordinal - front_ordinal >= entries.size()) return;
  Entry& leader = entries[leader_ordinal - front_ordinal];
  f(leader);
  for (const uint64_t m : leader.members) {
    if (m >= front_ordinal && m - front_ordinal < entries.size()) f(entries[m - front_ordinal]);
  }
}

void JournalPublisher::Impl::OnAck(natsMsg* msg, jsPubAck* ack, jsPubAckErr* error) {
  const char* value = nullptr;
  if (natsMsgHeader_Get(msg, kOrdinalHeader, &value) != NATS_OK || value == nullptr) return;
  const uint64_t ordinal = std::strtoull(value, nullptr, 10);
  std::lock_guard lock(mutex);
  if (ordinal < front_ordinal || ordinal - front_ordinal >= entries.size()) return;
  Entry& entry = entries[ordinal - front_ordinal];
  if (entry.state != EntryState::kInFlight) return;
  const bool window_was_full = in_flight >= options.max_in_flight;
  --in_flight;
  if (ack != nullptr && error == nullptr) {
    ForGroup(ordinal, [this, ack](Entry& e) {
      e.state = EntryState::kAcked;
      e.seq = ack->Sequence;
      ++counters.records_acked;
      if (ack->Duplicate) ++counters.duplicates;
    });
    ++counters.messages_acked;
    counters.last_acked_seq = std::max(counters.last_acked_seq, ack->Sequence);
    PopAcked();
  } else {
    ForGroup(ordinal, [](Entry& e) { e.state = EntryState::kQueued; });
    failure = true;
    if (error != nullptr) {
      counters.last_error = std::string("acknowledgement: ") +
                            (error->ErrText != nullptr ? error->ErrText
                                                       : natsStatus_GetText(error->Err));
    }
  }
  // The publishing thread is woken only when it can do something now: send again into a window
  // that was full, or resend once nothing is in flight after a failure (a wake-up per
  // acknowledgement cost a context switch each).
  if (window_was_full || (failure && in_flight == 0)) {
    cycle_ended = true;
    wake.notify_one();
  }
}

void JournalPublisher::Impl::PopAcked() {
  bool any = false;
  while (!entries.empty() && entries.front().state == EntryState::kAcked) {
    any = true;
    popped_max_seq = std::max(popped_max_seq, entries.front().seq);
    if (front_ordinal < cut_ordinal) cut_max_seq = std::max(cut_max_seq, entries.front().seq);
    counters.bytes_pending -= entries.front().data.size();
    --counters.records_pending;
    entries.pop_front();
    ++front_ordinal;
    if (next_send > 0) --next_send;
  }
  if (any) popped.notify_all();
}

void JournalPublisher::Close(std::chrono::milliseconds drain) {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  const auto deadline = SteadyClock::now() + drain;
  {
    std::unique_lock lock(m.mutex);
    m.cycle_ended = true;
    m.wake.notify_one();
    // (Not while NATS is unreachable: nothing would be acknowledged.)
    while (!m.entries.empty() && m.counters.connected && SteadyClock::now() < deadline) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      lock.lock();
    }
    m.stop = true;
  }
  m.wake.notify_one();
  m.popped.notify_all();
  m.thread.join();
  m.link.Close();  // no acknowledgement is handled after this
}

JournalPublisherStatus JournalPublisher::status() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

}  // namespace kvindex
