// ServerBackend: what a serving process knows besides the index (its sources, their state and
// counters) and the writer-side operations a request may ask for (POST /register, /unregister).
// QueryService (query_service.h) reads the index itself and goes through the backend for
// everything else. LocalBackend is the backend of a process without an ingest thread (tests,
// offline serving).
//
// Thread safety: every ServerBackend call may come from any serving thread at once; an
// implementation runs writes on the index's writer (or under the writer's rules) and waits.
#ifndef KVINDEX_QUERY_SERVER_BACKEND_H_
#define KVINDEX_QUERY_SERVER_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/lag_histogram.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/ingest/source_counters.h"

namespace kvindex {

// What the server reports about one source (GET /instances, /metrics).
struct ServedSource {
  std::string name;  // display name ("vllm-0", "vllm-0/dp1")
  SourceConfig config;
  std::string state;  // "live", "backfilling", "unregistered", ...
  SourceCounters counters;
  TransportCounters transport;  // live messages, bytes, replay traffic (source_counters.h)
  // A live subscriber feeds the source (transport.last_message_ns is then its latest message),
  // listening since watched_since_ns (realtime ns).
  bool subscribed = false;
  int64_t watched_since_ns = 0;
};

// The trust of each instance of `sources` (SourceTrust folded per instance, AddSourceTrust);
// unregistered sources are left out.
InstanceTrustMap InstanceTrusts(std::span<const ServedSource> sources);

// The event journal as a serving process sees it (docs/scale-out.md): an ingester publishing to
// it (`subscribe --journal`) or a replica applying it (`subscribe --from-journal`).
struct JournalServing {
  bool replica = false;
  bool connected = false;
  // Replica: the stream sequence of the latest record applied, the stream's last sequence as last
  // seen, and the difference.
  uint64_t applied_seq = 0;
  uint64_t stream_last_seq = 0;
  uint64_t lag = 0;
  // Replica: "snapshot" (a snapshot in the journal covering snapshot_seq) or "stream" (its first
  // record), and the sequences the stream no longer held when they were due (dropped by its
  // retention limits: what they held is missing from the index). Ingester: snapshot_seq is what
  // the latest snapshot it wrote into the journal covers.
  std::string started_from = "stream";
  uint64_t snapshot_seq = 0;
  uint64_t skipped_seqs = 0;
  // Replica: batch records the stream held before their predecessor (put back in order), and
  // those waiting for it now (read, not applied yet).
  uint64_t reordered = 0;
  uint64_t held_records = 0;
  // Ingester: snapshots written into the journal, and attempts that wrote none.
  uint64_t snapshots_written = 0;
  uint64_t snapshots_failed = 0;
  // Ingester with journal snapshots: it holds the writer lease (the one ingester writing them).
  bool snapshot_writer = false;
  // Replica: seconds from the ingester receiving each message to the replica applying it.
  LagHistogram apply_lag;
  // Ingester: records kept and not yet acknowledged, the highest sequence acknowledged, and what
  // the journal lost (records dropped while its buffer was full).
  uint64_t records_pending = 0;
  uint64_t bytes_pending = 0;
  uint64_t last_acked_seq = 0;
  uint64_t lost_records = 0;
  uint64_t lost_bytes = 0;
};

// What the process knows besides the index, and the writer-side operations.
class ServerBackend {
 public:
  virtual ~ServerBackend() = default;
  // A snapshot of every source. Any thread.
  virtual std::vector<ServedSource> Sources() const = 0;
  // The trust of every instance (what /query answers carry). Any thread. Folded from Sources()
  // once per TrustGeneration() and shared by every query until it changes, so a query costs one
  // reference count, not a copy of every source.
  std::shared_ptr<const InstanceTrustMap> Trust() const;
  // Adds the sources of one POST /register (one per DP rank) on the index's writer; blocks until
  // done. All or nothing: on failure (a source already registered, an endpoint that cannot be
  // opened) none of them is added or listed. kUnsupported when this process cannot add sources
  // while running. `configs` is read during the call only.
  virtual Status Register(std::span<const SourceConfig> configs) = 0;
  // Purges every presence of `instance` and unlists it (POST /unregister) on the writer; blocks
  // until done. kNotFound for an unknown instance.
  virtual Result<ApplyResult> Unregister(const std::string& instance) = 0;
  // GET /snapshot: a producer that writes a consistent snapshot of the index
  // (docs/snapshot-format.md) through `write` (which returns false when the client went away) and
  // returns false on an error. Empty (the default): this process serves no snapshots (501).
  using SnapshotProducer =
      std::function<bool(const std::function<bool(std::string_view chunk)>& write)>;
  virtual SnapshotProducer Snapshot() const { return {}; }

  // The journal's state when the process publishes or applies one; nullopt otherwise. Any thread.
  virtual std::optional<JournalServing> Journal() const { return std::nullopt; }

 protected:
  // Changes whenever what Sources() reports may have changed (0: it may change at any time, so
  // Trust() folds Sources() on every call).
  virtual uint64_t TrustGeneration() const { return 0; }

 private:
  mutable std::mutex trust_mutex_;
  mutable uint64_t trust_generation_ = 0;
  mutable std::shared_ptr<const InstanceTrustMap> trust_;
};

// A backend for a process whose writer is whichever thread calls it (tests, offline serving):
// AddSource(), Apply() and the writer operations of requests each take one mutex, so they
// serialise as the index's single writer requires.
class LocalBackend : public ServerBackend {
 public:
  // `index` must outlive the backend.
  explicit LocalBackend(PrefixIndex* index) : index_(index) {}
  // Adds a source to the index and lists it as "live". Fails as PrefixIndex::AddSource.
  Result<SourceId> AddSource(const SourceConfig& config);
  // Applies `batch` to the index and counts it on the source. Fails as PrefixIndex::Apply.
  Result<ApplyResult> Apply(SourceId source, const EventBatch& batch);

  std::vector<ServedSource> Sources() const override;
  Status Register(std::span<const SourceConfig> configs) override;
  Result<ApplyResult> Unregister(const std::string& instance) override;

 protected:
  uint64_t TrustGeneration() const override { return generation_.load(); }

 private:
  PrefixIndex* index_;
  std::atomic<uint64_t> generation_{1};  // bumped by every change to sources_
  mutable std::mutex mutex_;
  std::vector<ServedSource> sources_;  // by SourceId
};

}  // namespace kvindex

#endif  // KVINDEX_QUERY_SERVER_BACKEND_H_
