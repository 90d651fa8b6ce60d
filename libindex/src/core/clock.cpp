#include "kvindex/core/clock.h"

#include <time.h>

namespace kvindex {
namespace {

int64_t Read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t RealtimeNs() { return Read(CLOCK_REALTIME); }
double RealtimeSeconds() { return static_cast<double>(RealtimeNs()) / 1e9; }
int64_t MonotonicNs() { return Read(CLOCK_MONOTONIC); }
double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace kvindex
