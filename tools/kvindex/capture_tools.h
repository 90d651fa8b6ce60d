// Offline use of captures shared by `replay CAPTURE` and `query --capture`: loading a capture into
// a PrefixIndex through the same Ingestor the live subscriber uses, and the per-instance, per-tier
// and per-source summary of what it applied.
#ifndef KVINDEX_TOOLS_CAPTURE_TOOLS_H_
#define KVINDEX_TOOLS_CAPTURE_TOOLS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/capture_replay.h"
#include "kvindex/ingest/ingest.h"

namespace kvindex::cli {

// Counts blocks per (instance, tier) as the applied events named them.
struct TierTally {
  uint64_t stored = 0;
  uint64_t removed = 0;
};

// An index rebuilt from a capture, with what it took to build it.
class LoadedCapture : public IngestObserver {
 public:
  // `on_applied`, when set, sees every applied batch in applied order (for --dump and queries).
  using AppliedHook = std::function<void(const SourceConfig& source, uint64_t seq, int64_t recv_ns,
                                         const EventBatch& batch)>;

  // An empty index; Read() fills it.
  static std::unique_ptr<LoadedCapture> Create(IndexOptions index_options,
                                               AppliedHook on_applied = {});
  // Create() then Read().
  static Result<std::unique_ptr<LoadedCapture>> Load(const std::vector<std::string>& paths,
                                                     IndexOptions index_options,
                                                     AppliedHook on_applied = {});

  // Reads `paths` (one capture, in order) into the index. Fails with one line naming the file and
  // position for an unreadable file, a file that is not a capture, or a bad source definition.
  // Damage inside the files (torn tail, corrupt records) is reported in problems(), not failed.
  Status Read(const std::vector<std::string>& paths);

  PrefixIndex& index() { return *index_; }
  const Ingestor& ingestor() const { return *ingestor_; }
  const CaptureReplayStats& replay_stats() const { return replayer_->stats(); }
  const std::vector<CaptureProblem>& problems() const { return problems_; }
  uint64_t records() const { return records_; }

  // The summary table of `replay CAPTURE` (docs/cli.md "replay CAPTURE"): per instance and tier,
  // then per source.
  std::string RenderSummary() const;
  nlohmann::json SummaryJson() const;

  void OnApplied(SourceId source, uint64_t seq, int64_t recv_ns, const EventBatch& batch) override;

 private:
  LoadedCapture() = default;
  std::unique_ptr<PrefixIndex> index_;
  std::unique_ptr<Ingestor> ingestor_;
  std::unique_ptr<CaptureReplayer> replayer_;
  AppliedHook on_applied_;
  std::map<std::pair<std::string, std::string>, TierTally> tally_;  // (instance, tier)
  std::vector<CaptureProblem> problems_;
  uint64_t records_ = 0;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_CAPTURE_TOOLS_H_
