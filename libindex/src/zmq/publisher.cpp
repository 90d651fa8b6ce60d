#include "kvindex/zmq/publisher.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kvindex/core/clock.h"

namespace kvindex {
namespace {

Status ZmqError(std::string_view what, const std::string& endpoint, const zmq::error_t& error) {
  return Status::IoError(std::string(what) + " '" + endpoint + "': " + error.what());
}

}  // namespace

bool PublisherEndpointBinds(std::string_view endpoint) {
  // vLLM ZmqEventPublisher: bind if '*' or '::' is in the endpoint or it is ipc:// / inproc://;
  // recent SGLang also binds on 0.0.0.0.
  return endpoint.find('*') != std::string_view::npos ||
         endpoint.find("::") != std::string_view::npos ||
         endpoint.find("0.0.0.0") != std::string_view::npos || endpoint.starts_with("ipc://") ||
         endpoint.starts_with("inproc://");
}

struct Publisher::Impl {
  PublisherOptions options;
  zmq::context_t context{1};
  zmq::socket_t live;
  zmq::socket_t router;
  bool has_router = false;
  std::deque<std::pair<uint64_t, std::vector<std::byte>>> ring;
  PublisherCounters counters;
  std::string live_endpoint;
  std::string replay_endpoint;

  void DrainSubscriptions() {
    if (!options.count_subscribers) return;
    zmq::message_t msg;
    while (true) {
      zmq::recv_result_t got;
      try {
        got = live.recv(msg, zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return;
      }
      if (!got) return;
      // XPUB delivers "\x01<prefix>" for a subscription, "\x00<prefix>" for an unsubscription.
      if (msg.size() >= 1 && static_cast<const uint8_t*>(msg.data())[0] == 1) {
        ++counters.subscriptions;
      }
    }
  }

  bool SendFrames(zmq::socket_t& socket, const zmq::message_t& identity,
                  const std::vector<Frame>& frames) {
    try {
      zmq::message_t id_copy(identity.data(), identity.size());
      if (!socket.send(id_copy, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return false;
      }
      for (size_t i = 0; i < frames.size(); ++i) {
        zmq::message_t part(frames[i].data(), frames[i].size());
        auto flags = zmq::send_flags::dontwait;
        if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
        if (!socket.send(part, flags)) return false;
      }
      return true;
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  void Answer(const std::vector<zmq::message_t>& request) {
    // Exactly [identity, "", seq8], as vLLM and the Mooncake store require; anything else is
    // dropped without a reply.
    if (request.size() != 3 || request[1].size() != 0 || request[2].size() != 8) {
      ++counters.replay_malformed;
      return;
    }
    uint64_t start = 0;
    const auto* bytes = static_cast<const uint8_t*>(request[2].data());
    for (int i = 0; i < 8; ++i) start = (start << 8) | bytes[i];
    ++counters.replay_requests;
    const auto topic = std::as_bytes(std::span(options.topic.data(), options.topic.size()));
    for (const auto& [seq, payload] : ring) {
      if (seq < start) continue;
      if (SendFrames(router, request[0], BuildReplayReply(options.replay_style, topic, seq, payload))) {
        ++counters.replay_batches;
      } else {
        ++counters.replay_send_failures;
      }
    }
    if (!SendFrames(router, request[0], BuildReplayEnd(options.replay_style))) {
      ++counters.replay_send_failures;
    }
  }
};

Publisher::Publisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Publisher::~Publisher() = default;

Result<std::unique_ptr<Publisher>> Publisher::Create(PublisherOptions options) {
  if (options.endpoint.empty()) return Status::InvalidArgument("publisher: empty endpoint");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const PublisherOptions& o = impl->options;
  try {
    impl->live = zmq::socket_t(impl->context,
                               o.count_subscribers ? zmq::socket_type::xpub : zmq::socket_type::pub);
    impl->live.set(zmq::sockopt::sndhwm, o.send_hwm);
    impl->live.set(zmq::sockopt::linger, o.linger_ms);
    if (o.count_subscribers) impl->live.set(zmq::sockopt::xpub_verbose, 1);
    const bool bind = o.connect == PublisherConnect::kBind ||
                      (o.connect == PublisherConnect::kAuto && PublisherEndpointBinds(o.endpoint));
    if (bind) {
      try {
        impl->live.bind(o.endpoint);
      } catch (const zmq::error_t& e) {
        return ZmqError("cannot bind", o.endpoint, e);
      }
      impl->live_endpoint = impl->live.get(zmq::sockopt::last_endpoint);
    } else {
      try {
        impl->live.connect(o.endpoint);
      } catch (const zmq::error_t& e) {
        return ZmqError("cannot connect to", o.endpoint, e);
      }
      impl->live_endpoint = o.endpoint;
    }
    if (!o.replay_endpoint.empty()) {
      impl->router = zmq::socket_t(impl->context, zmq::socket_type::router);
      impl->router.set(zmq::sockopt::sndhwm, o.replay_hwm);
      impl->router.set(zmq::sockopt::linger, o.linger_ms);
      try {
        impl->router.bind(o.replay_endpoint);
      } catch (const zmq::error_t& e) {
        return ZmqError("cannot bind replay endpoint", o.replay_endpoint, e);
      }
      impl->replay_endpoint = impl->router.get(zmq::sockopt::last_endpoint);
      impl->has_router = true;
    }
  } catch (const zmq::error_t& e) {
    return ZmqError("cannot set up publisher", o.endpoint, e);
  }
  return std::unique_ptr<Publisher>(new Publisher(std::move(impl)));
}

Status Publisher::Send(uint64_t seq, std::span<const std::byte> payload) {
  Impl& m = *impl_;
  const Frame seq_frame = EncodeSeqFrame(seq);
  try {
    zmq::message_t topic(m.options.topic.data(), m.options.topic.size());
    zmq::message_t seq_msg(seq_frame.data(), seq_frame.size());
    zmq::message_t body(payload.data(), payload.size());
    // A PUB never blocks: past the high-water mark ZeroMQ drops the message (as upstream).
    if (!m.live.send(topic, zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !m.live.send(seq_msg, zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !m.live.send(body, zmq::send_flags::dontwait)) {
      return Status::IoError("publisher '" + m.live_endpoint + "': send would block");
    }
  } catch (const zmq::error_t& e) {
    return ZmqError("cannot send on", m.live_endpoint, e);
  }
  ++m.counters.batches;
  m.counters.bytes += payload.size();
  return Status::Ok();
}

void Publisher::Remember(uint64_t seq, std::span<const std::byte> payload) {
  Impl& m = *impl_;
  if (m.options.ring_size == 0) return;
  while (m.ring.size() >= m.options.ring_size) m.ring.pop_front();
  m.ring.emplace_back(seq, std::vector<std::byte>(payload.begin(), payload.end()));
  ++m.counters.remembered;
}

Status Publisher::Publish(uint64_t seq, std::span<const std::byte> payload) {
  Remember(seq, payload);
  return Send(seq, payload);
}

void Publisher::ClearRing() { impl_->ring.clear(); }

Result<uint64_t> Publisher::ServeReplay(std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  m.DrainSubscriptions();
  if (!m.has_router) return uint64_t{0};
  uint64_t seen = 0;
  try {
    zmq::pollitem_t item{m.router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return seen;
    while (true) {
      std::vector<zmq::message_t> request;
      auto got = zmq::recv_multipart(m.router, std::back_inserter(request),
                                     zmq::recv_flags::dontwait);
      if (!got) break;
      ++seen;
      m.Answer(request);
    }
  } catch (const zmq::error_t& e) {
    return ZmqError("replay endpoint", m.replay_endpoint, e);
  }
  return seen;
}

Status Publisher::WaitForSubscribers(uint64_t count, std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  if (!m.options.count_subscribers) {
    return Status::InvalidArgument("publisher: waiting for subscribers needs count_subscribers");
  }
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    m.DrainSubscriptions();
    if (m.counters.subscriptions >= count) return Status::Ok();
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      return Status::Timeout("publisher '" + m.live_endpoint + "': " +
                             std::to_string(m.counters.subscriptions) + " of " +
                             std::to_string(count) + " subscriber(s) after " +
                             std::to_string(timeout.count()) + " ms");
    }
    auto slice = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(20),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
            std::chrono::milliseconds(1));
    try {
      std::vector<zmq::pollitem_t> items{{m.live.handle(), 0, ZMQ_POLLIN, 0}};
      if (m.has_router) items.push_back({m.router.handle(), 0, ZMQ_POLLIN, 0});
      zmq::poll(items.data(), items.size(), slice);
    } catch (const zmq::error_t& e) {
      return ZmqError("poll", m.live_endpoint, e);
    }
    auto served = ServeReplay();
    if (!served.ok()) return served.status();
  }
}

size_t Publisher::ring_batches() const { return impl_->ring.size(); }
const PublisherCounters& Publisher::counters() const { return impl_->counters; }
const PublisherOptions& Publisher::options() const { return impl_->options; }
std::string Publisher::live_endpoint() const { return impl_->live_endpoint; }
std::string Publisher::replay_endpoint() const { return impl_->replay_endpoint; }

}  // namespace kvindex
