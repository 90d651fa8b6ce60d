// PrefixIndex: which source holds which block in which tier, and the per-instance prefix match.
//
// The index keys every block by (scope, prefix hash) (scope.h, block_hash.h): nothing is shared
// across scopes. Each instance has an engine-hash -> block map whose entries remember their scope,
// so a BlockRemoved (which carries no LoRA or block size) finds its block. Presence is recorded per
// (holder, tier), where a holder is one source at one DP rank: stores and removes are idempotent,
// duplicates and replays never inflate counts, removing one replica never erases another, and
// clearing a source touches only that source's presence. Every rule is in docs/index-rules.md; the
// design and the memory layout are in docs/architecture.md ("Index concurrency",
// "Index memory layout").
//
// Thread safety: one writer, many readers. Apply(), ClearSource(), RemoveInstance() and AddSource()
// must be called from one thread at a time (the writer). Match*() and stats() may be called from
// any number of other threads concurrently with the writer: readers hold a shared lock for one
// query, the writer takes the exclusive lock for at most kWriterChunk block operations at a time
// and lets a waiting reader in after kWriterMinOps (token hashing of events of more than 4 blocks
// and the rehash of a growing table happen outside the lock), and the lock prefers the writer, so
// neither side stalls the other for longer than one short critical section.
#ifndef KVINDEX_INDEX_PREFIX_INDEX_H_
#define KVINDEX_INDEX_PREFIX_INDEX_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_match.h"

namespace kvindex {

class IndexState;
class IndexLoader;
class StateCopy;

struct IndexOptions {
  // `--max-blocks N`: at most N resident blocks; the least recently touched (stored or matched)
  // block is evicted first. 0 = unbounded.
  uint64_t max_blocks = 0;
};

// What one Apply() / ClearSource() / RemoveInstance() did. Counts are block operations.
struct ApplyResult {
  uint64_t stored = 0;     // (block, holder, tier) presences added (duplicates not counted)
  uint64_t duplicates = 0;  // stores of a presence already recorded (idempotent, no effect)
  uint64_t removed = 0;    // presences removed (by removes, store updates and clears)
  uint64_t orphans = 0;    // blocks not indexed: the parent is given but unknown
  uint64_t tokenless = 0;  // blocks indexed by engine hash only (no token ids)
  uint64_t unmapped = 0;   // removes / store updates naming a hash or key this index never stored
  uint64_t evicted = 0;    // blocks evicted by max_blocks while applying
  uint64_t dp_rank_mismatches = 0;  // the batch's rank differed from the source's label
  uint64_t rejected = 0;   // events not applied (inconsistent shapes; see Apply())

  // True when an orphan occurred: the live subscriber should request a replay (at most one
  // outstanding request per source).
  bool replay_wanted() const { return orphans > 0; }
  ApplyResult& operator+=(const ApplyResult& other);
};

// Resident presences of one instance in one tier.
struct TierPresences {
  std::string tier;  // "GPU", "CPU", "DISK" or another tier's name
  uint64_t presences = 0;
};

struct InstanceStats {
  std::string instance;
  std::vector<TierPresences> tiers;  // tiers with at least one presence
  uint64_t orphans = 0;
};

struct IndexStats {
  uint64_t blocks = 0;     // resident blocks (distinct (scope, key))
  uint64_t presences = 0;  // resident (block, holder, tier) presences
  uint64_t scopes = 0;
  uint64_t orphans = 0;    // cumulative
  uint64_t tokenless = 0;  // cumulative
  uint64_t unmapped = 0;   // cumulative
  uint64_t evictions = 0;  // cumulative
  uint64_t engine_hashes = 0;  // resident engine-hash map entries, all instances
  // Allocator-accounted estimate of the index's heap: capacities of every table, array and
  // overflow presence list it owns.
  uint64_t bytes = 0;
  std::vector<InstanceStats> instances;  // sorted by name
};

class PrefixIndex {
 public:
  explicit PrefixIndex(IndexOptions options = {});
  ~PrefixIndex();
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // Defines a source and lists its instance. Fails (kInvalidArgument) on an empty name or a
  // `serves` list naming "*" together with other instances. Writer only.
  Result<SourceId> AddSource(const SourceConfig& config);

  // Applies one batch from `source` in order. A batch never fails as a whole: an event whose shape
  // is inconsistent (e.g. token ids not a multiple of the block count) is counted as `rejected`
  // and skipped. Fails only for an unknown source (kInvalidArgument). Writer only.
  Result<ApplyResult> Apply(SourceId source, const EventBatch& batch);

  // Drops every presence of `source` (AllBlocksCleared, RemoveAllEvent, a publisher restart).
  // Other sources' presence is untouched. Writer only.
  Result<ApplyResult> ClearSource(SourceId source);

  // Purges every presence of the instance's sources and unlists it (HTTP /unregister). A later
  // AddSource() with the same name lists it again. Fails (kNotFound) for an unknown name. Writer
  // only.
  Result<ApplyResult> RemoveInstance(std::string_view instance);

  // Queries (docs/index-rules.md "Query walk"). Each walks the prompt's blocks in order per
  // instance and stops at the first block the instance lacks. Fail (kInvalidArgument) for a block
  // size of 0 given explicitly. An unknown model or tenant gives an empty answer. Any thread.
  //
  // By token ids: prefix hashes of every full block (the partial tail is ignored), computed with
  // each instance's block size and hash seed.
  Result<PrefixMatch> MatchTokens(const MatchQuery& query, std::span<const TokenId> tokens) const;
  // By the instance's own engine hashes (HTTP /query_by_hash `block_hash`), looked up in each
  // instance's engine-hash map.
  Result<PrefixMatch> MatchEngineHashes(const MatchQuery& query,
                                        std::span<const EngineHash> hashes) const;
  // By kvindex prefix hashes (HTTP /query_by_hash `seq_hashes`).
  Result<PrefixMatch> MatchPrefixHashes(const MatchQuery& query,
                                        std::span<const PrefixHash> hashes) const;
  // The same three into `out`, whose storage is reused (its previous answer is dropped): a caller
  // that keeps one PrefixMatch per thread queries without allocating once it has grown. On error
  // `out` holds no instance.
  Status MatchTokens(const MatchQuery& query, std::span<const TokenId> tokens,
                     PrefixMatch& out) const;
  Status MatchEngineHashes(const MatchQuery& query, std::span<const EngineHash> hashes,
                           PrefixMatch& out) const;
  Status MatchPrefixHashes(const MatchQuery& query, std::span<const PrefixHash> hashes,
                           PrefixMatch& out) const;

  // Counters and per-instance resident presences. Any thread.
  IndexStats stats() const;

  // Operations per exclusive critical section of the writer, at most, and at least before it lets
  // a waiting reader in.
  static constexpr uint32_t kWriterChunk = 64;
  static constexpr uint32_t kWriterMinOps = 32;

  // Every scope a block was ever stored in (interned scopes, first-seen order), for diagnostics:
  // `--explain` tries the salts and LoRAs events carried (match_explain.h). Any thread.
  std::vector<Scope> scopes() const;

  // A consistent copy of the whole state (index_state.h), for snapshots: BeginCopy() fixes the
  // point (the writer may go on at once), StateCopy::Finish() copies the rest; CopyState() is
  // both at once. Any thread; queries never wait for a copy.
  StateCopy BeginCopy() const;
  IndexState CopyState() const;

 private:
  friend class IndexState;
  friend class IndexLoader;
  friend class StateCopy;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_INDEX_PREFIX_INDEX_H_
