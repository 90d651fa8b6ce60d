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

#include "nats_link.h"

namespace kvindex {

using nats_internal::Hex64;

namespace {

constexpr const char* kOrdinalHeader = "Kvindex-Ord";

enum class EntryState : uint8_t { kQueued, kInFlight, kAcked };

struct Entry {
  std::string subject;
  std::string msg_id;
  std::vector<std::byte> data;
  EntryState state = EntryState::kQueued;
  bool sent_before = false;
  uint64_t seq = 0;  // the stream sequence acknowledged
  uint64_t key = 0;  // the source key (its subject)
  // The predecessor a record names (record_order.h): the link id and chained link id of its
  // source's batch record kept before it (none before the first). Every record but a definition
  // and a journal-lost note names it (`names`).
  bool names = false;
  std::optional<uint64_t> prev, chained_prev;
  // Grouping (JournalOptions::batch_records), fixed at the first send so that a group sent again
  // has the same id: the leader lists its members' ordinals; a member is sent with its leader.
  bool grouped = false;
  bool member = false;
  std::vector<uint64_t> members;
};

uint32_t Le32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

struct JournalPublisher::Impl {
  JournalOptions options;
  nats_internal::NatsLink link;

  // The ingest thread's own state.
  std::unordered_map<uint32_t, uint64_t> keys;  // capture source id -> source key
  // Records per (source key, type) so far: what makes a definition's and a non-batch record's id
  // unique, also across incarnations of a source (an instance registered again after /unregister
  // has the same definition, so the same key, under a new capture source id).
  std::unordered_map<uint64_t, std::array<uint64_t, 16>> occurrences;
  std::set<uint32_t> lost_sources;  // sources whose records were dropped, not yet marked
  // The link id and chained link id of the latest batch record kept, per capture source id
  // (record_order.h).
  struct LastLink {
    uint64_t link = 0, chained = 0;
  };
  std::unordered_map<uint32_t, LastLink> last_link;
  std::vector<std::byte> note;      // a journal-lost note being built

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Entry> entries;  // kept records, oldest first
  uint64_t front_ordinal = 0;  // the ordinal of entries.front()
  uint64_t next_ordinal = 0;
  size_t next_send = 0;        // index into entries of the first record never sent since reset
  size_t in_flight = 0;
  bool failure = false;        // a record failed: resend after in_flight drains
  bool stop = false;
  bool cycle_ended = false;
  size_t max_payload = size_t{1} << 20;  // the server's, once connected
  uint64_t popped_max_seq = 0;  // the highest sequence of the records acknowledged and popped
  // The latest Cut(): its ordinal and the highest sequence among the records before it that have
  // been acknowledged and popped so far (records after the cut may be acknowledged before
  // WaitCovered() is called, so this is kept from the cut on). No group holds records from both
  // sides of the cut, so that the sequence covering the records before it holds none after it.
  uint64_t cut_ordinal = 0;
  uint64_t cut_max_seq = 0;
  // Sources of records lost when sent (larger than the server takes), for the ingest thread to
  // mark (lost_sources); how many such records so far.
  std::set<uint32_t> lost_at_send_sources;
  uint64_t lost_at_send = 0;
  std::condition_variable popped;  // records left the front
  JournalPublisherStatus counters;
  std::thread thread;

  // Ingest thread.
  // Returns false when the record was dropped (counted lost).
  bool Keep(uint64_t key, std::string msg_id, std::span<const std::byte> record, bool may_drop,
            bool names = false, std::optional<uint64_t> prev = std::nullopt,
            std::optional<uint64_t> chained_prev = std::nullopt);
  void MarkLosses();
  // Publishing thread.
  void Loop();
  void SendSome(std::unique_lock<std::mutex>& lock);
  // Under mutex: makes entries[index] (queued, never grouped) a group's leader with the records
  // that can join it.
  void FormGroup(size_t index);
  // Under mutex: calls f(entry) for the leader at `leader_ordinal` and each of its members.
  template <typename F>
  void ForGroup(uint64_t leader_ordinal, F&& f);
  // nats.c's thread.
  void OnAck(natsMsg* msg, jsPubAck* ack, jsPubAckErr* error);
  void PopAcked();  // under mutex
};

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

JournalCut JournalPublisher::Cut() {
  Impl& m = *impl_;
  // A record dropped before the cut is in the state taken with it: its source's journal-lost note
  // goes before the cut too, or a replica starting after the cut would take the note for a loss
  // of its own.
  {
    std::lock_guard lock(m.mutex);
    m.lost_sources.merge(m.lost_at_send_sources);
  }
  if (!m.lost_sources.empty()) m.MarkLosses();
  JournalCut cut;
  for (const auto& [source, key] : m.keys) {
    if (cut.source_keys.size() <= source) cut.source_keys.resize(source + 1, 0);
    cut.source_keys[source] = key;
  }
  for (const auto& [source, last] : m.last_link) {
    if (cut.last_links.size() <= source) cut.last_links.resize(source + 1);
    cut.last_links[source] = JournalLink{last.link, last.chained};
  }
  std::lock_guard lock(m.mutex);
  cut.ordinal = m.next_ordinal;
  // Every record popped so far precedes the cut; the ones popped from now on count while their
  // ordinal is below it.
  m.cut_ordinal = cut.ordinal;
  m.cut_max_seq = m.popped_max_seq;
  cut.resent = m.counters.resent;
  cut.lost_at_send = m.lost_at_send;
  return cut;
}

Result<uint64_t> JournalPublisher::WaitCovered(const JournalCut& cut,
                                               std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  std::unique_lock lock(m.mutex);
  if (m.cut_ordinal != cut.ordinal) {
    return Status::Unavailable("journal: a later cut was taken since this one");
  }
  const bool done = m.popped.wait_for(lock, wait, [&m, &cut] {
    return m.stop || m.front_ordinal >= cut.ordinal;
  });
  const uint64_t covered = m.cut_max_seq;
  if (!done || m.front_ordinal < cut.ordinal) {
    return Status::Timeout("journal: the records before the snapshot were not acknowledged in " +
                           std::to_string(wait.count()) + " ms");
  }
  if (m.counters.resent != cut.resent) {
    return Status::Unavailable("journal: records were sent again across the snapshot's cut");
  }
  if (m.lost_at_send != cut.lost_at_send) {
    // Their journal-lost note comes after the cut, where a replica starting there would take it
    // for a loss of its own.
    return Status::Unavailable("journal: records before the snapshot's cut were lost when sent");
  }
  return covered;
}

JournalPublisherStatus JournalPublisher::status() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->counters;
}

}  // namespace kvindex
