#include "fake/schedule.h"

#include <algorithm>
#include <chrono>

namespace kvindex::cli {

std::vector<ScheduleStep> Schedule(const std::vector<FakeSource>& sources, bool by_time) {
  std::vector<ScheduleStep> steps;
  size_t longest = 0;
  for (const auto& s : sources) longest = std::max(longest, s.items.size());
  for (size_t k = 0; k < longest; ++k) {
    for (size_t si = 0; si < sources.size(); ++si) {
      if (k < sources[si].items.size()) steps.push_back({.source = si, .index = k});
    }
  }
  if (by_time) {
    std::stable_sort(steps.begin(), steps.end(), [&](const ScheduleStep& a, const ScheduleStep& b) {
      return sources[a.source].items[a.index].offset_ns <
             sources[b.source].items[b.index].offset_ns;
    });
  }
  return steps;
}

std::optional<SteadyClock::time_point> DueTime(const PublishFakeOptions& o,
                                               SteadyClock::time_point start,
                                               const ScheduleStep& step, const FakeBatch& item) {
  if (o.blast) return std::nullopt;
  if (!o.capture.empty()) return start + std::chrono::nanoseconds(item.offset_ns);
  if (o.rate > 0) {
    return start + std::chrono::nanoseconds(
                       static_cast<int64_t>(static_cast<double>(step.index) * 1e9 / o.rate));
  }
  return std::nullopt;
}

}  // namespace kvindex::cli
