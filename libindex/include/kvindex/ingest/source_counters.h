// The per-source counters as every output names them: HTTP /instances (`counters`) and /metrics
// (`kvindex_source_<key>_total`), `replay --json` (`sources`) and `subscribe`/`record --json`
// (`sources`, `total`). One list of keys, one meaning each; docs/http-api.md "Per-source counters"
// documents it and docs/cli.md points there.
//
// Each key is exactly one counter (no sums): `malformed` is the payloads that did not decode,
// `frame_errors` the live messages of a wrong frame shape, and so on. The transport keys
// (`messages`, `bytes`, `replay_messages`, ...) are counted by the live subscriber only and are 0
// offline.
//
// Thread safety: pure functions over plain values.
#ifndef KVINDEX_INGEST_SOURCE_COUNTERS_H_
#define KVINDEX_INGEST_SOURCE_COUNTERS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvindex/ingest/ingest.h"

namespace kvindex {

// What the live subscriber counts beside the ingest path (0 offline).
struct TransportCounters {
  uint64_t messages = 0;              // live messages received (any shape)
  uint64_t bytes = 0;                 // bytes of live messages (all frames)
  uint64_t replay_messages = 0;       // messages received on the replay DEALER
  uint64_t replay_timeouts = 0;       // replays given up on
  uint64_t replay_send_failures = 0;  // replay requests that could not be sent
  uint64_t unsupported = 0;           // payloads of an unsupported format or era
  uint64_t unrecorded = 0;            // messages the capture refused (too large for a record)
  // Not a counter: when the latest live message arrived (realtime ns; 0 = none yet, or offline).
  // GET /instances shows it, /metrics turns it into an age, --explain names a silent publisher.
  int64_t last_message_ns = 0;
};

struct SourceCounterField {
  std::string_view key;   // the JSON key; the metric is kvindex_source_<key>_total
  std::string_view help;  // one line, for the metric's HELP
  uint64_t value = 0;
};

inline constexpr size_t kSourceCounterCount = 37;

// Every per-source counter of `ingest` and `transport`, in the documented order.
std::array<SourceCounterField, kSourceCounterCount> SourceCounterFields(
    const SourceCounters& ingest, const TransportCounters& transport);

// Sets `out[key] = value` for every field above: the one renderer of per-source counters. `Object`
// is any JSON object type indexable by std::string (the tools and the HTTP server use nlohmann).
template <typename Object>
void AddSourceCounters(Object& out, const SourceCounters& ingest,
                       const TransportCounters& transport) {
  for (const SourceCounterField& f : SourceCounterFields(ingest, transport)) {
    out[std::string(f.key)] = f.value;
  }
}

}  // namespace kvindex

#endif  // KVINDEX_INGEST_SOURCE_COUNTERS_H_
