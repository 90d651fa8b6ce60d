// JournalReader (journal.h): an ordered push consumer (nats.c recreates it from the last sequence
// it delivered after a gap, a missed heartbeat or a reconnect) on every subject of the stream,
// read synchronously, one record at a time; each message's metadata gives its stream sequence and
// what is left.
#include <optional>
#include <span>
#include <thread>

#include "kvindex/core/clock.h"
#include "kvindex/ingest/record_order.h"
#include "kvindex/nats/journal.h"

#include "nats_link.h"

namespace kvindex {

struct JournalReader::Impl {
  JournalOptions options;
  nats_internal::NatsLink link;
  natsSubscription* sub = nullptr;
  natsMsg* current = nullptr;  // the message the last entry views
  // The current message: its metadata, body, the next record's offset and index, and the
  // predecessor of its next batch record.
  uint64_t stream_seq = 0;
  uint64_t pending = 0;
  uint64_t source_key = 0;
  std::span<const std::byte> body;
  size_t offset = 0;
  uint32_t index = 0;
  std::optional<uint64_t> prev;
  bool chained = false;  // `prev` is a chained link id (Kvindex-Chained-Prev)

  ~Impl() {
    natsMsg_Destroy(current);
    // The connection is closed first: closing stops its reading thread and closes every
    // subscription, so the destroy that follows unsubscribes nothing. In nats.c 3.4 an
    // unsubscribe on a live connection races the recreation of an ordered consumer after a
    // reconnect: the reading thread went on delivering to the freed subscription, and an explicit
    // Unsubscribe read the consumer name the recreating thread freed. The subscription holds a
    // reference of its own to the connection, so destroying it after the close is safe. The
    // server removes the consumer itself once nobody listens (an ordered consumer is ephemeral).
    link.Close();
    if (sub != nullptr) natsSubscription_Destroy(sub);
  }
};

JournalReader::JournalReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JournalReader::~JournalReader() = default;

Result<std::unique_ptr<JournalReader>> JournalReader::Open(const JournalOptions& options,
                                                           uint64_t start_seq,
                                                           std::chrono::milliseconds connect_wait) {
  if (options.servers.empty()) return Status::InvalidArgument("journal: no NATS server");
  KVINDEX_RETURN_IF_ERROR(CheckJournalStreamName(options.stream, "--journal-stream"));
  // A server that does not answer is retried for `connect_wait`; a server that answers but
  // cannot serve the stream yet (a cluster electing the stream's leader after losing a node)
  // for up to 15 s more.
  const auto start = SteadyClock::now();
  for (;;) {
    bool reached = false;
    Result<std::unique_ptr<JournalReader>> opened = TryOpen(options, start_seq, &reached);
    const auto waited = SteadyClock::now() - start;
    if (opened.ok() || opened.status().code() != StatusCode::kUnavailable ||
        waited >= connect_wait + (reached ? std::chrono::seconds(15) : std::chrono::seconds(0))) {
      return opened;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<std::unique_ptr<JournalReader>> JournalReader::TryOpen(const JournalOptions& options,
                                                              uint64_t start_seq, bool* reached) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // JetStream requests (stream info, consumer creation) time out after 1 s and are retried: after
  // a cluster lost a node, a quick retry is served sooner than one long wait.
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = 1000;
  KVINDEX_RETURN_IF_ERROR(impl->link.Connect(options.servers, false, &js_options));
  *reached = true;
  KVINDEX_RETURN_IF_ERROR(nats_internal::StreamLastSeq(impl->link.js(), options.stream).status());
  const std::string subjects = options.stream + ".>";
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = options.stream.c_str();
  sub_options.Ordered = true;
  if (start_seq > 1) {
    sub_options.Config.DeliverPolicy = js_DeliverByStartSequence;
    sub_options.Config.OptStartSeq = start_seq;
  }
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_SubscribeSync(&impl->sub, impl->link.js(), subjects.c_str(), nullptr,
                                        &sub_options, &err);
  if (s != NATS_OK) {
    impl->sub = nullptr;
    return nats_internal::NatsError(StatusCode::kUnavailable, "subscribe to " + options.stream, s);
  }
  // A replica may be far behind: let the subscription hold a large backlog rather than drop it.
  natsSubscription_SetPendingLimits(impl->sub, 1 << 20, 1 << 30);
  return std::unique_ptr<JournalReader>(new JournalReader(std::move(impl)));
}

bool JournalReader::Next(JournalEntry& entry, std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  if (m.current == nullptr || m.offset >= m.body.size()) {
    natsMsg* msg = nullptr;
    const natsStatus s = natsSubscription_NextMsg(&msg, m.sub, wait.count());
    if (s != NATS_OK) {
      // A timeout, or a problem nats.c recovers from (the ordered consumer is recreated).
      if (s != NATS_TIMEOUT) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return false;
    }
    natsMsg_Destroy(m.current);
    m.current = msg;
    m.stream_seq = 0;
    m.pending = 0;
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      m.stream_seq = meta->Sequence.Stream;
      m.pending = meta->NumPending;
      jsMsgMetaData_Destroy(meta);
    }
    m.source_key = nats_internal::SubjectSourceKey(natsMsg_GetSubject(msg), m.options.stream);
    const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(msg));
    m.body = std::span<const std::byte>(data, static_cast<size_t>(natsMsg_GetDataLength(msg)));
    m.offset = 0;
    m.index = 0;
    m.prev.reset();
    // The chained link id where the ingester wrote it, else the link id (an older ingester). A
    // message naming no predecessor chains its records by chained link ids: the orderer notes
    // both ids of every record, so an older ingester's next message finds its predecessor too.
    const char* prev = nullptr;
    const bool chained_header =
        natsMsgHeader_Get(msg, nats_internal::kChainedPrevHeader, &prev) == NATS_OK &&
        prev != nullptr;
    const bool prev_header =
        chained_header ||
        (natsMsgHeader_Get(msg, nats_internal::kPrevHeader, &prev) == NATS_OK && prev != nullptr);
    m.chained = chained_header || !prev_header;
    if (prev_header) m.prev = nats_internal::ParseHex64(prev);
  }
  entry.stream_seq = m.stream_seq;
  entry.pending = m.pending;
  entry.source_key = m.source_key;
  entry.record_index = m.index++;
  // One record: its length field says where it ends. A length that does not fit makes the rest
  // of the message one bad record.
  const std::span<const std::byte> rest = m.body.subspan(m.offset);
  const size_t length = NextRecordLength(rest);
  entry.body = rest.first(length);
  m.offset += length;
  entry.last_in_message = m.offset >= m.body.size();
  entry.prev.reset();
  entry.problem = ParseCaptureRecord(entry.body, entry.record);
  if (!entry.problem.ok()) {
    entry.record.body = {};
    entry.record.frames.clear();
    return true;
  }
  // The message's header names the predecessor of its records up to its first batch record; each
  // record after a batch record follows that one. A definition and a journal-lost note name none.
  if (const std::optional<uint64_t> link = RecordLinkId(entry.record)) {
    entry.prev = m.prev;
    m.prev = m.chained ? ChainedLinkId(entry.record.type, *link, entry.prev) : *link;
  } else if (entry.record.type != CaptureRecordType::kSourceDefinition &&
             !(entry.record.type == CaptureRecordType::kNote &&
               entry.record.text() == kJournalLostNote)) {
    entry.prev = m.prev;
  }
  return true;
}

Result<uint64_t> JournalReader::LastSeq() {
  return nats_internal::StreamLastSeq(impl_->link.js(), impl_->options.stream);
}

}  // namespace kvindex
