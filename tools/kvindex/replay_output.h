// What `kvindex replay TRACE` writes about a grid's results: the text table on stdout, a JSON row
// per configuration (--json), the CSV (--csv) and the SVG chart (--plot), and the capacity cells
// they share ("inf", "none").
//
// Thread safety: plain functions of their arguments.
#ifndef KVINDEX_TOOLS_REPLAY_OUTPUT_H_
#define KVINDEX_TOOLS_REPLAY_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/status.h"
#include "kvindex/sim/simulator.h"

namespace kvindex::cli {

// A GPU capacity cell: the number, or "inf" for sim::kInfiniteCapacity.
std::string CapacityText(uint64_t capacity);
// A shared-tier capacity cell: "none" for 0 (no such tier), else as CapacityText().
std::string TierText(uint64_t capacity);

// The text table of the results, one row per configuration in grid order; with a CPU or disk tier
// in any configuration, the tier columns and the hits per tier.
std::string RenderResultTable(const std::vector<sim::SimReport>& reports);
// One --json row: the configuration, its counts, per instance and (with windows) per window.
nlohmann::json RowJson(const sim::SimReport& report);
// The CSV: one line per configuration, or with `windows` one per (configuration, window,
// instance), instance "all" for the cluster.
std::string RenderCsv(const std::vector<sim::SimReport>& reports, bool windows);
// The SVG of --plot: prefix hit rate over time (one series per configuration) with `windows`,
// else prefix hit rate against GPU capacity (one series per policy/router/instances/tiers).
std::string RenderPlot(const std::string& trace, const std::vector<sim::SimReport>& reports,
                       bool windows);

// Writes `text` to `path`, or to stdout when `path` is "-". kIoError naming the path.
Status WriteText(const std::string& path, const std::string& text);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPLAY_OUTPUT_H_
