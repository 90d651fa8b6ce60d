// `kvindex replay CAPTURE...`: rebuild the index from a capture and report (docs/cli.md "replay CAPTURE").
#ifndef KVINDEX_TOOLS_REPLAY_CAPTURE_H_
#define KVINDEX_TOOLS_REPLAY_CAPTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvindex/core/status.h"

namespace kvindex::cli {

struct CaptureReplayArgs {
  std::vector<std::string> inputs;  // the files of one capture, in order
  bool dump = false;                // every applied event as one JSON line on stdout
  std::string queries;              // Q.jsonl: answered at their `after` positions
  std::string json;                 // --json FILE ("-" = stdout)
  uint64_t max_blocks = 0;
  std::string to_trace;             // --to-trace FILE ("-" = stdout): derive a request trace
  std::string write_snapshot;       // --write-snapshot FILE: the rebuilt index as a snapshot
};

// Runs the capture replay. kInvalidArgument for a bad queries file line (usage), kMalformed /
// kNotFound / kIoError for bad inputs, kMalformed "N queries differ from their expectation" when
// an `expect` is not met (exit 1, after listing every difference on stderr).
Status RunCaptureReplay(const CaptureReplayArgs& args);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_CAPTURE_H_
