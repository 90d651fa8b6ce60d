// Index snapshots in JetStream (docs/scale-out.md, "Snapshots in the journal"): an ingester puts
// a snapshot of its index (docs/snapshot-format.md bytes, any producer) into the stream
// `<journal stream>_SNAP` as chunks of at most 1 MiB on `<snap stream>.<id>.c`, then a manifest
// on `<snap stream>.<id>.m` naming the journal sequence the snapshot covers, each chunk's stream
// sequence, size and XXH3, the whole snapshot's size and XXH3, and the journal key of each of its
// sources. A snapshot without a manifest is incomplete and never read. A replica lists the
// manifests, reads the newest snapshot whose chunks all verify and continues the journal after
// its covered sequence.
//
// This header names no nats.c type; the implementation uses libnats.
#ifndef KVINDEX_NATS_JOURNAL_SNAPSHOT_H_
#define KVINDEX_NATS_JOURNAL_SNAPSHOT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/status.h"
#include "kvindex/nats/journal.h"

namespace kvindex {

// The largest chunk of a snapshot (also bounded by the server's maximum payload).
inline constexpr size_t kJournalSnapshotChunkBytes = size_t{1} << 20;

struct JournalSnapshotChunk {
  uint64_t seq = 0;  // its sequence in the snapshot stream
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of its bytes
};

struct JournalSnapshotManifest {
  uint64_t id = 0;           // the snapshot's creation time (realtime ns): its subjects' token
  uint64_t covered_seq = 0;  // every journal record up to this sequence is in the snapshot
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // of the whole snapshot
  std::vector<JournalSnapshotChunk> chunks;
  // The journal key of each snapshot source, by its position in the snapshot (0 = none known).
  std::vector<uint64_t> source_keys;
  // The link ids of each snapshot source's last batch record before the cut, by its position
  // (nullopt, or a shorter vector: none known). A replica notes them, so the records after the cut
  // that name them need not wait, and the others wait for their predecessors as anywhere else.
  std::vector<std::optional<JournalLink>> last_links;
};

// The manifest as text (lines "kvindex-journal-snapshot 1", "id N", ..., "end") and back.
// Parsing fails kMalformed naming the line for anything else (at most 1,000,000 chunks and
// 65,536 sources; a `last` line for a source position the manifest names, in increasing order).
std::string EncodeJournalSnapshotManifest(const JournalSnapshotManifest& manifest);
Result<JournalSnapshotManifest> ParseJournalSnapshotManifest(std::string_view text);

// The snapshot stream of a journal stream: `<stream>_SNAP`.
std::string JournalSnapshotStream(const std::string& stream);

// The JetStream key-value bucket of the snapshot writer lease: `<stream>_SNAP_WRITER`.
std::string JournalSnapshotWriterBucket(const std::string& stream);

// The writer lease after an attempt to hold it: whether this writer holds it, and who does.
struct JournalSnapshotLease {
  bool held = false;
  std::string holder;  // empty when unknown
};

// Writes snapshot bytes through the sink it is given (false from the sink: stop, the write
// failed).
using JournalSnapshotProducer =
    std::function<Status(const std::function<bool(std::string_view)>& sink)>;

class JournalSnapshotStore {
 public:
  // Connects (retrying for `connect_wait`) and, with `create`, creates the snapshot stream when
  // missing (the journal options' replicas). kUnavailable when no server answers, kNotFound
  // (without `create`) when the stream does not exist.
  static Result<std::unique_ptr<JournalSnapshotStore>> Open(const JournalOptions& options,
                                                            std::chrono::milliseconds connect_wait,
                                                            bool create);
  ~JournalSnapshotStore();
  JournalSnapshotStore(const JournalSnapshotStore&) = delete;
  JournalSnapshotStore& operator=(const JournalSnapshotStore&) = delete;

  // Publishes one snapshot (chunks as `produce` fills them, then the manifest). A failed write
  // removes what it published.
  Result<JournalSnapshotManifest> Write(uint64_t covered_seq, std::vector<uint64_t> source_keys,
                                        std::vector<std::optional<JournalLink>> last_links,
                                        const JournalSnapshotProducer& produce);
  // The manifests in the stream, newest first (highest covered sequence, then latest id). A
  // manifest that does not parse is left out and described in `problems`.
  Result<std::vector<JournalSnapshotManifest>> List(std::vector<std::string>& problems);
  // Reads a snapshot's chunks in order into `feed`, checking each one's subject, size and XXH3
  // and the whole's: kNotFound for a missing chunk, kCorrupt for one that does not verify.
  Status Read(const JournalSnapshotManifest& manifest,
              const std::function<Status(std::string_view)>& feed);
  // Removes all but the newest `keep` snapshots, and the chunks of snapshots that never got a
  // manifest and are older than the newest one kept. Returns how many snapshots were removed.
  Result<size_t> Prune(size_t keep);
  // One writer of snapshots among the ingesters of a journal: takes the lease when it is free
  // (the bucket is created with `ttl` when missing), or renews it when `writer` holds it; an
  // entry not renewed within the TTL expires, so a writer that died hands over.
  Result<JournalSnapshotLease> HoldWriterLease(const std::string& writer,
                                               std::chrono::milliseconds ttl);
  // Gives the lease up at once when `writer` holds it (a clean stop); errors are ignored.
  void ReleaseWriterLease(const std::string& writer);

  struct Impl;

 private:
  explicit JournalSnapshotStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_NATS_JOURNAL_SNAPSHOT_H_
