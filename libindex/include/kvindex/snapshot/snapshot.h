// Index snapshots (docs/snapshot-format.md): the whole state of a PrefixIndex at one point, with
// each source's definition and sequence state, written in one pass through a sink and read back
// in one pass (pushed in pieces of any size) into a fresh index. Every frame carries an XXH3
// checksum; a damaged or truncated snapshot fails with the byte offset of the bad frame.
//
// Thread safety: the functions are reentrant; a SnapshotReader is used by one thread at a time.
#ifndef KVINDEX_SNAPSHOT_SNAPSHOT_H_
#define KVINDEX_SNAPSHOT_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"

namespace kvindex {

// The version written; a reader also reads version 1 (no per-instance engine counts in the meta
// frame, no eviction order).
inline constexpr uint32_t kSnapshotVersion = 2;
inline constexpr uint32_t kSnapshotOldestVersion = 1;

// A snapshot's summary (its meta frame and what was read).
struct SnapshotInfo {
  uint32_t version = kSnapshotVersion;
  int64_t created_ns = 0;  // realtime
  std::vector<SourceConfig> sources;
  std::vector<SourceSeqState> seq;  // per source
  uint64_t holders = 0;
  uint64_t scopes = 0;
  uint64_t blocks = 0;
  uint64_t presences = 0;
  uint64_t engine_entries = 0;
  uint64_t bytes = 0;  // the snapshot's size
};

// The trust of each instance as the snapshot stored its sources' (never stale: a snapshot is not
// live).
InstanceTrustMap SnapshotTrusts(const SnapshotInfo& info);

// Receives the snapshot's bytes in order; returns false to abort (the writer fails kUnavailable).
using SnapshotSink = std::function<bool(std::string_view chunk)>;

// Writes `state` (with `seq`, one per source, or empty for none known) through `sink`. Returns the
// bytes written.
Result<uint64_t> WriteSnapshot(const IndexState& state, std::span<const SourceSeqState> seq,
                               int64_t created_ns, const SnapshotSink& sink);

// Writes a snapshot file atomically: `path`.tmp, fsync, rename over `path`, fsync of the folder.
Result<uint64_t> WriteSnapshotFile(const std::string& path, const IndexState& state,
                                   std::span<const SourceSeqState> seq, int64_t created_ns);

// Reads a snapshot pushed in pieces. With an index, loads it (the index must be fresh); without,
// only checks it and summarises. Errors read "NAME: byte OFFSET: what".
class SnapshotReader {
 public:
  SnapshotReader(std::string name, PrefixIndex* into);
  ~SnapshotReader();
  SnapshotReader(const SnapshotReader&) = delete;
  SnapshotReader& operator=(const SnapshotReader&) = delete;

  // Consumes the next bytes. After an error, every call returns it again.
  Status Feed(std::string_view bytes);
  // The end of the input: fails unless the end frame was read.
  Result<SnapshotInfo> Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a snapshot file (in 1 MiB reads) into `into` (nullable: check and summarise only).
Result<SnapshotInfo> ReadSnapshotFile(const std::string& path, PrefixIndex* into);

// True when `prefix` starts with the snapshot magic.
bool LooksLikeSnapshot(std::span<const std::byte> prefix);

// The snapshot files of `dir` (named snapshot-<created ns>.kvsnap), newest first.
std::vector<std::string> ListSnapshots(const std::string& dir);
// The file name a snapshot created at `created_ns` gets in `dir`.
std::string SnapshotPath(const std::string& dir, int64_t created_ns);
// Deletes all but the newest `keep` snapshots of `dir` (and stale temporary files).
void PruneSnapshots(const std::string& dir, size_t keep);

}  // namespace kvindex

#endif  // KVINDEX_SNAPSHOT_SNAPSHOT_H_
