// The clocks kvindex reads, in one place: wall-clock time for what is recorded (capture receive
// times, publish timestamps) and a monotonic clock for intervals, deadlines and rates.
// Thread safety: any thread.
#ifndef KVINDEX_CORE_CLOCK_H_
#define KVINDEX_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace kvindex {

// The monotonic clock for intervals and deadlines (never jumps with the wall clock).
using SteadyClock = std::chrono::steady_clock;

// Wall-clock time, nanoseconds since the Unix epoch (CLOCK_REALTIME).
int64_t RealtimeNs();
// Wall-clock time, seconds since the Unix epoch, as a double (publish timestamps).
double RealtimeSeconds();
// Monotonic time in nanoseconds from an arbitrary origin (CLOCK_MONOTONIC).
int64_t MonotonicNs();
// Seconds elapsed since `start` on the monotonic clock.
double SecondsSince(SteadyClock::time_point start);

}  // namespace kvindex

#endif  // KVINDEX_CORE_CLOCK_H_
