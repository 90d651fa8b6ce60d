// Snapshot files in the tool: the summary `replay SNAPSHOT` prints, the index `query --snapshot`
// answers from, and the sequence state the ingestor hands a snapshot (docs/snapshot-format.md).
#ifndef KVINDEX_TOOLS_SNAPSHOT_TOOLS_H_
#define KVINDEX_TOOLS_SNAPSHOT_TOOLS_H_

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/snapshot/snapshot.h"

namespace kvindex::cli {

// An index loaded from a snapshot file, with the file's summary.
struct LoadedSnapshot {
  std::unique_ptr<PrefixIndex> index;
  SnapshotInfo info;
  static Result<LoadedSnapshot> Load(const std::string& path, IndexOptions options = {});
};

// The summary of `replay SNAPSHOT` (docs/cli.md): per instance and tier, then per source with
// its sequence state.
nlohmann::json SnapshotSummaryJson(const LoadedSnapshot& loaded);
std::string RenderSnapshotSummary(const LoadedSnapshot& loaded);

// The sequence state of every source of `ingestor`, in SourceId order.
std::vector<SourceSeqState> SequenceStates(const Ingestor& ingestor);

// Writes `index` (with the ingestor's sequence states, when given) to `path` atomically.
Result<uint64_t> WriteIndexSnapshot(const PrefixIndex& index, const Ingestor* ingestor,
                                    const std::string& path);

// True when `--warm-from` names a snapshot: http://HOST:PORT, or a file starting with the
// snapshot magic.
bool IsSnapshotWarmFrom(const std::vector<std::string>& warm_from);

// Loads a snapshot file, or a running server's GET /snapshot (http://HOST:PORT, streamed into
// the loader), into `index` (fresh).
Result<SnapshotInfo> WarmFromSnapshot(const std::string& target, PrefixIndex& index);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_SNAPSHOT_TOOLS_H_
