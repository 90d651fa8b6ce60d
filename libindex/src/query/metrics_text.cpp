// GET /metrics through prometheus-cpp: a Collectable whose Collect() reads the counters as they
// stand at the scrape and builds the metric families; prometheus::TextSerializer writes the text
// (label escaping, number formatting). The values live in the index, the sources and the serving
// metrics, not in prometheus-cpp's own counters, so nothing is registered or updated per request.
#include "metrics_text.h"

#include <algorithm>

#include <array>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "kvindex/core/utf8.h"
#include "kvindex/core/clock.h"
#include "kvindex/core/lag_histogram.h"
#include "kvindex/ingest/source_counters.h"

namespace kvindex {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// A label; its value (a name from outside) is made valid UTF-8 first.
ClientMetric::Label LabelOf(std::string name, std::string_view value) {
  return ClientMetric::Label{std::move(name), ToValidUtf8(value)};
}

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

MetricFamily GaugeFamily(std::string name, std::string help, double value) {
  MetricFamily family = Family(std::move(name), std::move(help), MetricType::Gauge);
  family.metric.emplace_back().gauge.value = value;
  return family;
}

// A histogram of one series: `buckets` per bucket (not cumulative), one more than `bounds` (the
// last above every bound).
MetricFamily HistogramFamily(std::string name, std::string help, std::span<const double> bounds,
                             std::span<const uint64_t> buckets, uint64_t count, double sum) {
  MetricFamily family = Family(std::move(name), std::move(help), MetricType::Histogram);
  ClientMetric::Histogram& h = family.metric.emplace_back().histogram;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += buckets[i];
    h.bucket.push_back({cumulative, bounds[i]});
  }
  cumulative += buckets[bounds.size()];
  h.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  h.sample_count = count;
  h.sample_sum = sum;
  return family;
}

class ServingCollector final : public prometheus::Collectable {
 public:
  ServingCollector(const PrefixIndex& index, std::span<const ServedSource> sources,
                   const RequestMetrics& metrics, const ConnectionGauges& gauges,
                   const std::optional<JournalServing>& journal)
      : index_(index), sources_(sources), metrics_(metrics), gauges_(gauges), journal_(journal) {}

  // The families in the documented order (docs/http-api.md, "GET /metrics").
  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    AddSourceCounters(out);
    AddSourceTrust(out);
    AddSilence(out);
    const IndexStats stats = index_.stats();
    MetricFamily resident =
        Family("kvindex_resident_blocks",
               "Resident (block, source) presences per instance and tier.", MetricType::Gauge);
    for (const InstanceStats& instance : stats.instances) {
      for (const TierPresences& tier : instance.tiers) {
        ClientMetric& m = resident.metric.emplace_back();
        m.label = {LabelOf("instance", instance.instance), LabelOf("tier", tier.tier)};
        m.gauge.value = static_cast<double>(tier.presences);
      }
    }
    out.push_back(std::move(resident));
    out.push_back(GaugeFamily("kvindex_index_blocks", "Resident distinct blocks.",
                              static_cast<double>(stats.blocks)));
    out.push_back(GaugeFamily("kvindex_index_presences",
                              "Resident (block, holder, tier) presences.",
                              static_cast<double>(stats.presences)));
    out.push_back(GaugeFamily("kvindex_index_bytes", "Estimated heap bytes of the index.",
                              static_cast<double>(stats.bytes)));
    out.push_back(
        GaugeFamily("kvindex_index_bytes_per_presence", "Index heap bytes per resident presence.",
                    stats.presences == 0
                        ? 0.0
                        : static_cast<double>(stats.bytes) / static_cast<double>(stats.presences)));
    out.push_back(GaugeFamily("kvindex_index_evictions",
                              "Blocks evicted by --max-blocks (cumulative).",
                              static_cast<double>(stats.evictions)));
    MetricFamily requests =
        Family("kvindex_http_requests_total", "HTTP requests by endpoint and status code.",
               MetricType::Counter);
    for (const auto& [key, count] : metrics_.Requests()) {
      ClientMetric& m = requests.metric.emplace_back();
      m.label = {LabelOf("endpoint", key.first), LabelOf("code", std::to_string(key.second))};
      m.counter.value = static_cast<double>(count);
    }
    out.push_back(std::move(requests));
    MetricFamily reasons =
        Family("kvindex_explain_reasons_total",
               "Instances explained by --explain answers, by reason (block-size, salt, lora, "
               "group, eagle-bigram, silent-publisher, ...).",
               MetricType::Counter);
    for (const auto& [reason, count] : metrics_.Explanations()) {
      ClientMetric& m = reasons.metric.emplace_back();
      m.label = {LabelOf("reason", reason)};
      m.counter.value = static_cast<double>(count);
    }
    out.push_back(std::move(reasons));
    out.push_back(GaugeFamily(
        "kvindex_http_workers",
        "HTTP threads serving connections (--http-threads with --http-mode pool; one per "
        "open or parked connection with --http-mode dedicated).",
        static_cast<double>(gauges_.workers.load(std::memory_order_relaxed))));
    out.push_back(
        GaugeFamily("kvindex_http_connections", "HTTP connections open.",
                    static_cast<double>(gauges_.connections.load(std::memory_order_relaxed))));
    out.push_back(LatencyFamily());
    if (journal_) AddJournal(*journal_, out);
    return out;
  }

 private:
  // Seconds since each subscribed source's latest live message (since it was first listened to,
  // when none came yet): a publisher that went silent stands out.
  void AddSilence(std::vector<MetricFamily>& out) const {
    MetricFamily family =
        Family("kvindex_source_seconds_since_last_message",
               "Seconds since the source's latest live message (since the subscriber started "
               "listening, when none came yet).",
               MetricType::Gauge);
    const int64_t now = RealtimeNs();
    for (const ServedSource& s : sources_) {
      if (!s.subscribed) continue;
      const int64_t since = s.transport.last_message_ns != 0 ? s.transport.last_message_ns
                                                              : s.watched_since_ns;
      ClientMetric& m = family.metric.emplace_back();
      m.label = {LabelOf("source", s.name), LabelOf("instance", s.config.name)};
      m.gauge.value = since == 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, now - since)) * 1e-9;
    }
    out.push_back(std::move(family));
  }

  // One family per per-source counter (source_counters.h), in the documented order.
  void AddSourceCounters(std::vector<MetricFamily>& out) const {
    std::vector<std::array<SourceCounterField, kSourceCounterCount>> fields;
    fields.reserve(sources_.size());
    for (const ServedSource& s : sources_) {
      fields.push_back(SourceCounterFields(s.counters, s.transport));
    }
    const auto names = SourceCounterFields({}, {});
    for (size_t i = 0; i < names.size(); ++i) {
      MetricFamily family = Family("kvindex_source_" + std::string(names[i].key) + "_total",
                                   std::string(names[i].help), MetricType::Counter);
      for (size_t k = 0; k < sources_.size(); ++k) {
        ClientMetric& m = family.metric.emplace_back();
        m.label = {LabelOf("source", sources_[k].name),
                   LabelOf("instance", sources_[k].config.name)};
        m.counter.value = static_cast<double>(fields[k][i].value);
      }
      out.push_back(std::move(family));
    }
  }

  // The trust state of each source (source_trust.h): a 0/1 gauge per state, transitions by
  // reason, and the lost batches and start of a degraded episode.
  void AddSourceTrust(std::vector<MetricFamily>& out) const {
    MetricFamily state = Family("kvindex_source_state",
                                "1 for the source's trust state (exact, degraded, stale), else 0.",
                                MetricType::Gauge);
    MetricFamily transitions =
        Family("kvindex_trust_transitions_total",
               "Trust state transitions of the source, by the reason that made each.",
               MetricType::Counter);
    MetricFamily lost =
        Family("kvindex_source_degraded_lost_batches",
               "Batches lost since the source became degraded (0 when not).", MetricType::Gauge);
    MetricFamily since =
        Family("kvindex_source_degraded_since_seconds",
               "When the source became degraded, in Unix seconds (0 when not degraded).",
               MetricType::Gauge);
    for (const ServedSource& s : sources_) {
      const SourceTrust& t = s.counters.trust;
      const auto labels = [&s](std::string key, std::string_view value) {
        return std::vector<ClientMetric::Label>{LabelOf("source", s.name),
                                                LabelOf("instance", s.config.name),
                                                LabelOf(std::move(key), value)};
      };
      for (const TrustState st : {TrustState::kExact, TrustState::kDegraded, TrustState::kStale}) {
        ClientMetric& m = state.metric.emplace_back();
        m.label = labels("state", TrustStateName(st));
        m.gauge.value = t.state() == st ? 1.0 : 0.0;
      }
      for (size_t i = 0; i < kTrustReasonCount; ++i) {
        const auto reason = static_cast<TrustReason>(i);
        if (reason == TrustReason::kStart) continue;
        ClientMetric& m = transitions.metric.emplace_back();
        m.label = labels("reason", TrustReasonName(reason));
        m.counter.value = static_cast<double>(t.transitions(reason));
      }
      const bool degraded = t.state() == TrustState::kDegraded;
      ClientMetric& l = lost.metric.emplace_back();
      l.label = {LabelOf("source", s.name), LabelOf("instance", s.config.name)};
      l.gauge.value = degraded ? static_cast<double>(t.lost_batches()) : 0.0;
      ClientMetric& w = since.metric.emplace_back();
      w.label = l.label;
      w.gauge.value = degraded ? static_cast<double>(t.since_ns() / 1'000'000'000) : 0.0;
    }
    out.push_back(std::move(state));
    out.push_back(std::move(transitions));
    out.push_back(std::move(lost));
    out.push_back(std::move(since));
  }

  // The journal's gauges (docs/scale-out.md, "Monitoring").
  static void AddJournal(const JournalServing& j, std::vector<MetricFamily>& out) {
    const auto gauge = [&out](const char* name, const char* help, uint64_t value) {
      out.push_back(GaugeFamily(name, help, static_cast<double>(value)));
    };
    gauge("kvindex_journal_connected", "1 while connected to NATS.", j.connected ? 1 : 0);
    if (j.replica) {
      gauge("kvindex_journal_applied_seq", "Stream sequence of the latest journal record applied.",
            j.applied_seq);
      gauge("kvindex_journal_stream_last_seq", "The journal stream's last sequence (last seen).",
            j.stream_last_seq);
      gauge("kvindex_journal_lag", "Journal records not applied yet (stream last - applied).",
            j.lag);
      gauge("kvindex_journal_snapshot_seq",
            "The journal sequence the snapshot the replica started from covered (0: none).",
            j.snapshot_seq);
      gauge("kvindex_journal_skipped_seqs",
            "Journal records gone from the stream (retention) before the replica applied them.",
            j.skipped_seqs);
      gauge("kvindex_journal_reordered",
            "Journal batch records that came before their predecessor and were put back in order.",
            j.reordered);
      gauge("kvindex_journal_held_records",
            "Journal records read but waiting for their predecessor before they are applied.",
            j.held_records);
      out.push_back(HistogramFamily(
          "kvindex_journal_apply_lag_seconds",
          "Seconds from the ingester receiving each message (live or replay reply) to this "
          "replica applying it.",
          kLagHistogramBounds, j.apply_lag.buckets, j.apply_lag.count, j.apply_lag.sum_s));
      return;
    }
    gauge("kvindex_journal_records_pending", "Records kept for the journal, not acknowledged yet.",
          j.records_pending);
    gauge("kvindex_journal_bytes_pending", "Bytes of the records pending.", j.bytes_pending);
    gauge("kvindex_journal_last_acked_seq", "Highest stream sequence the journal acknowledged.",
          j.last_acked_seq);
    gauge("kvindex_journal_lost_records", "Records the journal lost (buffer full; cumulative).",
          j.lost_records);
    gauge("kvindex_journal_lost_bytes", "Bytes of the records lost (cumulative).", j.lost_bytes);
    gauge("kvindex_journal_snapshot_seq",
          "The journal sequence the latest snapshot written into the journal covers (0: none).",
          j.snapshot_seq);
    gauge("kvindex_journal_snapshots_written", "Snapshots written into the journal (cumulative).",
          j.snapshots_written);
    gauge("kvindex_journal_snapshots_failed",
          "Journal snapshot attempts that wrote none (cumulative).", j.snapshots_failed);
    gauge("kvindex_journal_snapshot_writer",
          "1 when this ingester holds the journal's snapshot writer lease, else 0.",
          j.snapshot_writer ? 1 : 0);
  }

  MetricFamily LatencyFamily() const {
    const LatencySnapshot latency = metrics_.Latency();
    return HistogramFamily(
        "kvindex_http_query_duration_seconds",
        "Time to answer /query, /query_by_hash and /cache (parse, match, render).",
        kQueryLatencyBounds, latency.buckets, latency.count,
        static_cast<double>(latency.sum_ns) * 1e-9);
  }

  const PrefixIndex& index_;
  std::span<const ServedSource> sources_;
  const RequestMetrics& metrics_;
  const ConnectionGauges& gauges_;
  const std::optional<JournalServing>& journal_;
};

}  // namespace

std::string RenderMetricsText(const PrefixIndex& index, std::span<const ServedSource> sources,
                              const RequestMetrics& metrics, const ConnectionGauges& gauges,
                              const std::optional<JournalServing>& journal) {
  const ServingCollector collector(index, sources, metrics, gauges, journal);
  return prometheus::TextSerializer().Serialize(collector.Collect());
}

}  // namespace kvindex
