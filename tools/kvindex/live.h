// What `record` and `subscribe` share: gathering sources from --source / --config, running a
// Subscriber on its own thread while the main thread waits for SIGINT/SIGTERM, the duration and
// the status-line interval, and the end-of-run summary (text and JSON).
#ifndef KVINDEX_TOOLS_LIVE_H_
#define KVINDEX_TOOLS_LIVE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/ingest/source_counters.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex::cli {

// --source values (each may expand by dp-size) and/or --config FILE. kInvalidArgument (exit 2)
// for a bad spec or no source at all; the config file's own errors keep their code. Each
// auto@http:// spec asks its engine (engine_discovery.h), for up to `auto_timeout_s` seconds while
// the engine is not reachable; what the engine fails to report is a runtime error (exit 1).
Result<std::vector<SourceConfig>> GatherSources(const std::vector<std::string>& specs,
                                                const std::string& config_path,
                                                double auto_timeout_s);

// Adds --auto-timeout to a live command (`record`, `subscribe`).
void AddAutoTimeoutOption(CLI::App* cmd, double& seconds);

// --source (repeatable) and --config, as `record` and `subscribe` take them.
struct SourceFlags {
  CLI::Option* source;
  CLI::Option* config;
};
SourceFlags AddSourceFlags(CLI::App* cmd, std::vector<std::string>& sources, std::string& config);

// A flag's seconds as whole milliseconds, rounded.
inline std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

// Blocks SIGINT and SIGTERM in the calling thread (and every thread it starts later), so that
// RunLive() receives them synchronously. Call before creating the Subscriber.
void BlockStopSignals();

struct LiveRun {
  double duration_s = 0;        // 0: until a signal (or the subscriber stops by itself)
  double stats_interval_s = 5;  // 0: no status line
  std::string command;          // "record" / "subscribe", for the status line
  // Extra text for the status line (e.g. resident blocks); may be empty.
  std::function<std::string()> extra;
};

struct LiveOutcome {
  Status status;           // what Run() returned
  double elapsed_s = 0;
  bool signalled = false;  // stopped by SIGINT/SIGTERM
};

// Runs `subscriber` on a new thread until a signal, the duration, or its own end.
LiveOutcome RunLive(Subscriber& subscriber, const LiveRun& run);

// The summary: one line per source plus a total, as text (stdout), and as JSON.
std::string SummaryText(const SubscriberStatus& status, double elapsed_s);
nlohmann::json SummaryJson(const SubscriberStatus& status, double elapsed_s);

// The subscriber's transport counters of one source, for SourceCounterFields().
TransportCounters TransportOf(const SubscriberSourceStatus& s);

// Writes `json` to FILE ('-' = stdout). kIoError naming the file.
Status WriteJsonFile(const std::string& path, const nlohmann::json& json);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_LIVE_H_
