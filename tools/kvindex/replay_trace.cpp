#include "replay_trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "kvindex/files/request_trace.h"
#include "kvindex/sim/simulator.h"

#include "replay_curve.h"
#include "replay_output.h"
#include "replay_reuse.h"
#include "report.h"

namespace kvindex::cli {
namespace {

// The policies and routers of the grid, by the names CLI11 admitted.
struct Grid {
  std::vector<sim::PolicyKind> policies;
  std::vector<sim::RouterKind> routers;
  sim::TierWrite tier_write = sim::TierWrite::kThrough;
};

Result<Grid> ParseGrid(const ReplayOptions& options) {
  if (!(options.window_s >= 0)) return Status::InvalidArgument("--window: must be positive");
  KVINDEX_RETURN_IF_ERROR(CheckCurve(options));
  KVINDEX_RETURN_IF_ERROR(CheckReuse(options));
  auto tier_write = sim::ParseTierWrite(options.tier_write);
  if (!tier_write) {
    return Status::InvalidArgument("--tier-write: unknown mode '" + options.tier_write + "'");
  }
  if (!options.plot.empty() && options.window_s == 0 && !options.curve &&
      std::none_of(options.capacities.begin(), options.capacities.end(),
                   [](uint64_t c) { return c != sim::kInfiniteCapacity; })) {
    return Status::InvalidArgument(
        "--plot: needs --window (hit rate over time) or finite --capacity values (a sweep)");
  }
  Grid grid;
  grid.tier_write = *tier_write;
  for (const std::string& item : options.policies) {
    auto policy = sim::ParsePolicy(item);
    if (!policy) return Status::InvalidArgument("--policy: unknown policy '" + item + "'");
    grid.policies.push_back(*policy);
  }
  for (const std::string& item : options.routers) {
    auto router = sim::ParseRouter(item);
    if (!router) return Status::InvalidArgument("--router: unknown router '" + item + "'");
    grid.routers.push_back(*router);
  }
  return grid;
}

// --mode storage-benchmark: one row of the upstream benchmark's counts.
Status RunStorageBenchmark(const ReplayOptions& options, const Trace& trace,
                           const sim::PreparedTrace& prepared) {
  const sim::StorageBenchmarkCounts c = sim::StorageBenchmark(prepared);
  if (options.json != "-") {
    std::printf(
        "trace %s: %s format, storage-benchmark counting (unbounded set, hit = "
        "membership)\n",
        options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str());
    TextTable table({"requests", "total_blocks", "read_blocks", "write_blocks", "prefix_hits",
                     "hit_rate", "write_ratio", "hits_after_first", "contiguous_prefix_hits"});
    table.AddRow({FormatCount(c.requests), FormatCount(c.total_blocks), FormatCount(c.read_blocks),
                  FormatCount(c.write_blocks), FormatCount(c.prefix_hits),
                  FormatPercent(c.hit_rate()),
                  FormatPercent(c.total_blocks == 0 ? 0.0
                                                    : static_cast<double>(c.write_blocks) /
                                                          static_cast<double>(c.total_blocks)),
                  FormatCount(c.hits_after_first), FormatCount(c.contiguous_prefix_hits)});
    std::fputs(table.Render().c_str(), stdout);
    std::fflush(stdout);
  }
  nlohmann::json row = {{"mode", "storage-benchmark"},
                        {"requests", c.requests},
                        {"total_blocks", c.total_blocks},
                        {"read_blocks", c.read_blocks},
                        {"write_blocks", c.write_blocks},
                        {"prefix_hits", c.prefix_hits},
                        {"hit_rate", c.hit_rate()},
                        {"hits_after_first", c.hits_after_first},
                        {"contiguous_prefix_hits", c.contiguous_prefix_hits}};
  if (!options.csv.empty()) {
    char line[512];
    std::snprintf(line, sizeof line, "%llu,%llu,%llu,%llu,%llu,%.6f,%llu,%llu\n",
                  static_cast<unsigned long long>(c.requests),
                  static_cast<unsigned long long>(c.total_blocks),
                  static_cast<unsigned long long>(c.read_blocks),
                  static_cast<unsigned long long>(c.write_blocks),
                  static_cast<unsigned long long>(c.prefix_hits), c.hit_rate(),
                  static_cast<unsigned long long>(c.hits_after_first),
                  static_cast<unsigned long long>(c.contiguous_prefix_hits));
    KVINDEX_RETURN_IF_ERROR(WriteText(
        options.csv, std::string("requests,total_blocks,read_blocks,write_blocks,prefix_hits,"
                                 "hit_rate,hits_after_first,contiguous_prefix_hits\n") +
                         line));
  }
  if (!options.json.empty()) {
    nlohmann::json doc = {{"trace", options.input},
                          {"format", TraceFormatName(trace.format)},
                          {"mode", "storage-benchmark"},
                          {"skipped_lines", trace.skipped_lines},
                          {"results", nlohmann::json::array({row})}};
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, doc));
  }
  return Status::Ok();
}

// Every configuration of the grid: policy, then capacity, router, instances, CPU and disk tier
// (the innermost), all with the same seed, block size and window.
std::vector<sim::SimConfig> GridConfigs(const Grid& grid, const ReplayOptions& options,
                                        uint32_t block_tokens) {
  std::vector<sim::SimConfig> configs;
  for (sim::PolicyKind policy : grid.policies) {
    for (uint64_t capacity : options.capacities) {
      for (sim::RouterKind router : grid.routers) {
        for (uint32_t instances : options.instances) {
          for (uint64_t cpu : options.cpu_capacities) {
            for (uint64_t disk : options.disk_capacities) {
              sim::SimConfig config;
              config.policy = policy;
              config.capacity = capacity;
              config.router = router;
              config.instances = instances;
              config.seed = options.seed;
              config.block_tokens = block_tokens;
              config.cpu_capacity = cpu;
              config.disk_capacity = disk;
              config.tier_write = grid.tier_write;
              config.window_ms = options.window_s * 1000.0;
              configs.push_back(config);
            }
          }
        }
      }
    }
  }
  return configs;
}

// Simulates every configuration on `threads` threads (0 = hardware concurrency). The reports are
// in grid order whatever the scheduling; the first failure in grid order is returned.
Result<std::vector<sim::SimReport>> SimulateAll(const sim::PreparedTrace& prepared,
                                                const std::vector<sim::SimConfig>& configs,
                                                uint32_t threads_option) {
  // Each configuration is independent: workers take the next index until none is left; results
  // land in their grid position, so the output order never depends on scheduling.
  std::vector<std::optional<Result<sim::SimReport>>> results(configs.size());
  unsigned threads = threads_option != 0 ? threads_option : std::thread::hardware_concurrency();
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(configs.size())));
  std::atomic<size_t> next{0};
  // A progress bar on stderr, only when stderr is a terminal and the run is long (more than
  // 2×10^7 block accesses in all): "replay [#####     ] 12/40 configurations".
  std::atomic<size_t> done{0};
  auto counted_worker = [&] {
    for (size_t i = next++; i < configs.size(); i = next++) {
      results[i].emplace(sim::Simulate(prepared, configs[i]));
      ++done;
    }
  };
  const bool progress =
      isatty(STDERR_FILENO) == 1 &&
      static_cast<double>(prepared.blocks().size()) * static_cast<double>(configs.size()) > 2e7;
  std::thread bar;
  if (progress) {
    bar = std::thread([&] {
      constexpr int kWidth = 30;
      while (true) {
        const size_t d = done.load();
        const int filled = static_cast<int>(kWidth * d / configs.size());
        std::fprintf(stderr, "\rreplay [%s%s] %zu/%zu configurations",
                     std::string(static_cast<size_t>(filled), '#').c_str(),
                     std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), d,
                     configs.size());
        if (d == configs.size()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      std::fputs("\n", stderr);
    });
  }
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(counted_worker);
  counted_worker();
  for (std::thread& t : pool) t.join();
  if (bar.joinable()) bar.join();

  std::vector<sim::SimReport> reports;
  for (auto& result : results) {
    if (!result->ok()) return result->status();
    reports.push_back(std::move(result->value()));
  }
  return reports;
}

// The table on stdout (unless --json -), then --json, --csv and --plot.
Status WriteResults(const ReplayOptions& options, const Trace& trace,
                    const sim::PreparedTrace& prepared, uint32_t block_tokens,
                    const std::vector<sim::SimReport>& reports) {
  if (options.json != "-") {
    std::printf("trace %s: %s format, %s requests, %s blocks (%s distinct), %u tokens per block\n",
                options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str(),
                FormatCount(prepared.requests()).c_str(),
                FormatCount(prepared.blocks().size()).c_str(),
                FormatCount(prepared.distinct_blocks()).c_str(), block_tokens);
    std::fputs(RenderResultTable(reports).c_str(), stdout);
    std::fflush(stdout);
  }
  if (!options.json.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const sim::SimReport& report : reports) rows.push_back(RowJson(report));
    nlohmann::json doc = {{"trace", options.input},
                          {"format", TraceFormatName(trace.format)},
                          {"block_tokens", block_tokens},
                          {"skipped_lines", trace.skipped_lines},
                          {"results", std::move(rows)}};
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, doc));
  }
  if (!options.csv.empty()) {
    KVINDEX_RETURN_IF_ERROR(WriteText(options.csv, RenderCsv(reports, options.window_s > 0)));
  }
  if (!options.plot.empty()) {
    KVINDEX_RETURN_IF_ERROR(
        WriteText(options.plot, RenderPlot(std::filesystem::path(options.input).filename().string(),
                                           reports, options.window_s > 0)));
  }
  return Status::Ok();
}

}  // namespace

Status CheckGrid(const ReplayOptions& options) { return ParseGrid(options).status(); }

Status RunTraceReplay(const ReplayOptions& options) {
  KVINDEX_ASSIGN_OR_RETURN(Grid grid, ParseGrid(options));
  TraceReaderOptions reader_options;
  reader_options.skip_bad = options.skip_bad;
  reader_options.max_requests = options.max_requests;
  KVINDEX_ASSIGN_OR_RETURN(Trace trace, ReadTrace(options.input, reader_options));
  if (trace.skipped_lines > 0) {
    std::fprintf(stderr, "kvindex replay: skipped %llu bad line(s); first: %s\n",
                 static_cast<unsigned long long>(trace.skipped_lines),
                 trace.first_skip_error.c_str());
  }
  if (trace.requests.empty()) return Status::Malformed(options.input + ": no requests");
  KVINDEX_ASSIGN_OR_RETURN(sim::PreparedTrace prepared, sim::PreparedTrace::Prepare(trace));
  if (options.mode == "storage-benchmark") return RunStorageBenchmark(options, trace, prepared);
  if (options.reuse) return RunReuse(options, trace, prepared);
  const uint32_t block_tokens =
      options.block_tokens != 0 ? options.block_tokens : DefaultBlockTokens(trace.format);
  if (options.curve) return RunCurve(options, trace, prepared, block_tokens);
  const std::vector<sim::SimConfig> configs = GridConfigs(grid, options, block_tokens);
  KVINDEX_ASSIGN_OR_RETURN(std::vector<sim::SimReport> reports,
                           SimulateAll(prepared, configs, options.threads));
  return WriteResults(options, trace, prepared, block_tokens, reports);
}

}  // namespace kvindex::cli
