#include "replay_curve.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/sim/hit_curve.h"

#include "plot.h"
#include "replay_output.h"
#include "report.h"

namespace kvindex::cli {
namespace {

// The shares of the unbounded cache's hits whose capacities the report names, in percent.
constexpr uint64_t kTargets[] = {50, 80, 90, 95, 99};

// `points` capacities spaced evenly on a log scale from 1 to `working_set` (both included when
// points >= 2), rounded and without repeats.
std::vector<uint64_t> LogCapacities(uint64_t working_set, uint64_t points) {
  const uint64_t top = std::max<uint64_t>(1, working_set);
  if (points <= 1) return {top};
  std::vector<uint64_t> out;
  for (uint64_t k = 0; k < points; ++k) {
    const double x = std::pow(static_cast<double>(top),
                              static_cast<double>(k) / static_cast<double>(points - 1));
    const uint64_t c = std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(x)), 1, top);
    if (out.empty() || c > out.back()) out.push_back(c);
  }
  return out;
}

// The smallest capacity whose count reaches `percent`% of the unbounded count, or 0 when the
// unbounded count is 0 (no hit to reach).
uint64_t Reach(const sim::HitCurve& curve, uint64_t percent, bool prefix) {
  auto count = [prefix](const sim::CurveStep& s) {
    return prefix ? s.prefix_hit_blocks : s.any_hit_blocks;
  };
  const uint64_t full = count(curve.Unbounded());
  if (full == 0) return 0;
  for (const sim::CurveStep& s : curve.steps) {
    if (count(s) * 100 >= full * percent) return s.capacity;
  }
  return curve.Unbounded().capacity;
}

std::string Label(const sim::HitCurve& c) {
  return std::string(sim::PolicyName(c.config.policy)) + " " +
         std::string(sim::RouterName(c.config.router)) + " x" + std::to_string(c.config.instances);
}

double Rate(uint64_t hits, uint64_t blocks) {
  return blocks == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(blocks);
}

std::string RenderCurveText(const sim::HitCurve& c, uint64_t points) {
  std::string out;
  const sim::CurveStep& inf = c.Unbounded();
  char line[512];
  std::snprintf(line, sizeof line,
                "curve %s: %s blocks, working set %s blocks per instance; unbounded: prefix %s "
                "(%s), any %s (%s)\n",
                Label(c).c_str(), FormatCount(c.blocks).c_str(), FormatCount(c.working_set).c_str(),
                FormatCount(inf.prefix_hit_blocks).c_str(),
                FormatPercent(Rate(inf.prefix_hit_blocks, c.blocks)).c_str(),
                FormatCount(inf.any_hit_blocks).c_str(),
                FormatPercent(Rate(inf.any_hit_blocks, c.blocks)).c_str());
  out += line;
  TextTable table({"capacity", "prefix_hits", "any_hits", "prefix_block", "any_block"});
  for (uint64_t cap : LogCapacities(c.working_set, points)) {
    const sim::CurveStep s = c.At(cap);
    table.AddRow({std::to_string(cap), FormatCount(s.prefix_hit_blocks),
                  FormatCount(s.any_hit_blocks), FormatPercent(Rate(s.prefix_hit_blocks, c.blocks)),
                  FormatPercent(Rate(s.any_hit_blocks, c.blocks))});
  }
  out += table.Render();
  TextTable reach({"share_of_unbounded", "prefix_capacity", "any_capacity"});
  for (uint64_t t : kTargets) {
    const uint64_t p = Reach(c, t, true), a = Reach(c, t, false);
    reach.AddRow({std::to_string(t) + "%", p == 0 ? "-" : std::to_string(p),
                  a == 0 ? "-" : std::to_string(a)});
  }
  out += reach.Render();
  return out;
}

nlohmann::json ReachJson(const sim::HitCurve& c) {
  nlohmann::json targets = nlohmann::json::array();
  for (uint64_t t : kTargets) {
    const uint64_t p = Reach(c, t, true), a = Reach(c, t, false);
    targets.push_back({{"share", static_cast<double>(t) / 100.0},
                       {"prefix_capacity", p == 0 ? nlohmann::json(nullptr) : nlohmann::json(p)},
                       {"any_capacity", a == 0 ? nlohmann::json(nullptr) : nlohmann::json(a)}});
  }
  return {{"policy", sim::PolicyName(c.config.policy)},
          {"instances", c.config.instances},
          {"router", sim::RouterName(c.config.router)},
          {"blocks", c.blocks},
          {"working_set", c.working_set},
          {"prefix_hit_blocks", c.Unbounded().prefix_hit_blocks},
          {"any_hit_blocks", c.Unbounded().any_hit_blocks},
          {"targets", std::move(targets)}};
}

// The --json document: `doc` (whose "curve" is an empty array) with the rows of every curve in
// it, laid out as DumpJson(doc, 2) would lay them out. A curve has a row at every capacity where
// a count changes (tens of thousands on a real trace): rendered directly, not as JSON objects.
std::string CurveJson(const nlohmann::json& doc, const std::vector<sim::HitCurve>& curves) {
  std::string text = DumpJson(doc, 2) + "\n";
  // Keys are sorted and string values escaped, so this is the top-level key's line.
  const std::string empty = "\n  \"curve\": [],";
  const size_t at = text.find(empty);
  if (at == std::string::npos) return text;
  size_t row_count = 0;
  for (const sim::HitCurve& c : curves) row_count += c.steps.size();
  if (row_count == 0) return text;
  std::string rows = "\n  \"curve\": [";
  rows.reserve(row_count * 230 + 16);
  const auto number = [&rows](uint64_t v) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
    rows.append(digits, end);
  };
  bool first = true;
  for (const sim::HitCurve& c : curves) {
    const std::string policy(sim::PolicyName(c.config.policy));
    const std::string router(sim::RouterName(c.config.router));
    for (const sim::CurveStep& s : c.steps) {
      rows += first ? "\n    {\n      \"any_hit_blocks\": " : ",\n    {\n      \"any_hit_blocks\": ";
      first = false;
      number(s.any_hit_blocks);
      rows += ",\n      \"blocks\": ";
      number(c.blocks);
      rows += ",\n      \"capacity\": ";
      number(s.capacity);
      rows += ",\n      \"instances\": ";
      number(c.config.instances);
      rows += ",\n      \"policy\": \"" + policy + "\",\n      \"prefix_hit_blocks\": ";
      number(s.prefix_hit_blocks);
      rows += ",\n      \"router\": \"" + router + "\"\n    }";
    }
  }
  rows += "\n  ],";
  text.replace(at, empty.size(), rows);
  return text;
}

std::string RenderCurvePlot(const std::string& trace, const std::vector<sim::HitCurve>& curves) {
  PlotSpec spec;
  spec.title = "Exact LRU prefix hit rate against capacity: " + trace;
  spec.x_label = "GPU capacity per instance (blocks)";
  spec.y_label = "prefix hit rate (% of blocks)";
  spec.log_x = true;
  std::vector<PlotSeries> series;
  for (const sim::HitCurve& c : curves) {
    PlotSeries one{Label(c), {}};
    // 200 samples keep the chart small whatever the number of steps.
    for (uint64_t cap : LogCapacities(c.working_set, 200)) {
      one.points.emplace_back(static_cast<double>(cap),
                              100.0 * Rate(c.At(cap).prefix_hit_blocks, c.blocks));
    }
    series.push_back(std::move(one));
  }
  return RenderSvgPlot(spec, series);
}

}  // namespace

Status CheckCurve(const ReplayOptions& options) {
  if (!options.curve) {
    if (options.curve_points != 0) return Status::InvalidArgument("--curve-points: needs --curve");
    return Status::Ok();
  }
  if (options.reuse) return Status::InvalidArgument("--curve: not with --reuse");
  if (options.mode != "simulate") {
    return Status::InvalidArgument("--curve: not with --mode " + options.mode);
  }
  if (options.window_s != 0) return Status::InvalidArgument("--curve: not with --window");
  if (options.capacities.size() != 1 || options.capacities[0] != sim::kInfiniteCapacity) {
    return Status::InvalidArgument(
        "--curve: computes every capacity from 1 to the working set; drop --capacity");
  }
  for (const std::string& policy : options.policies) {
    if (policy != "lru") {
      return Status::InvalidArgument("--curve: policy " + policy +
                                     ": only lru has an exact one-pass curve "
                                     "(docs/simulation.md)");
    }
  }
  for (const std::string& router : options.routers) {
    if (router == "cache-aware") {
      return Status::InvalidArgument(
          "--curve: the curve does not apply to router cache-aware (its routing depends on "
          "cache contents, so every capacity routes differently)");
    }
  }
  auto any_tier = [](const std::vector<uint64_t>& list) {
    return std::any_of(list.begin(), list.end(), [](uint64_t c) { return c != 0; });
  };
  if (any_tier(options.cpu_capacities) || any_tier(options.disk_capacities)) {
    return Status::InvalidArgument(
        "--curve: not with --cpu-capacity/--disk-capacity (the curve is exact for the GPU tier "
        "alone)");
  }
  return Status::Ok();
}

Status RunCurve(const ReplayOptions& options, const Trace& trace,
                const sim::PreparedTrace& prepared, uint32_t block_tokens) {
  std::vector<sim::HitCurve> curves;
  for (const std::string& policy : options.policies) {
    for (const std::string& router : options.routers) {
      for (uint32_t instances : options.instances) {
        sim::SimConfig config;
        config.policy = *sim::ParsePolicy(policy);
        config.router = *sim::ParseRouter(router);
        config.instances = instances;
        config.seed = options.seed;
        config.block_tokens = block_tokens;
        KVINDEX_ASSIGN_OR_RETURN(sim::HitCurve curve, sim::LruHitCurve(prepared, config));
        curves.push_back(std::move(curve));
      }
    }
  }
  const uint64_t points = options.curve_points != 0 ? options.curve_points : kDefaultCurvePoints;
  if (options.json != "-") {
    std::printf("trace %s: %s format, %s requests, %s blocks (%s distinct), %u tokens per block\n",
                options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str(),
                FormatCount(prepared.requests()).c_str(),
                FormatCount(prepared.blocks().size()).c_str(),
                FormatCount(prepared.distinct_blocks()).c_str(), block_tokens);
    for (const sim::HitCurve& c : curves) std::fputs(RenderCurveText(c, points).c_str(), stdout);
    std::fflush(stdout);
  }
  if (!options.json.empty()) {
    nlohmann::json reach = nlohmann::json::array();
    for (const sim::HitCurve& c : curves) reach.push_back(ReachJson(c));
    nlohmann::json doc = {{"trace", options.input},       {"format", TraceFormatName(trace.format)},
                          {"block_tokens", block_tokens}, {"skipped_lines", trace.skipped_lines},
                          {"curve", nlohmann::json::array()}, {"reach", std::move(reach)}};
    KVINDEX_RETURN_IF_ERROR(WriteTextFile(options.json, CurveJson(doc, curves)));
  }
  if (!options.csv.empty()) {
    std::string csv = "policy,instances,router,capacity,blocks,prefix_hit_blocks,any_hit_blocks\n";
    for (const sim::HitCurve& c : curves) {
      for (const sim::CurveStep& s : c.steps) {
        char line[256];
        std::snprintf(line, sizeof line, "%s,%u,%s,%llu,%llu,%llu,%llu\n",
                      std::string(sim::PolicyName(c.config.policy)).c_str(), c.config.instances,
                      std::string(sim::RouterName(c.config.router)).c_str(),
                      static_cast<unsigned long long>(s.capacity),
                      static_cast<unsigned long long>(c.blocks),
                      static_cast<unsigned long long>(s.prefix_hit_blocks),
                      static_cast<unsigned long long>(s.any_hit_blocks));
        csv += line;
      }
    }
    KVINDEX_RETURN_IF_ERROR(WriteText(options.csv, csv));
  }
  if (!options.plot.empty()) {
    KVINDEX_RETURN_IF_ERROR(WriteText(
        options.plot,
        RenderCurvePlot(std::filesystem::path(options.input).filename().string(), curves)));
  }
  return Status::Ok();
}

}  // namespace kvindex::cli
