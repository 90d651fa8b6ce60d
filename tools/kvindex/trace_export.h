// `kvindex replay CAPTURE --to-trace FILE`: a request trace in Mooncake FAST'25 JSONL format
// derived from the events a capture applied (docs/simulation.md, "Traces from captures"), so the
// simulator can ask "what if" of recorded production traffic.
//
// Each applied BlockStored that adds at least one block new to its source becomes one request
// whose `hash_ids` are the whole chain from the root to its last block: the parent's chain, then
// its own blocks. Blocks are identified by (scope, kvindex prefix hash) and numbered densely in
// first-seen order, so the same prefix gets the same id in every request and from every source.
//
// A stored event that extends the request just before it (same source, its parent that
// request's last block) is that prompt growing (decode, a prefill published in chunks): the
// request is lengthened, not repeated, so a chain of N blocks stored one at a time is one request
// of N ids and the output stays linear in the blocks stored.
//
// Thread safety: none; one thread (the one reading the capture) drives an exporter.
#ifndef KVINDEX_TOOLS_TRACE_EXPORT_H_
#define KVINDEX_TOOLS_TRACE_EXPORT_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/event.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"

namespace kvindex::cli {

struct TraceExportStats {
  uint64_t requests = 0;      // lines written
  uint64_t blocks = 0;        // Σ hash_ids per request
  uint64_t distinct_ids = 0;  // ids assigned
  // Stored events that became no request:
  uint64_t tokenless = 0;  // no token ids (and not a `hash=standard` source with a block size)
  uint64_t orphans = 0;    // the parent is not a block the source holds (or its chain is unknown)
  uint64_t rejected = 0;   // token count not a multiple of the block count, or no blocks
  uint64_t copies = 0;     // every block already held by the source (a copy to another tier)
  uint64_t restarts = 0;   // sources whose sequence went back: their blocks forgotten
};

class TraceExporter {
 public:
  // Opens `path` for writing ("-" = stdout). Fails with kIoError naming the path.
  static Result<std::unique_ptr<TraceExporter>> Open(const std::string& path);
  ~TraceExporter();
  TraceExporter(const TraceExporter&) = delete;
  TraceExporter& operator=(const TraceExporter&) = delete;

  // Every applied batch, in applied order (LoadedCapture's AppliedHook).
  void OnApplied(const SourceConfig& source, uint64_t seq, int64_t recv_ns, const EventBatch& batch);
  // Flushes and closes the file. Fails with kIoError naming the path if any write failed.
  Status Finish();

  const TraceExportStats& stats() const { return stats_; }
  nlohmann::json StatsJson() const;
  // "N requests, B blocks, D distinct ids; skipped: ..." (no newline).
  std::string SummaryLine() const;

 private:
  // One block as first stored by one source: its identity, and the chain it ends.
  struct Node {
    uint64_t prefix = 0;  // kvindex prefix hash
    uint64_t tokens = 0;  // tokens from the root through this block
    uint32_t id = 0;      // the trace id of (scope, prefix)
    uint32_t parent = kNone;
    uint32_t scope = 0;
  };
  struct Held {
    uint32_t node = 0;
    uint64_t tiers = 0;  // bit per tier name (tier_bits_) the source holds it in
  };
  struct SourceState {
    std::unordered_map<uint64_t, Held> blocks;  // engine hash -> held block
    std::optional<uint64_t> last_seq;
  };
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  explicit TraceExporter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  void OnStored(const SourceConfig& source, SourceState& state, const BlockStored& stored,
                int64_t recv_ns);
  uint64_t TierBit(const std::optional<Tier>& tier);
  uint32_t ScopeId(const SourceConfig& source, const EventScopeFields& scope, uint32_t block_size);
  uint32_t IdOf(uint32_t scope, uint64_t prefix);
  void WriteRequest(uint32_t last_node, int64_t recv_ns);
  void WritePending();
  void Flush();

  std::string path_;
  std::FILE* file_ = nullptr;
  bool write_failed_ = false;
  std::string buffer_;
  std::vector<Node> nodes_;
  std::map<std::string, SourceState> sources_;  // by SourceDisplayName
  std::map<std::string, uint64_t> tier_bits_;
  std::map<std::string, uint32_t> scopes_;
  struct IdKey {
    uint64_t prefix = 0;
    uint32_t scope = 0;
    friend bool operator==(const IdKey&, const IdKey&) = default;
  };
  struct IdKeyHash {
    size_t operator()(const IdKey& k) const noexcept {
      return static_cast<size_t>(k.prefix ^ (uint64_t{k.scope} * 0x9E3779B97F4A7C15ull));
    }
  };
  std::unordered_map<IdKey, uint32_t, IdKeyHash> ids_;  // (prefix hash, scope) -> trace id
  std::optional<int64_t> first_ns_;
  int64_t last_us_ = 0;
  std::vector<uint32_t> chain_;  // scratch
  // The latest request, written when the next one starts (or at Finish) so that an extension
  // can still lengthen it.
  struct Pending {
    const SourceState* source = nullptr;
    uint32_t last_node = kNone;
    int64_t recv_ns = 0;
  };
  std::optional<Pending> pending_;
  TraceExportStats stats_;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_TRACE_EXPORT_H_
