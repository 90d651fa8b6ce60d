// LagHistogram (core/lag_histogram.h): each delay lands in the first bucket whose bound holds it.
#include "kvindex/core/lag_histogram.h"

#include <doctest/doctest.h>

namespace kvindex {
namespace {

TEST_CASE("LagHistogram: a delay goes to the first bucket whose bound is at least it") {
  LagHistogram h;
  h.Add(0.001);    // exactly a bound: that bucket
  h.Add(0.0011);   // just above it: the next
  h.Add(61.0);     // above every bound
  h.Add(-2.0);     // clocks apart: counted as 0
  h.Add(0.0);
  REQUIRE(kLagHistogramBounds[1] == 0.001);
  REQUIRE(kLagHistogramBounds[2] == 0.002);
  CHECK(h.buckets[0] == 2);
  CHECK(h.buckets[1] == 1);
  CHECK(h.buckets[2] == 1);
  CHECK(h.buckets[kLagHistogramBounds.size()] == 1);
  uint64_t total = 0;
  for (const uint64_t n : h.buckets) total += n;
  CHECK(total == 5);
  CHECK(h.count == 5);
  CHECK(h.sum_s == doctest::Approx(0.001 + 0.0011 + 61.0));
}

TEST_CASE("LagHistogram: the bounds rise") {
  for (size_t i = 1; i < kLagHistogramBounds.size(); ++i) {
    CHECK(kLagHistogramBounds[i - 1] < kLagHistogramBounds[i]);
  }
}

// A live replica's lag and its tail lie below 150 ms (the target is a p99 of 50 ms): buckets there
// are at most 25 ms wide, and 50 ms is a bound, so a p99 read from the buckets is close.
TEST_CASE("LagHistogram: fine buckets up to 150 ms") {
  bool has_50ms = false;
  for (size_t i = 1; i < kLagHistogramBounds.size() && kLagHistogramBounds[i] <= 0.15; ++i) {
    CAPTURE(kLagHistogramBounds[i]);
    CHECK(kLagHistogramBounds[i] - kLagHistogramBounds[i - 1] <= 0.025 + 1e-12);
    has_50ms |= kLagHistogramBounds[i] == 0.05;
  }
  CHECK(has_50ms);
  CHECK(kLagHistogramBounds.back() >= 60.0);
}

}  // namespace
}  // namespace kvindex
