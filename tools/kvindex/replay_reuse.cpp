#include "replay_reuse.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "kvindex/sim/reuse.h"

#include "report.h"

namespace kvindex::cli {
namespace {

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

nlohmann::json StatsJson(const std::string& name, const sim::ReuseStats& s, uint64_t all_blocks) {
  return {{"class", name},
          {"requests", s.requests},
          {"blocks", s.blocks},
          {"block_share", Share(s.blocks, all_blocks)},
          {"reused_blocks", s.reused_blocks},
          {"reused_share", Share(s.reused_blocks, s.blocks)},
          {"distance_blocks",
           {{"p50", s.distance_blocks.p50},
            {"p90", s.distance_blocks.p90},
            {"p99", s.distance_blocks.p99}}},
          {"distance_seconds",
           {{"p50", s.distance_seconds.p50},
            {"p90", s.distance_seconds.p90},
            {"p99", s.distance_seconds.p99}}}};
}

}  // namespace

Status CheckReuse(const ReplayOptions& options) {
  if (!options.reuse) return Status::Ok();
  if (options.curve) return Status::InvalidArgument("--reuse: not with --curve");
  if (options.mode != "simulate") {
    return Status::InvalidArgument("--reuse: not with --mode " + options.mode);
  }
  if (options.window_s != 0) return Status::InvalidArgument("--reuse: not with --window");
  if (!options.csv.empty() || !options.plot.empty()) {
    return Status::InvalidArgument("--reuse: a table and --json only (no --csv or --plot)");
  }
  return Status::Ok();
}

Status RunReuse(const ReplayOptions& options, const Trace& trace,
                const sim::PreparedTrace& prepared) {
  const sim::ReuseReport report = sim::AnalyseReuse(prepared);
  const uint64_t all_blocks = report.all.blocks;
  struct Named {
    std::string name;
    const sim::ReuseStats* stats;
  };
  std::vector<Named> rows;
  for (int c = 0; c < sim::kRequestClasses; ++c) {
    rows.push_back({std::string(sim::RequestClassName(static_cast<sim::RequestClass>(c))),
                    &report.classes[c]});
  }
  rows.push_back({"all", &report.all});
  if (options.json != "-") {
    std::printf(
        "trace %s: %s format, %s requests, %s blocks (%s distinct); reuse at lookup, the "
        "trace as one stream\n",
        options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str(),
        FormatCount(prepared.requests()).c_str(), FormatCount(prepared.blocks().size()).c_str(),
        FormatCount(prepared.distinct_blocks()).c_str());
    TextTable table({"class", "requests", "blocks", "block_share", "reused", "reused_share",
                     "p50_blocks", "p90_blocks", "p99_blocks", "p50_s", "p90_s", "p99_s"});
    for (const Named& r : rows) {
      const sim::ReuseStats& s = *r.stats;
      table.AddRow({r.name, FormatCount(s.requests), FormatCount(s.blocks),
                    FormatPercent(Share(s.blocks, all_blocks)), FormatCount(s.reused_blocks),
                    FormatPercent(Share(s.reused_blocks, s.blocks)),
                    FormatCount(s.distance_blocks.p50), FormatCount(s.distance_blocks.p90),
                    FormatCount(s.distance_blocks.p99), Seconds(s.distance_seconds.p50),
                    Seconds(s.distance_seconds.p90), Seconds(s.distance_seconds.p99)});
    }
    std::fputs(table.Render().c_str(), stdout);
    std::fflush(stdout);
  }
  if (!options.json.empty()) {
    nlohmann::json classes = nlohmann::json::array();
    for (const Named& r : rows) classes.push_back(StatsJson(r.name, *r.stats, all_blocks));
    nlohmann::json doc = {{"trace", options.input},
                          {"format", TraceFormatName(trace.format)},
                          {"skipped_lines", trace.skipped_lines},
                          {"reuse", {{"classes", std::move(classes)}}}};
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, doc));
  }
  return Status::Ok();
}

}  // namespace kvindex::cli
