// RecordOrderer: puts each source's batch records back into the order their recorder made them,
// when a carrier may deliver a record after records made later. The event journal is such a
// carrier: after a failure its publisher sends unacknowledged records again, and records sent in
// the meantime may already be in the stream (docs/scale-out.md, "Order within a source").
//
// A batch record (a live batch or a replay reply: kMessage, kReplayed) has a link id,
// RecordLinkId(): a hash of its publisher sequence and payload, the same for the same batch on
// every recorder. With each batch record, the recorder names the link id of the batch record of
// the same source it kept just before (its predecessor; none for its first). The orderer passes
// a batch record on once a record with its predecessor's link id has been passed on (or it names
// none) and holds it otherwise; passing a record on releases the records waiting for it. A record
// that is not a batch record (an observation or a note) has no link id; when it names a
// predecessor (the batch record its recorder kept before it) it waits for it the same way, so
// that a `timeout` is not applied before a reply it follows; when it names none it is passed on at
// once. A source's records that name a predecessor, and its batch records, also wait until its
// definition has been passed on (or Define() was called for it).
//
// RecordLinkId() is the same for a batch received live and again in a replay reply, and for
// every end marker, so a predecessor named by it can be taken for an earlier record: an end
// marker that arrives before the replay reply it ends follows the live copy of that reply's last
// batch. ChainedLinkId() tells them apart: a replay reply's and an end marker's chained link id
// also depends on the chained link id of the record before it. A recorder names predecessors by
// one kind of id or the other; the orderer notes both ids of every record it passes on (the
// chained one computed from the predecessor the record named), so it follows either.
//
// Held records are passed on without their predecessor (oldest first) by ReleaseSource() (the
// recorder dropped records of that source: they will never come), ReleaseAll() (the carrier lost
// records) and when more than `max_held_bytes` are held. After a release, and after Lenient(), the
// source's next batch record is passed on at once also when its predecessor was never seen (it
// may be among the lost records, or before the point where reading started); a batch record whose
// predecessor was passed on ends that leniency. Where reading starts after a point whose records
// are known by their link ids (a snapshot that names them), Seed() notes them instead, and the
// records after that point are put in order like any others.
//
// Thread safety: one thread.
#ifndef KVINDEX_INGEST_RECORD_ORDER_H_
#define KVINDEX_INGEST_RECORD_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kvindex/files/capture.h"

namespace kvindex {

// The length of the capture record at the start of `rest`, where records lie one after the
// other (a journal message of several): its length field when that is at least 4 and fits, else
// all of `rest` (which then does not parse as one record). 0 only for an empty `rest`.
size_t NextRecordLength(std::span<const std::byte> rest);

// The link id of a batch record: kMessage with a sequence frame of 8 bytes, or kReplayed that
// parses as a replay reply or end marker. nullopt for any other record.
std::optional<uint64_t> RecordLinkId(const CaptureRecordView& record);

// The chained link id of a batch record of type `type` whose RecordLinkId() is `link` and whose
// predecessor's chained link id is `prev` (nullopt: none). A live batch's is `link`. A replay
// reply's or end marker's is XXH3-64 of `link` (8 bytes, little-endian) seeded with `prev` (0
// for none) xor kReplayedLinkSeed.
inline constexpr uint64_t kReplayedLinkSeed = 0x7265706c61796564ULL;  // "replayed"
uint64_t ChainedLinkId(CaptureRecordType type, uint64_t link, std::optional<uint64_t> prev);

struct RecordOrderStats {
  uint64_t held = 0;            // batch records held at some point (arrived before their predecessor)
  uint64_t released_early = 0;  // held records passed on without their predecessor
  uint64_t held_now = 0;        // records held now
  uint64_t held_bytes_now = 0;
};

class RecordOrderer {
 public:
  // Receives each record passed on, in order: the carrier position it arrived at, its source key
  // and the record (views valid during the call only; the sink may change the view's fields).
  using Sink = std::function<void(uint64_t position, uint64_t source_key, CaptureRecordView& record)>;

  explicit RecordOrderer(size_t max_held_bytes = size_t{64} << 20)
      : max_held_bytes_(max_held_bytes) {}

  // One record as it arrived: at carrier `position` (increasing), of the source `source_key`,
  // `bytes` the whole record and `record` parsed from them, `prev` the predecessor it names.
  // Calls `sink` for every record now in order (none, this one, or this one and those it
  // released).
  void Add(uint64_t position, uint64_t source_key, std::span<const std::byte> bytes,
           CaptureRecordView& record, std::optional<uint64_t> prev, const Sink& sink);

  // The source's definition was read elsewhere (a snapshot): its batch records need not wait.
  void Define(uint64_t source_key);
  // The source's next batch record is passed on at once, also when its predecessor was never
  // seen (unless a record naming one that was seen comes first).
  void Lenient(uint64_t source_key);
  // The records with these link ids (link or chained) were passed on elsewhere (before a
  // snapshot's cut): records naming them need not wait.
  void Seed(uint64_t source_key, std::span<const uint64_t> links);
  // Passes on every record held for `source_key`, oldest first; Lenient() for it.
  void ReleaseSource(uint64_t source_key, const Sink& sink);
  // Passes on every record held, oldest first; Lenient() for every source, also ones not seen yet.
  void ReleaseAll(const Sink& sink);

  const RecordOrderStats& stats() const { return stats_; }

 private:
  struct Held {
    uint64_t source_key = 0;
    std::vector<std::byte> bytes;
    std::optional<uint64_t> prev;
    bool needs_definition = false;  // waits for the definition, not for a predecessor
  };
  struct Source {
    bool defined = false;
    bool lenient = false;
    std::unordered_set<uint64_t> recent;  // link ids passed on (the newest kRecentLinks)
    std::deque<uint64_t> recent_order;
  };
  static constexpr size_t kRecentLinks = size_t{1} << 14;

  Source& At(uint64_t source_key);
  bool Ready(Source& source, const CaptureRecordView& record, std::optional<uint64_t> prev,
             bool* needs_definition);
  // Passes `record` (which named `prev`) on and then everything waiting for it, in arrival order.
  void Pass(uint64_t position, uint64_t source_key, CaptureRecordView& record,
            std::optional<uint64_t> prev, const Sink& sink);
  void Hold(uint64_t position, uint64_t source_key, std::span<const std::byte> bytes,
            std::optional<uint64_t> prev, bool needs_definition);
  // Removes held record `position` (which must be held) and returns it.
  Held Take(uint64_t position);
  void NoteLink(Source& source, uint64_t link);

  size_t max_held_bytes_;
  bool lenient_default_ = false;  // sources first seen from now on start lenient
  std::unordered_map<uint64_t, Source> sources_;
  std::map<uint64_t, Held> held_;  // by position: oldest first
  // Who waits for what: (source key, predecessor link id) -> held positions.
  std::multimap<std::pair<uint64_t, uint64_t>, uint64_t> waiting_;
  std::multimap<uint64_t, uint64_t> waiting_definition_;  // source key -> held positions
  RecordOrderStats stats_;
};

}  // namespace kvindex

#endif  // KVINDEX_INGEST_RECORD_ORDER_H_
