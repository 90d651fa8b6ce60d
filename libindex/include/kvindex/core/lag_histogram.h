// LagHistogram: a fixed-bucket histogram of delays in seconds, as /metrics reports it (a
// Prometheus histogram). A replica counts in it the time from the ingester receiving each message
// to the replica applying it (`kvindex_journal_apply_lag_seconds`, docs/scale-out.md); it is a
// plain value, so a snapshot of it is a copy and allocates nothing.
//
// Thread safety: a value; one writer, copies for readers.
#ifndef KVINDEX_CORE_LAG_HISTOGRAM_H_
#define KVINDEX_CORE_LAG_HISTOGRAM_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvindex {

// Upper bounds of the buckets, seconds: fine up to 150 ms, where a live replica's lag and its
// tail lie (no wider than 25 ms there, so that a p99 read from the buckets is close), coarse up to
// a minute for a replica catching up.
inline constexpr std::array<double, 26> kLagHistogramBounds = {
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06,
    0.075,  0.1,   0.125, 0.15,  0.2,   0.3,    0.5,  1.0,   2.0,  5.0,  10.0, 30.0, 60.0};

struct LagHistogram {
  // Delays per bucket, not cumulative: buckets[i] counts those at most kLagHistogramBounds[i]
  // (and above the bound before); the last one those above every bound.
  std::array<uint64_t, kLagHistogramBounds.size() + 1> buckets{};
  uint64_t count = 0;
  double sum_s = 0;

  // Counts one delay; a negative one (clocks of two hosts apart) counts as 0.
  void Add(double seconds) {
    if (!(seconds > 0)) seconds = 0;
    size_t bucket = 0;
    while (bucket < kLagHistogramBounds.size() && seconds > kLagHistogramBounds[bucket]) ++bucket;
    ++buckets[bucket];
    ++count;
    sum_s += seconds;
  }
};

}  // namespace kvindex

#endif  // KVINDEX_CORE_LAG_HISTOGRAM_H_
