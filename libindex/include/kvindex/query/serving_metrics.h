// The serving counters GET /metrics reports besides the index and the sources: requests by
// endpoint and status code, the latency histogram of the query endpoints (/query,
// /query_by_hash, /cache), and the gauges of the transport's connection threads, which the
// transport sets and QueryService only reads.
//
// Thread safety: every member may be used from any thread at once. Count() takes a mutex; the
// histogram and the gauges are relaxed atomics, so a snapshot taken while requests run may hold
// a request in the count but not yet in the sum (as a Prometheus scrape allows).
#ifndef KVINDEX_QUERY_SERVING_METRICS_H_
#define KVINDEX_QUERY_SERVING_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace kvindex {

// What /metrics shows of the transport's connection workers.
struct ConnectionGauges {
  std::atomic<uint64_t> workers{0};      // the transport's I/O threads running
  std::atomic<uint64_t> connections{0};  // connections open
};

// Query latency histogram bounds (seconds).
inline constexpr std::array<double, 12> kQueryLatencyBounds = {
    25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1.0};

// The latency histogram at one moment.
struct LatencySnapshot {
  // Requests per bucket, not cumulative: buckets[i] counts those at most kQueryLatencyBounds[i]
  // (and above the bound before); the last one those above every bound.
  std::array<uint64_t, kQueryLatencyBounds.size() + 1> buckets{};
  uint64_t sum_ns = 0;
  uint64_t count = 0;
};

// (endpoint, status code) -> requests answered.
using RequestCounts = std::map<std::pair<std::string, int>, uint64_t>;

class RequestMetrics {
 public:
  // Counts one answered request (`endpoint` is copied).
  void Count(std::string_view endpoint, int code) {
    std::lock_guard lock(mutex_);
    ++requests_[{std::string(endpoint), code}];
  }

  // Adds one query's time to the histogram.
  void ObserveLatency(std::chrono::nanoseconds elapsed) {
    const double seconds = static_cast<double>(elapsed.count()) * 1e-9;
    size_t bucket = 0;
    while (bucket < kQueryLatencyBounds.size() && seconds > kQueryLatencyBounds[bucket]) ++bucket;
    latency_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
    latency_count_.fetch_add(1, std::memory_order_relaxed);
    latency_sum_ns_.fetch_add(static_cast<uint64_t>(elapsed.count()), std::memory_order_relaxed);
  }

  // A copy of the request counts, in key order.
  RequestCounts Requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

  // Counts one --explain / "explain": true answer for one instance, by reason (match_explain.h).
  void CountExplanation(std::string_view reason) {
    std::lock_guard lock(mutex_);
    ++explanations_[std::string(reason)];
  }
  // A copy of the explanation counts, by reason.
  std::map<std::string, uint64_t> Explanations() const {
    std::lock_guard lock(mutex_);
    return explanations_;
  }

  // The histogram as it stands.
  LatencySnapshot Latency() const {
    LatencySnapshot out;
    for (size_t i = 0; i < out.buckets.size(); ++i) {
      out.buckets[i] = latency_buckets_[i].load(std::memory_order_relaxed);
    }
    out.sum_ns = latency_sum_ns_.load(std::memory_order_relaxed);
    out.count = latency_count_.load(std::memory_order_relaxed);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  RequestCounts requests_;
  std::map<std::string, uint64_t> explanations_;
  std::array<std::atomic<uint64_t>, kQueryLatencyBounds.size() + 1> latency_buckets_{};
  std::atomic<uint64_t> latency_count_{0};
  std::atomic<uint64_t> latency_sum_ns_{0};
};

}  // namespace kvindex

#endif  // KVINDEX_QUERY_SERVING_METRICS_H_
