// publish-fake's serving: one ZeroMQ Publisher per source (bound, or connected to a binding
// subscriber, with its replay ROUTER), the send loop that paces the schedule and injects the
// faults, and the replay requests it answers while it waits, between sends and during --linger.
//
// Thread safety: one thread drives a PublishRun.
#ifndef KVINDEX_TOOLS_FAKE_FAKE_PUBLISHERS_H_
#define KVINDEX_TOOLS_FAKE_FAKE_PUBLISHERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/core/status.h"
#include "kvindex/zmq/publisher.h"

#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"
#include "fake/schedule.h"

namespace kvindex::cli {

// The publishers of one run (one per source, in source order) and what the send loop measured.
struct PublishRun {
  std::vector<std::unique_ptr<Publisher>> publishers;
  double send_seconds = 0;  // from the first send to the end of the last
};

// Opens a publisher per source, waits for --wait-subscribers, sends `steps` in order (paced by
// DueTime(), faults applied, replay requests answered meanwhile) and then lingers while replay
// requests keep coming. Fails with the first socket error; a --wait-subscribers timeout has the
// context "--wait-subscribers". `sources` and `steps` are only read during the call.
Status PublishLive(const PublishFakeOptions& o, const std::vector<FakeSource>& sources,
                   const std::vector<ScheduleStep>& steps, ReplayStyle style, PublishRun& run);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAKE_PUBLISHERS_H_
