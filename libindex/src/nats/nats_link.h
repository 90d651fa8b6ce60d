// What the journal's publisher and reader share (private to the nats layer): the connection to a
// NATS server list, JetStream contexts, subjects and message ids.
//
// Thread safety: a NatsLink belongs to one owner; nats.c's own threads call the callbacks the
// owner registers (journal_publisher.cpp).
#ifndef KVINDEX_NATS_NATS_LINK_H_
#define KVINDEX_NATS_NATS_LINK_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nats/nats.h>

#include "kvindex/core/status.h"
#include "kvindex/nats/journal.h"

namespace kvindex::nats_internal {

// "nats: <what>: <nats.c's text>" as a Status of `code`.
Status NatsError(StatusCode code, std::string_view what, natsStatus s);

// A connection to the servers of a JournalOptions and its JetStream context.
class NatsLink {
 public:
  NatsLink() = default;
  ~NatsLink();  // closes
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;

  // Connects to `servers`, reconnecting forever after a loss. `retry_in_background`: when no
  // server answers now, the connection keeps trying on nats.c's thread (connected() tells);
  // otherwise kUnavailable. `js_options` (may be null) configures the JetStream context.
  Status Connect(const std::vector<std::string>& servers, bool retry_in_background,
                 jsOptions* js_options);
  bool connected() const;
  // Closes the connection and frees everything. Idempotent.
  void Close();

  natsConnection* connection() const { return nc_; }
  jsCtx* js() const { return js_; }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

// The stream's last sequence; kNotFound when the stream does not exist.
Result<uint64_t> StreamLastSeq(jsCtx* js, const std::string& stream);

// Creates the journal stream when missing (file storage, subjects `<stream>.>`, options'
// replicas, duplicate window and retention limits); Ok when it exists.
Status EnsureStream(jsCtx* js, const JournalOptions& options);
// The same for the stream `name` (subjects `<name>.>`), with the options' replicas and duplicate
// window; `snapshots`: the snapshot stream (journal_snapshot.h: no retention limits, direct gets
// allowed), else the journal (the options' retention limits).
Status EnsureStreamNamed(jsCtx* js, const std::string& name, const JournalOptions& options,
                         bool snapshots);

// `<stream>.src.<16 hex digits of key>`.
std::string SourceSubject(const std::string& stream, uint64_t key);
// The key of a source subject of `stream`; 0 for any other subject.
uint64_t SubjectSourceKey(std::string_view subject, std::string_view stream);

// 16 lower-case hex digits.
std::string Hex64(uint64_t value);
// Parses Hex64()'s form (exactly 16 lower-case hex digits); nullopt for anything else.
std::optional<uint64_t> ParseHex64(std::string_view text);

// The headers naming a message's first batch record's predecessor (record_order.h), as Hex64():
// by its link id and by its chained link id.
inline constexpr const char* kPrevHeader = "Kvindex-Prev";
inline constexpr const char* kChainedPrevHeader = "Kvindex-Chained-Prev";

}  // namespace kvindex::nats_internal

#endif  // KVINDEX_NATS_NATS_LINK_H_
