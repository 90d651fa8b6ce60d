// The event journal (docs/scale-out.md): every record a capture would hold, published to a NATS
// JetStream stream so that replicas can rebuild the index without an engine connection. A journal
// message body is one capture record (files/capture_record.h), or several of the same source one
// after the other (JournalOptions::batch_records); its subject names the source
// (`<stream>.src.<16 hex digits>`, a hash of the source's definition, the same on every ingester)
// and its `Nats-Msg-Id` is that source identity plus what identifies the record (for a live batch:
// its sequence and a hash of its frames), so two ingesters on the same engines put each batch into
// the stream once within the stream's duplicate window.
//
// JournalPublisher is a CaptureRecordSink: the ingest thread hands it records (never blocking, no
// system call), a thread of its own publishes them asynchronously in order with a bounded number
// in flight, keeps every record until JetStream acknowledged it and sends the unacknowledged ones
// again after a failure. While NATS is unreachable records wait in a buffer of at most
// `buffer_bytes`; a record that does not fit is dropped and counted (records and bytes), and the
// source it belonged to is marked in the journal when publishing resumes (a `journal-lost` note),
// so a replica gives up on that hole instead of waiting for it.
//
// JournalReader reads a stream in order from a stream sequence with an ordered consumer.
//
// This header names no nats.c type; the implementation uses libnats.
#ifndef KVINDEX_NATS_JOURNAL_H_
#define KVINDEX_NATS_JOURNAL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"

namespace kvindex {

// The note a publisher puts into the journal for a source whose records it had to drop.
inline constexpr std::string_view kJournalLostNote = "journal-lost";

struct JournalOptions {
  // nats://HOST:PORT URLs (ParseJournalServers()).
  std::vector<std::string> servers;
  std::string stream = "kvindex";
  // Publisher: the most bytes of records held (not yet acknowledged) before records are dropped.
  size_t buffer_bytes = size_t{256} << 20;
  // Publisher: the most messages published and not yet acknowledged at once.
  size_t max_in_flight = 4096;
  // Publisher: the most records in one message. Records of the same source waiting to be sent
  // together go in one message, in order (its body is their bytes one after the other; its id the
  // first record's with "+<more>"), which divides JetStream's cost per message. Two ingesters of an
  // HA pair may then group the same batch differently and both store it: a replica applies it once.
  size_t batch_records = 1;
  // Publisher: how long an acknowledgement is waited for before the record is sent again.
  std::chrono::milliseconds ack_wait{2000};
  // Stream creation (when the stream is missing): replicas (1 or 3 in a cluster) and the
  // duplicate window.
  int stream_replicas = 1;
  std::chrono::seconds duplicate_window{120};
  // Stream creation: retention limits (0 = none). JetStream drops the oldest records beyond them.
  std::chrono::seconds max_age{0};
  int64_t max_bytes = 0;
};

// Parses `nats://HOST:PORT[,HOST:PORT...]` (the scheme may be left off after the first). Returns
// one nats://host:port URL per server. kInvalidArgument naming `flag` for any other shape.
Result<std::vector<std::string>> ParseJournalServers(std::string_view text, std::string_view flag);

// Stream names are NATS subject tokens: letters, digits, '-' and '_' only. kInvalidArgument.
Status CheckJournalStreamName(std::string_view name, std::string_view flag);

// Releases the NATS client library's global state and waits (up to 2 s) for its threads to end.
// Call once at the end of the process, after every publisher and reader is destroyed.
void CloseJournalLibrary();

struct JournalPublisherStatus {
  bool connected = false;
  bool stream_ready = false;        // the stream exists (found or created)
  // The stream's last sequence when this publisher first found or created it, before it sent
  // anything (0: the stream was empty); valid once stream_start_known.
  bool stream_start_known = false;
  uint64_t stream_start_seq = 0;
  uint64_t records_accepted = 0;    // handed over and kept
  uint64_t records_acked = 0;       // acknowledged by JetStream (duplicates included)
  uint64_t messages_acked = 0;      // the messages that carried them (--journal-batch)
  uint64_t duplicates = 0;          // acknowledged as duplicates (another ingester had them)
  uint64_t records_pending = 0;     // kept, not acknowledged yet
  uint64_t bytes_pending = 0;
  uint64_t last_acked_seq = 0;      // the highest stream sequence acknowledged
  uint64_t resent = 0;              // records sent again after a failure
  uint64_t lost_records = 0;        // dropped: the buffer was full
  uint64_t lost_bytes = 0;
  std::string last_error;           // the latest failure, for logs ("" = none)
};

// A batch record's link id and chained link id (ingest/record_order.h): what the next batch
// record of its source names as its predecessor.
struct JournalLink {
  uint64_t link = 0;
  uint64_t chained = 0;
  friend bool operator==(const JournalLink&, const JournalLink&) = default;
};

// A cut through the records a publisher was handed (JournalPublisher::Cut()): what a snapshot of
// the ingester's state taken at the same moment holds.
struct JournalCut {
  uint64_t ordinal = 0;  // records handed over (and kept) before the cut
  uint64_t resent = 0;   // JournalPublisherStatus::resent at the cut
  uint64_t lost_at_send = 0;  // records lost when sent (larger than the server takes) so far
  // The journal key of each capture source id (index = id; 0 = no definition journaled).
  std::vector<uint64_t> source_keys;
  // The link ids of each capture source's last batch record before the cut (index = id; nullopt:
  // none), which the first one after it names.
  std::vector<std::optional<JournalLink>> last_links;
};

class JournalPublisher : public CaptureRecordSink {
 public:
  // Starts the publishing thread; connecting and creating the stream happen there (and are
  // retried), so NATS being down at start delays only the journal. kInvalidArgument for bad
  // options.
  static Result<std::unique_ptr<JournalPublisher>> Start(JournalOptions options);
  ~JournalPublisher() override;  // Close(0)
  JournalPublisher(const JournalPublisher&) = delete;
  JournalPublisher& operator=(const JournalPublisher&) = delete;

  // CaptureRecordSink (the ingest thread): keeps a copy of `record` or counts it lost.
  void Put(std::span<const std::byte> record) override;
  void EndOfCycle() override;

  // Waits up to `drain` (while connected) for every kept record to be acknowledged, then stops
  // the thread and closes the connection. The records still pending are reported by status().
  // Idempotent.
  void Close(std::chrono::milliseconds drain);

  // Any thread.
  JournalPublisherStatus status() const;

  // The ingest thread, between two Put() calls: a cut after every record handed over so far.
  // From here on the publisher tracks the highest stream sequence among the records before it, also
  // while records after it are acknowledged, and groups no record before it with one after it.
  JournalCut Cut();
  // Any thread, for the latest cut: waits up to `wait` until every record before `cut` is
  // acknowledged and returns the highest stream sequence among them, the journal position a state
  // taken at the cut covers. kTimeout when they are not all acknowledged in time, kUnavailable when
  // records were sent again meanwhile (the stream may then hold a later record before an earlier
  // one, so no sequence separates the cut cleanly), records were lost when sent (their
  // journal-lost note follows the cut) or a later cut was taken.
  Result<uint64_t> WaitCovered(const JournalCut& cut, std::chrono::milliseconds wait);

  struct Impl;

 private:
  explicit JournalPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One journal record as read (a message holds one or more).
struct JournalEntry {
  uint64_t stream_seq = 0;  // the message's
  uint32_t record_index = 0;     // the record's place in its message (0: the first)
  bool last_in_message = true;
  uint64_t pending = 0;     // messages in the stream after this one (as the server counted)
  uint64_t source_key = 0;  // from the subject (0: a subject that is not a source's)
  std::span<const std::byte> body;  // the record's bytes; valid until Next()
  CaptureRecordView record;  // views into the reader's current message; valid until Next()
  Status problem;            // not ok: the body is not a capture record (record is empty)
  // The record's predecessor as its publisher named it (record_order.h; nullopt: none): the
  // message's header for the records up to its first batch record, the batch record before it in
  // the message for the others; none for a definition and a journal-lost note.
  std::optional<uint64_t> prev;
};

class JournalReader {
 public:
  // Connects and creates an ordered consumer of every subject of `options.stream` from stream
  // sequence `start_seq` (1 = the start). kUnavailable when no server answers within
  // `connect_wait` (or the stream cannot be served 15 s after that), kNotFound when the stream
  // does not exist.
  static Result<std::unique_ptr<JournalReader>> Open(const JournalOptions& options,
                                                     uint64_t start_seq,
                                                     std::chrono::milliseconds connect_wait);
  ~JournalReader();
  JournalReader(const JournalReader&) = delete;
  JournalReader& operator=(const JournalReader&) = delete;

  // The next record within `wait` (the rest of the current message first, without waiting): true
  // and `entry` filled, false when none arrived. A connection problem is not an error (the
  // consumer resumes after a reconnect).
  bool Next(JournalEntry& entry, std::chrono::milliseconds wait);
  // The stream's last sequence as the server reports it now. kUnavailable while disconnected.
  Result<uint64_t> LastSeq();

  struct Impl;

 private:
  // One attempt; `*reached`: a server answered.
  static Result<std::unique_ptr<JournalReader>> TryOpen(const JournalOptions& options,
                                                        uint64_t start_seq, bool* reached);
  explicit JournalReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_NATS_JOURNAL_H_
