// The Prometheus text of GET /metrics: per-source counters, resident blocks, index gauges, the
// request counts, the connection gauges and the query latency histogram, in the documented order
// (docs/http-api.md, "GET /metrics").
//
// Thread safety: reads `index` as PrefixIndex::stats() does (any thread); the metrics and gauges
// are safe to read while requests update them.
#ifndef KVINDEX_SRC_QUERY_METRICS_TEXT_H_
#define KVINDEX_SRC_QUERY_METRICS_TEXT_H_

#include <optional>
#include <span>
#include <string>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/server_backend.h"
#include "kvindex/query/serving_metrics.h"

namespace kvindex {

// Returns the whole text. The arguments are read during the call only.
// `journal`: the kvindex_journal_* gauges, when the process has a journal.
std::string RenderMetricsText(const PrefixIndex& index, std::span<const ServedSource> sources,
                              const RequestMetrics& metrics, const ConnectionGauges& gauges,
                              const std::optional<JournalServing>& journal);

}  // namespace kvindex

#endif  // KVINDEX_SRC_QUERY_METRICS_TEXT_H_
