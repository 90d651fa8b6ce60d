// `kvindex replay INPUT`: offline replay. For a request trace (SPEC §6) it simulates a cluster
// for every configuration of a grid (policies × capacities × routers × instance counts), in
// parallel, and reports hit rates. Capture files (SPEC §5) are recognised by DetectInput() and
// rebuilt into the index (replay_capture.cpp).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kvindex/files/capture.h"
#include "kvindex/files/request_trace.h"
#include "kvindex/sim/simulator.h"
#include "plot.h"
#include "replay_capture.h"
#include "report.h"

namespace kvindex::cli {
namespace {

struct ReplayOptions {
  std::string input;                // the first input; a trace has exactly one
  std::vector<std::string> inputs;  // a capture may be several files (rotation), in order
  bool dump = false;
  std::string queries;
  uint64_t max_blocks = 0;
  uint32_t block_tokens = 0;  // 0 = the trace format's own
  uint64_t max_requests = 0;  // 0 = all
  bool skip_bad = false;
  std::string capacity = "inf";
  std::string policy = "lru";
  std::string router = "round-robin";
  std::string instances = "1";
  uint64_t seed = 0;
  uint32_t threads = 0;  // 0 = hardware concurrency
  std::string json;      // empty = none; "-" = stdout
  std::string cpu_capacity;   // empty = no CPU tier
  std::string disk_capacity;  // empty = no disk tier
  std::string mode = "simulate";
  double window_s = 0;        // 0 = no windows
  std::string csv;            // empty = none; "-" = stdout
  std::string plot;           // empty = none
  std::string to_trace;       // capture only: derive a request trace into FILE
};

enum class InputKind { kTrace, kCapture };

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos
                                                                  : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

Result<uint64_t> ParsePositive(const std::string& flag, const std::string& item) {
  uint64_t value = 0;
  bool ok = !item.empty() && item.size() <= 19;
  for (char c : item) {
    if (c < '0' || c > '9') ok = false;
  }
  if (ok) value = std::stoull(item);
  if (!ok || value == 0) {
    return Status::InvalidArgument(flag + ": '" + item + "' is not a positive integer");
  }
  return value;
}

struct Grid {
  std::vector<uint64_t> cpu_capacities{0};   // 0 = no tier
  std::vector<uint64_t> disk_capacities{0};  // 0 = no tier
  std::vector<sim::PolicyKind> policies;
  std::vector<uint64_t> capacities;
  std::vector<sim::RouterKind> routers;
  std::vector<uint32_t> instances;
};

// A tier capacity list: positive integers, `inf`, or `none` (no such tier); empty = none.
Result<std::vector<uint64_t>> ParseTierCapacities(const std::string& flag, const std::string& text) {
  std::vector<uint64_t> out;
  if (text.empty()) return std::vector<uint64_t>{0};
  for (const std::string& item : SplitList(text)) {
    if (item == "none") {
      out.push_back(0);
    } else if (item == "inf") {
      out.push_back(sim::kInfiniteCapacity);
    } else {
      KVINDEX_ASSIGN_OR_RETURN(uint64_t capacity, ParsePositive(flag, item));
      out.push_back(capacity);
    }
  }
  return out;
}

Result<Grid> ParseGrid(const ReplayOptions& options) {
  Grid grid;
  if (options.mode != "simulate" && options.mode != "storage-benchmark") {
    return Status::InvalidArgument("--mode: unknown mode '" + options.mode +
                                   "' (simulate, storage-benchmark)");
  }
  if (!(options.window_s >= 0)) return Status::InvalidArgument("--window: must be positive");
  if (!options.plot.empty() && options.window_s == 0 &&
      options.capacity.find_first_of("0123456789") == std::string::npos) {
    return Status::InvalidArgument(
        "--plot: needs --window (hit rate over time) or finite --capacity values (a sweep)");
  }
  KVINDEX_ASSIGN_OR_RETURN(grid.cpu_capacities,
                           ParseTierCapacities("--cpu-capacity", options.cpu_capacity));
  KVINDEX_ASSIGN_OR_RETURN(grid.disk_capacities,
                           ParseTierCapacities("--disk-capacity", options.disk_capacity));
  for (const std::string& item : SplitList(options.policy)) {
    auto policy = sim::ParsePolicy(item);
    if (!policy) {
      return Status::InvalidArgument("--policy: unknown policy '" + item +
                                     "' (lru, lfu, fifo, prefix-lru)");
    }
    grid.policies.push_back(*policy);
  }
  for (const std::string& item : SplitList(options.capacity)) {
    if (item == "inf") {
      grid.capacities.push_back(sim::kInfiniteCapacity);
      continue;
    }
    KVINDEX_ASSIGN_OR_RETURN(uint64_t capacity, ParsePositive("--capacity", item));
    grid.capacities.push_back(capacity);
  }
  for (const std::string& item : SplitList(options.router)) {
    auto router = sim::ParseRouter(item);
    if (!router) {
      return Status::InvalidArgument(
          "--router: unknown router '" + item +
          "' (round-robin, random, least-loaded, cache-aware, session)");
    }
    grid.routers.push_back(*router);
  }
  for (const std::string& item : SplitList(options.instances)) {
    KVINDEX_ASSIGN_OR_RETURN(uint64_t n, ParsePositive("--instances", item));
    if (n > 1024) return Status::InvalidArgument("--instances: " + item + " is above 1024");
    grid.instances.push_back(static_cast<uint32_t>(n));
  }
  return grid;
}

// Tells what kind of file `path` is from its first bytes. A request trace is JSON Lines whose
// first non-blank character is '{'; a capture file starts with its magic (docs/capture-format.md).
Result<InputKind> DetectInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  }
  char buf[4096];
  in.read(buf, sizeof buf);
  const std::streamsize n = in.gcount();
  if (LooksLikeCapture(std::as_bytes(std::span<const char>(buf, static_cast<size_t>(n))))) {
    return InputKind::kCapture;
  }
  for (std::streamsize i = 0; i < n; ++i) {
    const char c = buf[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '{') return InputKind::kTrace;
    break;
  }
  if (n == 0) return Status::Malformed(path + ": empty file: not a request trace");
  return Status::Malformed(path +
                           ": not a request trace (JSON Lines of objects) or a capture file");
}

std::string CapacityText(uint64_t capacity) {
  return capacity == sim::kInfiniteCapacity ? "inf" : std::to_string(capacity);
}

std::string TierText(uint64_t capacity) {
  return capacity == 0 ? "none" : CapacityText(capacity);
}

nlohmann::json TierCapacityJson(uint64_t capacity) {
  if (capacity == 0) return 0;
  if (capacity == sim::kInfiniteCapacity) return nullptr;
  return capacity;
}

nlohmann::json TiersJson(const sim::SimCounts& c) {
  nlohmann::json tiers = nlohmann::json::object();
  for (int t = 0; t < sim::kTiers; ++t) {
    tiers[std::string(sim::TierName(t))] = {{"prefix_hit_blocks", c.prefix_hit_tier[t]},
                                            {"any_hit_blocks", c.any_hit_tier[t]},
                                            {"prefix_block", c.prefix_tier(t)},
                                            {"any_block", c.any_tier(t)}};
  }
  return tiers;
}

nlohmann::json CountsJson(const sim::SimCounts& c) {
  return {{"requests", c.requests},
          {"cpu_evictions", c.cpu_evictions},
          {"disk_evictions", c.disk_evictions},
          {"tiers", TiersJson(c)},
          {"blocks", c.blocks},
          {"prefix_hit_blocks", c.prefix_hit_blocks},
          {"any_hit_blocks", c.any_hit_blocks},
          {"evictions", c.evictions},
          {"input_tokens", c.input_tokens},
          {"prefix_hit_tokens", c.prefix_hit_tokens},
          {"resident_blocks", c.resident_blocks},
          {"prefix_block", c.prefix_block()},
          {"any_block", c.any_block()},
          {"prefix_token", c.prefix_token()}};
}

nlohmann::json RowJson(const sim::SimReport& report) {
  const sim::SimConfig& config = report.config;
  nlohmann::json row = {
      {"policy", sim::PolicyName(config.policy)},
      {"capacity", config.capacity == sim::kInfiniteCapacity ? nlohmann::json(nullptr)
                                                              : nlohmann::json(config.capacity)},
      {"router", sim::RouterName(config.router)},
      {"instances", config.instances},
      {"seed", config.seed},
      {"block_tokens", config.block_tokens}};
  row.update(CountsJson(report.total));
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < report.per_instance.size(); ++i) {
    nlohmann::json one = {{"instance", i}};
    one.update(CountsJson(report.per_instance[i]));
    per.push_back(std::move(one));
  }
  row["per_instance"] = std::move(per);
  row["cpu_capacity"] = TierCapacityJson(config.cpu_capacity);
  row["disk_capacity"] = TierCapacityJson(config.disk_capacity);
  if (config.window_ms > 0) {
    nlohmann::json windows = nlohmann::json::array();
    for (const sim::SimWindow& w : report.windows) {
      nlohmann::json one = {{"start_ms", w.start_ms}};
      one.update(CountsJson(w.total));
      one.erase("resident_blocks");
      nlohmann::json inst = nlohmann::json::array();
      for (size_t i = 0; i < w.per_instance.size(); ++i) {
        nlohmann::json x = {{"instance", i}};
        x.update(CountsJson(w.per_instance[i]));
        x.erase("resident_blocks");
        inst.push_back(std::move(x));
      }
      one["per_instance"] = std::move(inst);
      windows.push_back(std::move(one));
    }
    row["window_ms"] = config.window_ms;
    row["windows"] = std::move(windows);
  }
  return row;
}

// One CSV line of counts (the columns of CsvHeader()).
std::string CsvCounts(const sim::SimCounts& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%.6f,%.6f,%.6f,%.6f,"
                "%.6f,%.6f",
                static_cast<unsigned long long>(c.requests),
                static_cast<unsigned long long>(c.blocks),
                static_cast<unsigned long long>(c.prefix_hit_blocks),
                static_cast<unsigned long long>(c.any_hit_blocks),
                static_cast<unsigned long long>(c.prefix_hit_tier[sim::kGpu]),
                static_cast<unsigned long long>(c.prefix_hit_tier[sim::kCpu]),
                static_cast<unsigned long long>(c.prefix_hit_tier[sim::kDisk]),
                static_cast<unsigned long long>(c.any_hit_tier[sim::kGpu]),
                static_cast<unsigned long long>(c.any_hit_tier[sim::kCpu]),
                static_cast<unsigned long long>(c.any_hit_tier[sim::kDisk]),
                static_cast<unsigned long long>(c.evictions),
                static_cast<unsigned long long>(c.cpu_evictions + c.disk_evictions),
                c.prefix_block(), c.any_block(), c.prefix_token(), c.prefix_tier(sim::kGpu),
                c.prefix_tier(sim::kCpu), c.prefix_tier(sim::kDisk));
  return buf;
}

constexpr const char* kCsvCountsHeader =
    "requests,blocks,prefix_hit_blocks,any_hit_blocks,prefix_hit_gpu,prefix_hit_cpu,"
    "prefix_hit_disk,any_hit_gpu,any_hit_cpu,any_hit_disk,evictions,shared_evictions,"
    "prefix_block,any_block,prefix_token,prefix_block_gpu,prefix_block_cpu,prefix_block_disk";

// The CSV: one line per configuration, or with windows one per (configuration, window, instance),
// instance "all" for the cluster.
std::string RenderCsv(const std::vector<sim::SimReport>& reports, bool windows) {
  std::string out = "policy,capacity,cpu_capacity,disk_capacity,router,instances,";
  if (windows) out += "window_start_ms,instance,";
  out += kCsvCountsHeader;
  out += "\n";
  for (const sim::SimReport& r : reports) {
    const sim::SimConfig& c = r.config;
    const std::string prefix = std::string(sim::PolicyName(c.policy)) + "," +
                               CapacityText(c.capacity) + "," + TierText(c.cpu_capacity) + "," +
                               TierText(c.disk_capacity) + "," +
                               std::string(sim::RouterName(c.router)) + "," +
                               std::to_string(c.instances) + ",";
    if (!windows) {
      out += prefix + CsvCounts(r.total) + "\n";
      continue;
    }
    for (const sim::SimWindow& w : r.windows) {
      char start[64];
      std::snprintf(start, sizeof start, "%.3f", w.start_ms);
      out += prefix + start + ",all," + CsvCounts(w.total) + "\n";
      for (size_t i = 0; i < w.per_instance.size(); ++i) {
        out += prefix + start + "," + std::to_string(i) + "," + CsvCounts(w.per_instance[i]) +
               "\n";
      }
    }
  }
  return out;
}

Status WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Status::Ok();
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Status::IoError(path + ": cannot write: " + std::strerror(errno));
  const size_t written = std::fwrite(text.data(), 1, text.size(), file);
  const bool closed = std::fclose(file) == 0;
  if (written != text.size() || !closed) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

std::string ConfigLabel(const sim::SimConfig& c, bool with_capacity) {
  std::string label = std::string(sim::PolicyName(c.policy));
  if (with_capacity) label += " cap " + CapacityText(c.capacity);
  label += " " + std::string(sim::RouterName(c.router)) + " x" + std::to_string(c.instances);
  if (c.cpu_capacity != 0) label += " cpu " + CapacityText(c.cpu_capacity);
  if (c.disk_capacity != 0) label += " disk " + CapacityText(c.disk_capacity);
  return label;
}

// The SVG of --plot: prefix hit rate over time (one series per configuration) with windows,
// else prefix hit rate against GPU capacity (one series per policy/router/instances/tiers).
std::string RenderPlot(const std::string& trace, const std::vector<sim::SimReport>& reports,
                       bool windows) {
  std::vector<PlotSeries> series;
  PlotSpec spec;
  spec.y_label = "prefix hit rate (% of blocks)";
  if (windows) {
    spec.title = "Prefix hit rate over time: " + trace;
    spec.x_label = "time since the first request (s)";
    for (const sim::SimReport& r : reports) {
      PlotSeries one{ConfigLabel(r.config, true), {}};
      for (const sim::SimWindow& w : r.windows) {
        one.points.emplace_back((w.start_ms - r.windows.front().start_ms) / 1000.0,
                                100.0 * w.total.prefix_block());
      }
      series.push_back(std::move(one));
    }
  } else {
    spec.title = "Prefix hit rate against capacity: " + trace;
    spec.x_label = "GPU capacity per instance (blocks)";
    double lo = 0, hi = 0;
    for (const sim::SimReport& r : reports) {
      if (r.config.capacity == sim::kInfiniteCapacity) continue;
      const std::string label = ConfigLabel(r.config, false);
      auto it = std::find_if(series.begin(), series.end(),
                             [&](const PlotSeries& x) { return x.label == label; });
      if (it == series.end()) {
        series.push_back({label, {}});
        it = series.end() - 1;
      }
      const double cap = static_cast<double>(r.config.capacity);
      it->points.emplace_back(cap, 100.0 * r.total.prefix_block());
      lo = lo == 0 ? cap : std::min(lo, cap);
      hi = std::max(hi, cap);
    }
    for (PlotSeries& x : series) std::sort(x.points.begin(), x.points.end());
    spec.log_x = lo > 0 && hi / lo >= 20;
  }
  return RenderSvgPlot(spec, series);
}

Status RunStorageBenchmark(const ReplayOptions& options, const Trace& trace,
                           const sim::PreparedTrace& prepared) {
  const sim::StorageBenchmarkCounts c = sim::StorageBenchmark(prepared);
  if (options.json != "-") {
    std::printf("trace %s: %s format, storage-benchmark counting (unbounded set, hit = "
                "membership)\n",
                options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str());
    TextTable table({"requests", "total_blocks", "read_blocks", "write_blocks", "prefix_hits",
                     "hit_rate", "write_ratio", "hits_after_first", "contiguous_prefix_hits"});
    table.AddRow({FormatCount(c.requests), FormatCount(c.total_blocks),
                  FormatCount(c.read_blocks), FormatCount(c.write_blocks),
                  FormatCount(c.prefix_hits), FormatPercent(c.hit_rate()),
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
  const uint32_t block_tokens =
      options.block_tokens != 0 ? options.block_tokens : DefaultBlockTokens(trace.format);

  std::vector<sim::SimConfig> configs;
  for (sim::PolicyKind policy : grid.policies) {
    for (uint64_t capacity : grid.capacities) {
      for (sim::RouterKind router : grid.routers) {
        for (uint32_t instances : grid.instances) {
          for (uint64_t cpu : grid.cpu_capacities) {
            for (uint64_t disk : grid.disk_capacities) {
              sim::SimConfig config;
              config.policy = policy;
              config.capacity = capacity;
              config.router = router;
              config.instances = instances;
              config.seed = options.seed;
              config.block_tokens = block_tokens;
              config.cpu_capacity = cpu;
              config.disk_capacity = disk;
              config.window_ms = options.window_s * 1000.0;
              configs.push_back(config);
            }
          }
        }
      }
    }
  }

  // Each configuration is independent: workers take the next index until none is left; results
  // land in their grid position, so the output order never depends on scheduling.
  std::vector<std::optional<Result<sim::SimReport>>> results(configs.size());
  unsigned threads = options.threads != 0 ? options.threads : std::thread::hardware_concurrency();
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
  const bool progress = isatty(STDERR_FILENO) == 1 &&
                        static_cast<double>(prepared.blocks().size()) *
                                static_cast<double>(configs.size()) > 2e7;
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

  TextTable table({"policy", "capacity", "router", "instances", "requests", "blocks",
                   "prefix_hits", "any_hits", "evictions", "prefix_block", "any_block",
                   "prefix_token"});
  nlohmann::json rows = nlohmann::json::array();
  const bool tiered =
      std::any_of(configs.begin(), configs.end(),
                  [](const sim::SimConfig& c) { return c.cpu_capacity != 0 || c.disk_capacity != 0; });
  std::vector<sim::SimReport> reports;
  for (auto& result : results) {
    if (!result->ok()) return result->status();
    reports.push_back(std::move(result->value()));
  }
  if (tiered) {
    table = TextTable({"policy", "capacity", "cpu", "disk", "router", "instances", "blocks",
                       "prefix_hits", "gpu", "cpu_hits", "disk_hits", "any_hits", "evictions",
                       "prefix_block", "any_block", "prefix_token"});
  }
  for (const sim::SimReport& report : reports) {
    const sim::SimCounts& t = report.total;
    if (tiered) {
      table.AddRow({std::string(sim::PolicyName(report.config.policy)),
                    CapacityText(report.config.capacity), TierText(report.config.cpu_capacity),
                    TierText(report.config.disk_capacity),
                    std::string(sim::RouterName(report.config.router)),
                    std::to_string(report.config.instances), FormatCount(t.blocks),
                    FormatCount(t.prefix_hit_blocks), FormatCount(t.prefix_hit_tier[sim::kGpu]),
                    FormatCount(t.prefix_hit_tier[sim::kCpu]),
                    FormatCount(t.prefix_hit_tier[sim::kDisk]), FormatCount(t.any_hit_blocks),
                    FormatCount(t.evictions), FormatPercent(t.prefix_block()),
                    FormatPercent(t.any_block()), FormatPercent(t.prefix_token())});
      rows.push_back(RowJson(report));
      continue;
    }
    table.AddRow({std::string(sim::PolicyName(report.config.policy)),
                  CapacityText(report.config.capacity),
                  std::string(sim::RouterName(report.config.router)),
                  std::to_string(report.config.instances), FormatCount(t.requests),
                  FormatCount(t.blocks), FormatCount(t.prefix_hit_blocks),
                  FormatCount(t.any_hit_blocks), FormatCount(t.evictions),
                  FormatPercent(t.prefix_block()), FormatPercent(t.any_block()),
                  FormatPercent(t.prefix_token())});
    rows.push_back(RowJson(report));
  }

  if (options.json != "-") {
    std::printf("trace %s: %s format, %s requests, %s blocks (%s distinct), %u tokens per block\n",
                options.input.c_str(), std::string(TraceFormatName(trace.format)).c_str(),
                FormatCount(prepared.requests()).c_str(),
                FormatCount(prepared.blocks().size()).c_str(),
                FormatCount(prepared.distinct_blocks()).c_str(), block_tokens);
    std::fputs(table.Render().c_str(), stdout);
    std::fflush(stdout);
  }
  if (!options.json.empty()) {
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
        WriteText(options.plot,
                  RenderPlot(std::filesystem::path(options.input).filename().string(), reports,
                             options.window_s > 0)));
  }
  return Status::Ok();
}

}  // namespace

Status RunReplay(ReplayOptions options) {
  // Usage errors first, before touching the input.
  KVINDEX_RETURN_IF_ERROR(ParseGrid(options).status());
  if (!options.to_trace.empty() && (options.dump || !options.queries.empty())) {
    return Status::InvalidArgument("--to-trace: not with --dump or --queries");
  }
  if (options.to_trace == "-" && options.json == "-") {
    return Status::InvalidArgument("--to-trace - and --json -: only one can go to stdout");
  }
  options.input = options.inputs.front();
  KVINDEX_ASSIGN_OR_RETURN(InputKind kind, DetectInput(options.input));
  switch (kind) {
    case InputKind::kTrace:
      if (options.inputs.size() > 1) {
        return Status::InvalidArgument("a request trace is one file; several inputs are the files "
                                       "of one capture");
      }
      if (options.dump || !options.queries.empty()) {
        return Status::InvalidArgument(options.input +
                                       ": --dump and --queries apply to captures, not traces");
      }
      if (!options.to_trace.empty()) {
        return Status::InvalidArgument(options.input +
                                       ": --to-trace derives a trace from a capture; this is "
                                       "already a request trace");
      }
      return RunTraceReplay(options);
    case InputKind::kCapture: {
      for (size_t i = 1; i < options.inputs.size(); ++i) {
        KVINDEX_ASSIGN_OR_RETURN(InputKind other, DetectInput(options.inputs[i]));
        if (other != InputKind::kCapture) {
          return Status::Malformed(options.inputs[i] + ": not a capture file (the first input is)");
        }
      }
      CaptureReplayArgs args;
      args.inputs = options.inputs;
      args.dump = options.dump;
      args.queries = options.queries;
      args.json = options.json;
      args.max_blocks = options.max_blocks;
      args.to_trace = options.to_trace;
      return RunCaptureReplay(args);
    }
  }
  return Status::Internal("unknown input kind");
}

void AddReplayCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Simulate a request trace (Mooncake FAST'25 or Qwen-Bailian JSONL) on a cluster: hit rates "
      "per eviction policy, capacity, router and instance count; or rebuild the index from a "
      "capture and report, dump or query it");
  cmd->add_option("INPUT", options->inputs,
                  "A request trace (.jsonl), or the files of one capture (.kvcap) in order")
      ->required();
  cmd->add_flag("--dump", options->dump,
                "Capture: print every applied event as one JSON line (docs/cli.md)");
  cmd->add_option("--queries", options->queries,
                  "Capture: answer the queries of FILE (JSON lines) at their 'after' positions; "
                  "exit 1 if an 'expect' differs");
  cmd->add_option("--max-blocks", options->max_blocks,
                  "Capture: cap the index at N resident blocks (least recently touched evicted)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-tokens", options->block_tokens,
                  "Tokens per block, for token hit rates (default: 512 Mooncake, 16 Bailian)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-requests", options->max_requests,
                  "Read only the first N requests of the file (default: all)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--skip-bad", options->skip_bad,
                "Skip and count bad lines instead of failing on the first");
  cmd->add_option("--capacity", options->capacity,
                  "Cache blocks per instance, comma list; 'inf' = unbounded (default: inf)");
  cmd->add_option("--policy", options->policy,
                  "Eviction policies, comma list: lru, lfu, fifo, prefix-lru (default: lru)");
  cmd->add_option("--router", options->router,
                  "Routers, comma list: round-robin, random, least-loaded, cache-aware, session "
                  "(default: round-robin)");
  cmd->add_option("--instances", options->instances,
                  "Instance counts, comma list (default: 1)");
  cmd->add_option("--seed", options->seed, "Seed of the random router (SplitMix64; default 0)");
  cmd->add_option("--threads", options->threads,
                  "Configurations simulated in parallel (default: hardware concurrency)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", options->json, "Write {\"results\": [row...]} to FILE ('-' = stdout)");
  cmd->add_option("--cpu-capacity", options->cpu_capacity,
                  "Blocks of a shared CPU pool (LRU, inclusive) below the GPU tiers, comma list; "
                  "'inf' = unbounded, 'none' = no CPU tier (default: none)");
  cmd->add_option("--disk-capacity", options->disk_capacity,
                  "Blocks of a shared disk tier (LRU, inclusive) below the CPU pool, comma list; "
                  "'inf' = unbounded, 'none' = no disk tier (default: none)");
  cmd->add_option("--mode", options->mode,
                  "simulate (default), or storage-benchmark: the upstream storage benchmark's "
                  "counting (unbounded set, hit = membership)");
  cmd->add_option("--window", options->window_s,
                  "Also count per time window of S seconds (JSON 'windows', CSV rows)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--csv", options->csv,
                  "Write CSV to FILE ('-' = stdout): one line per configuration, or per window "
                  "and instance with --window");
  cmd->add_option("--plot", options->plot,
                  "Write an SVG chart to FILE: prefix hit rate against capacity per "
                  "policy/router (a sweep), or over time with --window");
  cmd->add_option("--to-trace", options->to_trace,
                  "Capture: derive a request trace (Mooncake JSONL) into FILE ('-' = stdout): "
                  "one request per stored chain, hash_ids = the chain's blocks from the root");
  cmd->callback([options, &outcome] {
    outcome.command = "replay";
    outcome.status = RunReplay(*options);
  });
}

}  // namespace kvindex::cli
