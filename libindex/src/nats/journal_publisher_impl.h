// JournalPublisher's state, internal to the nats layer: journal_publisher.cpp (the ingest
// thread's Put(), the publishing thread, nats.c's acknowledgements) and journal_cut.cpp (the cut
// a snapshot is taken at) share it.
#ifndef KVINDEX_NATS_JOURNAL_PUBLISHER_IMPL_H_
#define KVINDEX_NATS_JOURNAL_PUBLISHER_IMPL_H_

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvindex/nats/journal.h"
#include "nats_link.h"

namespace kvindex {
namespace journal_internal {

inline constexpr const char* kOrdinalHeader = "Kvindex-Ord";

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

inline uint32_t Le32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace journal_internal

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
  std::deque<journal_internal::Entry> entries;  // kept records, oldest first
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

}  // namespace kvindex

#endif  // KVINDEX_NATS_JOURNAL_PUBLISHER_IMPL_H_
