// `subscribe --snapshot-dir`: loading the newest valid snapshot at start, the background thread
// that writes one every --snapshot-interval seconds (keeping --snapshot-keep), the final one at a
// clean stop, and the consistent state they and `GET /snapshot` are written from.
#ifndef KVINDEX_TOOLS_SNAPSHOT_KEEPER_H_
#define KVINDEX_TOOLS_SNAPSHOT_KEEPER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvindex/core/status.h"
#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/snapshot/snapshot.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex::cli {

// The index and the sequence states of one moment: taken on the subscriber's I/O thread between
// two messages, so that each source's watermark is exactly what the index holds.
struct ConsistentState {
  IndexState index;
  std::vector<SourceSeqState> seq;
};

// Takes the state through subscriber.Submit() while Run() runs; nullopt when the I/O thread does
// not take the task within a few seconds (not running).
std::optional<ConsistentState> TakeState(Subscriber& subscriber, const PrefixIndex& index);

// Loads the newest snapshot of `dir` that reads without error into `index` (created with
// `options`), logging each one skipped with its file and byte offset. nullopt when none loads
// (the index is then fresh and empty).
std::optional<SnapshotInfo> LoadNewestSnapshot(const std::string& dir, IndexOptions options,
                                               std::unique_ptr<PrefixIndex>& index);

class SnapshotKeeper {
 public:
  SnapshotKeeper(std::string dir, double interval_s, size_t keep, Subscriber& subscriber,
                 const PrefixIndex& index);
  ~SnapshotKeeper();
  void Start();
  // Stops the thread (a snapshot being written is finished first).
  void Stop();
  // Writes one snapshot of `state` into the folder and prunes old ones.
  Status Write(const ConsistentState& state);

 private:
  void Loop();
  std::string dir_;
  double interval_s_;
  size_t keep_;
  Subscriber& subscriber_;
  const PrefixIndex& index_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_SNAPSHOT_KEEPER_H_
