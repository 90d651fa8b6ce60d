// Snapshots in the journal on the command line (docs/scale-out.md, "Snapshots in the journal"):
// the ingester's thread behind `subscribe --journal ... --snapshot-to-journal S`, and the replica's
// start from the newest snapshot that reads.
#ifndef KVINDEX_TOOLS_JOURNAL_SNAPSHOTS_H_
#define KVINDEX_TOOLS_JOURNAL_SNAPSHOTS_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/nats/journal.h"
#include "kvindex/nats/journal_apply.h"
#include "kvindex/nats/journal_snapshot.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex::cli {

struct JournalSnapshotterStatus {
  uint64_t written = 0;
  uint64_t failed = 0;  // attempts that wrote nothing (logged)
  uint64_t last_covered_seq = 0;
  // This ingester holds the writer lease (one writer among the ingesters of a journal).
  bool writer = false;
};

// Every `interval_s` seconds: takes the index and the sources' sequence states on the
// subscriber's I/O thread at a moment no source waits for a replay, cuts the journal there,
// waits until every record before the cut is acknowledged, and writes the snapshot tagged with
// the highest sequence among them into the journal's snapshot stream, keeping the newest `keep`.
// Of several ingesters of one journal only the one holding the writer lease writes (renewed every
// round, it expires 3 intervals after its holder's last round, at least 10 s); the others stand by.
// An ingester that started empty on a stream that already held records never writes: its index
// lacks what came before it.
class JournalSnapshotter {
 public:
  // `warm`: the index started from earlier state (a snapshot or --warm-from), not empty.
  JournalSnapshotter(JournalOptions options, double interval_s, size_t keep, Subscriber& subscriber,
                     const PrefixIndex& index, JournalPublisher& journal, bool warm);
  ~JournalSnapshotter();
  void Start();
  void Stop();  // a snapshot being written is finished first
  JournalSnapshotterStatus status() const;

 private:
  void Loop();
  Status WriteOne();
  // Opens the snapshot store when needed and takes or renews the writer lease; false: another
  // ingester writes this round (logged when that changes).
  Result<bool> HoldLease();
  JournalOptions options_;
  double interval_s_;
  size_t keep_;
  Subscriber& subscriber_;
  const PrefixIndex& index_;
  JournalPublisher& journal_;
  bool warm_;
  std::string writer_id_;  // this process among the journal's ingesters
  std::unique_ptr<JournalSnapshotStore> store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool announced_ = false;  // the lease's state was logged once
  bool released_ = false;   // Stop() gave the lease up
  JournalSnapshotterStatus status_;
  std::thread thread_;
};

// What a replica started from.
struct ReplicaStart {
  std::string from = "stream";  // or "snapshot"
  uint64_t covered_seq = 0;
  uint64_t snapshot_id = 0;
};

// Loads the newest snapshot of the journal's snapshot stream that reads into `index` (replaced by
// a fresh one created with `options` for each attempt) and starts `applier` from it; a snapshot
// that does not read (incomplete, corrupt, not a snapshot) is logged and the next older one
// tried. Waits up to `connect_wait` for NATS. Returns "stream" when none loads (the index and
// applier are then fresh); fails only when a loaded snapshot's sources cannot be defined.
Result<ReplicaStart> StartFromJournalSnapshot(const JournalOptions& journal, IndexOptions options,
                                              std::chrono::milliseconds connect_wait,
                                              std::unique_ptr<PrefixIndex>& index,
                                              std::unique_ptr<JournalApplier>& applier);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_JOURNAL_SNAPSHOTS_H_
