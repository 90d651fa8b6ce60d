// The stream publish-fake sends, generated in full before the first send (so --blast measures the
// subscriber, not this process): per source a FakeSource with its endpoints, its definition and
// the FakeBatch list it publishes, each batch with its sequence number, encoded payload and
// fault; and, for an engine workload, the prompts it was generated from. The schedule, the
// publishers, the simulated subscriber and the summary all read these lists, so the sockets, the
// `--out` capture and the `--emit-queries` answers agree.
//
// Thread safety: plain values; one thread builds and reads them.
#ifndef KVINDEX_TOOLS_FAKE_FAKE_STREAM_H_
#define KVINDEX_TOOLS_FAKE_FAKE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvindex/core/event.h"
#include "kvindex/core/source.h"

#include "fake/fake_workload.h"

namespace kvindex::cli {

using Bytes = std::vector<std::byte>;

// What the live socket does with a batch (faults.h assigns them).
enum class Fault : uint8_t { kNone, kDrop, kDuplicate, kCorrupt };

// One batch of one source.
struct FakeBatch {
  size_t source = 0;
  uint64_t index = 0;  // position within the source (0-based)
  uint64_t seq = 0;
  bool restart = false;  // the engine restarted just before this batch
  Fault fault = Fault::kNone;
  Bytes payload;
  std::optional<EventBatch> batch;  // what was encoded (absent for undecodable capture payloads)
  std::vector<TokenId> recent;      // the latest prompt served when the batch was cut
  int64_t offset_ns = 0;            // --capture: when to send, relative to the first message
  uint64_t events = 0, stored = 0, removed = 0, cleared = 0;
};

// One source: instance i, rank r of the fake, or a source of a re-published capture.
struct FakeSource {
  std::string instance;
  std::optional<DpRank> rank_label;  // the source definition's dp_rank (set with --dp-ranks > 1)
  DpRank rank = 0;
  std::string endpoint;
  std::string replay_endpoint;
  uint64_t first_seq = 0;
  SourceConfig config;
  std::vector<FakeBatch> items;
  // Counters for the summary.
  uint64_t batches = 0, events = 0, stored = 0, removed = 0, cleared = 0, bytes = 0;
  uint64_t dropped = 0, duplicated = 0, corrupted = 0, restarts = 0, lost = 0;
};

// The whole stream of a run: its sources with their batches, and the prompt sources of an engine
// workload (kept for the queries that probe them; neither for --batches or --capture).
struct FakeStream {
  std::vector<FakeSource> sources;
  std::optional<SyntheticPrompts> synthetic;
  std::optional<TracePrompts> trace;
};

// A source's display name as SourceDisplayName() (ingest.h) spells it: the instance, plus "/dp<r>"
// with a DP rank label. Re-stated here so publish-fake does not link the index it tests.
std::string FakeSourceName(const SourceConfig& config);

// Frees what only the simulated subscriber reads (each batch's decoded events and recent prompt,
// the prompt sources), keeping what the live run sends and the summary counts, and returns the
// freed memory to the system.
void KeepPayloadsOnly(FakeStream& stream);

// Counts the wire events and blocks of `item.batch` into `item`'s counters (a Mooncake-seed
// BlockStoreEvent, a BlockStored and its StoreUpdate, counts as one event).
void CountEvents(FakeBatch& item);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAKE_STREAM_H_
