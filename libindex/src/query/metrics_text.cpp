#include "metrics_text.h"

#include <array>
#include <cstdio>
#include <string_view>
#include <vector>

#include "kvindex/ingest/source_counters.h"

namespace kvindex {
namespace {

std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderMetricsText(const PrefixIndex& index, std::span<const ServedSource> sources,
                              const RequestMetrics& metrics, const ConnectionGauges& gauges) {
  std::string out;
  char line[512];
  // One family per per-source counter (source_counters.h), in the documented order.
  std::vector<std::array<SourceCounterField, kSourceCounterCount>> fields;
  fields.reserve(sources.size());
  for (const ServedSource& s : sources)
    fields.push_back(SourceCounterFields(s.counters, s.transport));
  const auto names = SourceCounterFields({}, {});
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string metric = "kvindex_source_" + std::string(names[i].key) + "_total";
    out +=
        "# HELP " + metric + " " + std::string(names[i].help) + "\n# TYPE " + metric + " counter\n";
    for (size_t k = 0; k < sources.size(); ++k) {
      out += metric + "{source=\"" + EscapeLabel(sources[k].name) + "\",instance=\"" +
             EscapeLabel(sources[k].config.name) + "\"} " + std::to_string(fields[k][i].value) +
             "\n";
    }
  }
  const IndexStats stats = index.stats();
  out +=
      "# HELP kvindex_resident_blocks Resident (block, source) presences per instance and tier.\n"
      "# TYPE kvindex_resident_blocks gauge\n";
  for (const InstanceStats& instance : stats.instances) {
    for (const TierPresences& tier : instance.tiers) {
      out += "kvindex_resident_blocks{instance=\"" + EscapeLabel(instance.instance) + "\",tier=\"" +
             EscapeLabel(tier.tier) + "\"} " + std::to_string(tier.presences) + "\n";
    }
  }
  auto gauge = [&](const char* name, const char* help, double value) {
    std::snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name,
                  name, value);
    out += line;
  };
  gauge("kvindex_index_blocks", "Resident distinct blocks.", static_cast<double>(stats.blocks));
  gauge("kvindex_index_presences", "Resident (block, holder, tier) presences.",
        static_cast<double>(stats.presences));
  gauge("kvindex_index_bytes", "Estimated heap bytes of the index.",
        static_cast<double>(stats.bytes));
  gauge("kvindex_index_bytes_per_presence", "Index heap bytes per resident presence.",
        stats.presences == 0
            ? 0.0
            : static_cast<double>(stats.bytes) / static_cast<double>(stats.presences));
  gauge("kvindex_index_evictions", "Blocks evicted by --max-blocks (cumulative).",
        static_cast<double>(stats.evictions));
  out +=
      "# HELP kvindex_http_requests_total HTTP requests by endpoint and status code.\n"
      "# TYPE kvindex_http_requests_total counter\n";
  for (const auto& [key, count] : metrics.Requests()) {
    out += "kvindex_http_requests_total{endpoint=\"" + EscapeLabel(key.first) + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  gauge("kvindex_http_workers",
        "HTTP worker threads running (--http-threads, plus one per connection beyond them).",
        static_cast<double>(gauges.workers.load(std::memory_order_relaxed)));
  gauge("kvindex_http_connections", "HTTP connections being served (one worker each).",
        static_cast<double>(gauges.connections.load(std::memory_order_relaxed)));
  out +=
      "# HELP kvindex_http_query_duration_seconds Time to answer /query, /query_by_hash and "
      "/cache (parse, match, render).\n# TYPE kvindex_http_query_duration_seconds histogram\n";
  const LatencySnapshot latency = metrics.Latency();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kQueryLatencyBounds.size(); ++i) {
    cumulative += latency.buckets[i];
    std::snprintf(line, sizeof(line),
                  "kvindex_http_query_duration_seconds_bucket{le=\"%g\"} %llu\n",
                  kQueryLatencyBounds[i], static_cast<unsigned long long>(cumulative));
    out += line;
  }
  cumulative += latency.buckets[kQueryLatencyBounds.size()];
  out += "kvindex_http_query_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(cumulative) +
         "\n";
  std::snprintf(line, sizeof(line), "kvindex_http_query_duration_seconds_sum %.9f\n",
                static_cast<double>(latency.sum_ns) * 1e-9);
  out += line;
  out += "kvindex_http_query_duration_seconds_count " + std::to_string(latency.count) + "\n";
  return out;
}

}  // namespace kvindex
