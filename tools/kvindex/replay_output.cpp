#include "replay_output.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "plot.h"
#include "report.h"

namespace kvindex::cli {
namespace {

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

// One CSV line of counts (the columns of kCsvCountsHeader).
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

std::string ConfigLabel(const sim::SimConfig& c, bool with_capacity) {
  std::string label = std::string(sim::PolicyName(c.policy));
  if (with_capacity) label += " cap " + CapacityText(c.capacity);
  label += " " + std::string(sim::RouterName(c.router)) + " x" + std::to_string(c.instances);
  if (c.cpu_capacity != 0) label += " cpu " + CapacityText(c.cpu_capacity);
  if (c.disk_capacity != 0) label += " disk " + CapacityText(c.disk_capacity);
  return label;
}

}  // namespace

std::string CapacityText(uint64_t capacity) {
  return capacity == sim::kInfiniteCapacity ? "inf" : std::to_string(capacity);
}

std::string TierText(uint64_t capacity) { return capacity == 0 ? "none" : CapacityText(capacity); }

std::string RenderResultTable(const std::vector<sim::SimReport>& reports) {
  const bool tiered = std::any_of(reports.begin(), reports.end(), [](const sim::SimReport& r) {
    return r.config.cpu_capacity != 0 || r.config.disk_capacity != 0;
  });
  if (!tiered) {
    TextTable table({"policy", "capacity", "router", "instances", "requests", "blocks",
                     "prefix_hits", "any_hits", "evictions", "prefix_block", "any_block",
                     "prefix_token"});
    for (const sim::SimReport& report : reports) {
      const sim::SimCounts& t = report.total;
      table.AddRow(
          {std::string(sim::PolicyName(report.config.policy)), CapacityText(report.config.capacity),
           std::string(sim::RouterName(report.config.router)),
           std::to_string(report.config.instances), FormatCount(t.requests), FormatCount(t.blocks),
           FormatCount(t.prefix_hit_blocks), FormatCount(t.any_hit_blocks),
           FormatCount(t.evictions), FormatPercent(t.prefix_block()), FormatPercent(t.any_block()),
           FormatPercent(t.prefix_token())});
    }
    return table.Render();
  }
  TextTable table({"policy", "capacity", "cpu", "disk", "router", "instances", "blocks",
                   "prefix_hits", "gpu", "cpu_hits", "disk_hits", "any_hits", "evictions",
                   "prefix_block", "any_block", "prefix_token"});
  for (const sim::SimReport& report : reports) {
    const sim::SimCounts& t = report.total;
    table.AddRow(
        {std::string(sim::PolicyName(report.config.policy)), CapacityText(report.config.capacity),
         TierText(report.config.cpu_capacity), TierText(report.config.disk_capacity),
         std::string(sim::RouterName(report.config.router)),
         std::to_string(report.config.instances), FormatCount(t.blocks),
         FormatCount(t.prefix_hit_blocks), FormatCount(t.prefix_hit_tier[sim::kGpu]),
         FormatCount(t.prefix_hit_tier[sim::kCpu]), FormatCount(t.prefix_hit_tier[sim::kDisk]),
         FormatCount(t.any_hit_blocks), FormatCount(t.evictions), FormatPercent(t.prefix_block()),
         FormatPercent(t.any_block()), FormatPercent(t.prefix_token())});
  }
  return table.Render();
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
  row["tier_write"] = sim::TierWriteName(config.tier_write);
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

std::string RenderCsv(const std::vector<sim::SimReport>& reports, bool windows) {
  std::string out = "policy,capacity,cpu_capacity,disk_capacity,router,instances,";
  if (windows) out += "window_start_ms,instance,";
  out += kCsvCountsHeader;
  out += "\n";
  for (const sim::SimReport& r : reports) {
    const sim::SimConfig& c = r.config;
    const std::string prefix =
        std::string(sim::PolicyName(c.policy)) + "," + CapacityText(c.capacity) + "," +
        TierText(c.cpu_capacity) + "," + TierText(c.disk_capacity) + "," +
        std::string(sim::RouterName(c.router)) + "," + std::to_string(c.instances) + ",";
    if (!windows) {
      out += prefix + CsvCounts(r.total) + "\n";
      continue;
    }
    for (const sim::SimWindow& w : r.windows) {
      char start[64];
      std::snprintf(start, sizeof start, "%.3f", w.start_ms);
      out += prefix + start + ",all," + CsvCounts(w.total) + "\n";
      for (size_t i = 0; i < w.per_instance.size(); ++i) {
        out += prefix + start + "," + std::to_string(i) + "," + CsvCounts(w.per_instance[i]) + "\n";
      }
    }
  }
  return out;
}

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

}  // namespace kvindex::cli
