// Publisher: a ZeroMQ KV-event publisher that behaves like vLLM's, SGLang's or the Mooncake store's
// (docs/wire-formats.md): a PUB (or XPUB) socket sending `[topic, seq_be8, payload]`, and a replay
// ring of the last N batches behind a ROUTER answering the replay protocol in one of the three
// reply layouts (framing.h ReplayStyle).
//
// The caller owns the sequence numbers and the payload bytes (publish-fake encodes them with the
// event codec), so faults are easy to build from the primitives: Send() puts a batch on the wire
// only, Remember() keeps it in the ring only, Publish() does both. Replay requests are answered
// only inside ServeReplay(), which the caller runs between batches (as upstream publishers poll
// their ROUTER between queue items): replies come promptly while live publishing pauses.
//
// Replay rules (vLLM kv_events.py and Mooncake KVEventConsumer::service_replay): a request is
// `["", start_seq_be8]` from a DEALER or `[start_seq_be8]` from a REQ; the reply is every ring
// batch with seq >= start_seq, oldest first, then the end marker. A request older than the ring
// starts at the oldest kept batch; one past the end gets only the end marker; a malformed request
// gets no reply and is counted.
//
// Thread safety: one thread uses a Publisher; counters() may be read from that thread only.
#ifndef KVINDEX_ZMQ_PUBLISHER_H_
#define KVINDEX_ZMQ_PUBLISHER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kvindex/codec/framing.h"
#include "kvindex/core/status.h"

namespace kvindex {

// Whether the publisher binds its endpoint or connects to it.
enum class PublisherConnect : uint8_t {
  kAuto,     // bind when the endpoint contains '*', '::' or "0.0.0.0", or is ipc:// / inproc://;
             // otherwise connect (then the subscriber binds), as vLLM and SGLang decide
  kBind,
  kConnect,
};

// Returns true when kAuto binds `endpoint` (the rule above).
bool PublisherEndpointBinds(std::string_view endpoint);

struct PublisherOptions {
  std::string endpoint;                 // e.g. "tcp://*:5557"
  PublisherConnect connect = PublisherConnect::kAuto;
  std::string replay_endpoint;          // empty: no replay ROUTER; otherwise always bound
  ReplayStyle replay_style = ReplayStyle::kVllm;
  std::string topic;                    // frame 0 of every live message (and kVllmTopic replies)
  size_t ring_size = 10000;             // batches kept for replay (vLLM buffer_steps); 0 = none
  int send_hwm = 100000;                // SNDHWM in messages (vLLM hwm); 0 = unlimited
  int replay_hwm = 0;                   // the ROUTER's SNDHWM; 0 = unlimited (replies never drop)
  // Milliseconds Close() waits for unsent messages (ZMQ_LINGER); -1 = forever.
  int linger_ms = 2000;
  // True: use an XPUB socket and count subscriptions, so WaitForSubscribers() can hold publishing
  // until subscribers are connected (no slow-joiner loss).
  bool count_subscribers = false;
};

struct PublisherCounters {
  uint64_t batches = 0;            // live messages sent (duplicates included)
  uint64_t bytes = 0;              // payload bytes sent live
  uint64_t remembered = 0;         // batches put in the ring
  uint64_t replay_requests = 0;    // well-formed replay requests answered
  uint64_t replay_batches = 0;     // batches sent in replay replies
  uint64_t replay_malformed = 0;   // requests that got no reply (bad frame count or sequence)
  uint64_t replay_send_failures = 0;  // reply messages the ROUTER could not send
  uint64_t subscriptions = 0;      // subscribe messages seen on the XPUB socket
};

class Publisher {
 public:
  // Creates the sockets and binds / connects them. kInvalidArgument for an empty endpoint;
  // kIoError (naming the endpoint) when ZeroMQ refuses to bind or connect.
  static Result<std::unique_ptr<Publisher>> Create(PublisherOptions options);
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Sends `[topic, seq_be8, payload]` live, without keeping it for replay. kIoError when the
  // socket refuses the message (a PUB never blocks: past the HWM messages are dropped by ZeroMQ).
  Status Send(uint64_t seq, std::span<const std::byte> payload);
  // Keeps `(seq, payload)` in the replay ring (dropping the oldest beyond ring_size).
  void Remember(uint64_t seq, std::span<const std::byte> payload);
  // Remember() then Send().
  Status Publish(uint64_t seq, std::span<const std::byte> payload);
  // Forgets every kept batch (an engine restart loses its buffer).
  void ClearRing();

  // Answers replay requests: waits up to `wait` for the first one, then answers every request
  // already queued. Returns the number of requests seen (malformed ones included).
  Result<uint64_t> ServeReplay(std::chrono::milliseconds wait = std::chrono::milliseconds(0));

  // With count_subscribers: waits until `count` subscriptions arrived (serving replay meanwhile).
  // kTimeout after `timeout`; kInvalidArgument without count_subscribers.
  Status WaitForSubscribers(uint64_t count, std::chrono::milliseconds timeout);

  // How many batches the ring holds.
  size_t ring_batches() const;
  const PublisherCounters& counters() const;
  const PublisherOptions& options() const;
  // The endpoint after binding (resolves tcp://*:0 to the chosen port); the configured one when
  // connecting.
  std::string live_endpoint() const;
  std::string replay_endpoint() const;

 private:
  struct Impl;
  explicit Publisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_ZMQ_PUBLISHER_H_
