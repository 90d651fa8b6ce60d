// The clocks kvindex reads, in one place: wall-clock time for what is recorded (capture receive
// times, publish timestamps) and a monotonic clock for intervals, deadlines and rates.
// Thread safety: any thread.
#ifndef KVINDEX_CORE_CLOCK_H_
#define KVINDEX_CORE_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace kvindex {

// The monotonic clock for intervals and deadlines (never jumps with the wall clock).
using SteadyClock = std::chrono::steady_clock;

// Inline: the subscriber reads the wall clock once per message.
inline int64_t ReadClockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Wall-clock time, nanoseconds since the Unix epoch (CLOCK_REALTIME).
inline int64_t RealtimeNs() { return ReadClockNs(CLOCK_REALTIME); }
// Seconds elapsed since `start` on the monotonic clock.
inline double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace kvindex

#endif  // KVINDEX_CORE_CLOCK_H_
