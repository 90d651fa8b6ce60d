#include "fake/fake_publishers.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"

#include "fake/faults.h"

namespace kvindex::cli {
namespace {

Status ServeAll(PublishRun& run, std::chrono::milliseconds wait) {
  for (auto& p : run.publishers) {
    auto served = p->ServeReplay(wait);
    if (!served.ok()) return served.status();
    wait = std::chrono::milliseconds(0);
  }
  return Status::Ok();
}

// Sleeps until `deadline`, answering replay requests meanwhile.
Status SleepServing(PublishRun& run, SteadyClock::time_point deadline) {
  while (true) {
    const auto now = SteadyClock::now();
    if (now >= deadline) return Status::Ok();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (left.count() == 0) {
      std::this_thread::sleep_until(deadline);
      return Status::Ok();
    }
    KVINDEX_RETURN_IF_ERROR(ServeAll(run, std::min(left, std::chrono::milliseconds(50))));
  }
}

// One publisher per source, then --wait-subscribers.
Status OpenPublishers(const PublishFakeOptions& o, const std::vector<FakeSource>& sources,
                      ReplayStyle style, PublishRun& run) {
  for (const FakeSource& src : sources) {
    PublisherOptions po;
    po.endpoint = src.endpoint;
    po.connect = o.connect_host.empty() ? PublisherConnect::kBind : PublisherConnect::kConnect;
    po.replay_endpoint = src.replay_endpoint;
    po.replay_style = style;
    po.topic = o.topic;
    po.ring_size = o.ring;
    po.send_hwm = o.blast ? 0 : o.hwm;
    po.count_subscribers = o.wait_subscribers > 0;
    po.linger_ms = 5000;
    KVINDEX_ASSIGN_OR_RETURN(auto pub, Publisher::Create(po));
    Log(LogLevel::kInfo,
        "publish-fake: " + FakeSourceName(src.config) + " on " + pub->live_endpoint() +
            (src.replay_endpoint.empty() ? "" : ", replay " + pub->replay_endpoint()));
    run.publishers.push_back(std::move(pub));
  }
  if (o.wait_subscribers > 0) {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.wait_timeout * 1000));
    for (size_t i = 0; i < run.publishers.size(); ++i) {
      Status st = run.publishers[i]->WaitForSubscribers(o.wait_subscribers, timeout);
      if (!st.ok()) return st.WithContext("--wait-subscribers");
    }
  }
  return Status::Ok();
}

// Sends one batch as its fault says: a drop only enters the ring, a corrupt copy goes out live
// while the ring keeps the good payload, a duplicate goes out twice.
Status SendItem(Publisher& pub, const FakeBatch& item) {
  if (item.restart) pub.ClearRing();
  switch (item.fault) {
    case Fault::kDrop:
      pub.Remember(item.seq, item.payload);
      break;
    case Fault::kCorrupt:
      pub.Remember(item.seq, item.payload);
      KVINDEX_RETURN_IF_ERROR(pub.Send(item.seq, CorruptCopy(item.payload)));
      break;
    case Fault::kDuplicate:
      KVINDEX_RETURN_IF_ERROR(pub.Publish(item.seq, item.payload));
      KVINDEX_RETURN_IF_ERROR(pub.Send(item.seq, item.payload));
      break;
    case Fault::kNone:
      KVINDEX_RETURN_IF_ERROR(pub.Publish(item.seq, item.payload));
      break;
  }
  return Status::Ok();
}

// Keeps answering until `linger` seconds pass without a replay request (well-formed or not).
Status Linger(PublishRun& run, double linger) {
  const auto quiet = std::chrono::milliseconds(static_cast<int64_t>(linger * 1000));
  auto requests = [&run] {
    uint64_t n = 0;
    for (const auto& p : run.publishers) {
      n += p->counters().replay_requests + p->counters().replay_malformed;
    }
    return n;
  };
  uint64_t seen = requests();
  auto deadline = SteadyClock::now() + quiet;
  while (SteadyClock::now() < deadline) {
    KVINDEX_RETURN_IF_ERROR(
        SleepServing(run, std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(50))));
    if (requests() != seen) {
      seen = requests();
      deadline = SteadyClock::now() + quiet;
    }
  }
  return Status::Ok();
}

}  // namespace

Status PublishLive(const PublishFakeOptions& o, const std::vector<FakeSource>& sources,
                   const std::vector<ScheduleStep>& steps, ReplayStyle style, PublishRun& run) {
  KVINDEX_RETURN_IF_ERROR(OpenPublishers(o, sources, style, run));
  const auto start = SteadyClock::now();
  for (size_t n = 0; n < steps.size(); ++n) {
    const ScheduleStep& step = steps[n];
    const FakeBatch& item = sources[step.source].items[step.index];
    if (const auto due = DueTime(o, start, step, item)) {
      KVINDEX_RETURN_IF_ERROR(SleepServing(run, *due));
    }
    KVINDEX_RETURN_IF_ERROR(SendItem(*run.publishers[step.source], item));
    if (!o.blast || (n & 255) == 0) {
      KVINDEX_RETURN_IF_ERROR(ServeAll(run, std::chrono::milliseconds(0)));
    }
  }
  run.send_seconds = SecondsSince(start);
  if (o.linger > 0) KVINDEX_RETURN_IF_ERROR(Linger(run, o.linger));
  return Status::Ok();
}

}  // namespace kvindex::cli
