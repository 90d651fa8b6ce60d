#include "kvindex/sim/reuse.h"

#include <algorithm>
#include <unordered_set>

#include "stack_depths.h"

namespace kvindex::sim {
namespace {

template <typename T>
Percentiles<T> NearestRank(std::vector<T>& values) {
  Percentiles<T> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  // ceil(p × n / 100), at least 1, as an index from 0.
  auto rank = [n](size_t p) { return std::max<size_t>(1, (p * n + 99) / 100) - 1; };
  out.p50 = values[rank(50)];
  out.p90 = values[rank(90)];
  out.p99 = values[rank(99)];
  return out;
}

}  // namespace

std::string_view RequestClassName(RequestClass c) {
  switch (c) {
    case RequestClass::kContinuation:
      return "continuation";
    case RequestClass::kSharedPrefix:
      return "shared-prefix";
    case RequestClass::kFresh:
      return "fresh";
  }
  return "?";
}

ReuseReport AnalyseReuse(const PreparedTrace& trace) {
  ReuseReport report;
  const auto& blocks = trace.blocks();
  StackDepths stack(trace.distinct_blocks());
  stack.Reset();
  std::vector<double> last_ms(trace.distinct_blocks(), 0);
  std::unordered_set<int64_t> chats;
  std::vector<uint64_t> depths[kRequestClasses + 1];
  std::vector<double> seconds[kRequestClasses + 1];
  std::vector<uint64_t> depth;
  for (size_t i = 0; i < trace.requests(); ++i) {
    const uint64_t begin = trace.begin(i), end = trace.end(i);
    const double now = trace.timestamp_ms(i);
    depth.clear();
    for (uint64_t b = begin; b < end; ++b) depth.push_back(stack.Depth(blocks[b]));
    RequestClass cls = RequestClass::kFresh;
    if (trace.parent_chat_id(i) >= 0 && chats.count(trace.parent_chat_id(i)) != 0) {
      cls = RequestClass::kContinuation;
    } else if (!depth.empty() && depth[0] != 0) {
      cls = RequestClass::kSharedPrefix;
    }
    const int c = static_cast<int>(cls);
    ReuseStats& s = report.classes[c];
    ++s.requests;
    s.blocks += end - begin;
    for (uint64_t b = begin; b < end; ++b) {
      const uint64_t d = depth[b - begin];
      if (d == 0) continue;
      ++s.reused_blocks;
      const double age = (now - last_ms[blocks[b]]) / 1000.0;
      for (int slot : {c, kRequestClasses}) {
        depths[slot].push_back(d);
        seconds[slot].push_back(age);
      }
    }
    for (uint64_t b = begin; b < end; ++b) {
      stack.Touch(blocks[b]);
      last_ms[blocks[b]] = now;
    }
    if (trace.chat_id(i) >= 0) chats.insert(trace.chat_id(i));
  }
  for (int c = 0; c <= kRequestClasses; ++c) {
    ReuseStats& s = c < kRequestClasses ? report.classes[c] : report.all;
    if (c == kRequestClasses) {
      for (const ReuseStats& k : report.classes) {
        s.requests += k.requests;
        s.blocks += k.blocks;
        s.reused_blocks += k.reused_blocks;
      }
    }
    s.distance_blocks = NearestRank(depths[c]);
    s.distance_seconds = NearestRank(seconds[c]);
  }
  return report;
}

}  // namespace kvindex::sim
