// publish-fake's schedule: the global order in which the sources' batches are sent (round by
// round, or by recorded time for --capture) and when each one is due (--rate per source, the
// recorded pace of a --capture already scaled by --speed, or at once with --blast).
//
// Thread safety: plain functions of their arguments.
#ifndef KVINDEX_TOOLS_FAKE_SCHEDULE_H_
#define KVINDEX_TOOLS_FAKE_SCHEDULE_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "kvindex/core/clock.h"

#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"

namespace kvindex::cli {

// One step of the global schedule: source `source`'s item `index`.
struct ScheduleStep {
  size_t source = 0;
  size_t index = 0;
};

// Every source's batches interleaved round by round (source order within a round); with `by_time`
// then stably sorted by their offset_ns.
std::vector<ScheduleStep> Schedule(const std::vector<FakeSource>& sources, bool by_time);

// When `step` (whose batch is `item`) is due, for a send loop that started at `start`: nullopt to
// send at once (--blast, or --rate 0).
std::optional<SteadyClock::time_point> DueTime(const PublishFakeOptions& o,
                                               SteadyClock::time_point start,
                                               const ScheduleStep& step, const FakeBatch& item);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_SCHEDULE_H_
