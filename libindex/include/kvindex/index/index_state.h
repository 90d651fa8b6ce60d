// IndexState: a consistent copy of a PrefixIndex's state, taken without blocking queries, and
// IndexLoader: the bulk path that rebuilds an index from such a state (the snapshot files of
// docs/snapshot-format.md are written from the first and read into the second).
//
// Thread safety: PrefixIndex::BeginCopy() and CopyState() may run on any thread, concurrently
// with queries and with the writer. BeginCopy() fixes the point the copy is of (under the shared
// side of the index's lock, for as long as it takes to note the records' and maps' sizes and copy
// the small per-source and per-instance state), and StateCopy::Finish(), on any thread and
// without the lock, copies the block records and engine maps in pieces while the writer goes on:
// before the writer first changes a piece the copy has not taken yet (a segment of
// kCopySegment records, or 65,536 slots of one instance's engine map; when a map grows during the
// copy its old slot array is kept for the copy instead), it copies that piece itself. Queries are
// never held up by a copy; the writer pauses for the point and for each piece it copies. One copy
// runs at a time (a second BeginCopy() waits for the first Finish()). The IndexState is then read
// without any lock. An IndexLoader is the index's writer while it exists: nothing else may write
// the index meanwhile; queries may run (they see the index fill up).
#ifndef KVINDEX_INDEX_INDEX_STATE_H_
#define KVINDEX_INDEX_INDEX_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/scope.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"

namespace kvindex {

// One holder (a source at one DP rank) holding a block in the tiers of a bitmask (bit i is
// IndexState::tiers[i]). `holder` indexes IndexState::holders.
struct StatePresence {
  uint16_t holder = 0;
  uint16_t tiers = 0;
};

// A resident block: its key (a prefix hash in key space 0; in key space 1 + i, instance i's
// engine-hash chain), its scope (an index into IndexState::scopes) and who holds it.
// `engine`: when the block has one holder and that holder's instance maps exactly one engine
// hash to it (the common case), that hash; the entry is then not among ForEachEngine()'s.
struct StateBlock {
  uint64_t hash = 0;
  uint32_t scope = 0;
  uint32_t ns = 0;
  std::span<const StatePresence> presences;
  std::optional<uint64_t> engine;
};

struct StateHolder {
  uint32_t source = 0;
  std::optional<DpRank> rank;
};

// An engine-map entry of an instance: engine hash -> block (its position in block visit order).
struct StateEngineEntry {
  uint64_t engine = 0;
  uint32_t block = 0;
};

// The unfinished block of a source whose pages are smaller than its block size.
struct StatePartial {
  uint64_t key = 0;  // the engine hash of its last page
  uint32_t scope = 0;
  std::optional<uint64_t> before;  // the prefix hash before it (none: a root block)
  std::vector<TokenId> tokens;
};

// A Mooncake store object key and the blocks (positions in block visit order) bound to it.
struct StateObject {
  std::string key;
  std::vector<uint32_t> blocks;
};

struct StateInstance {
  std::string name;
  bool listed = true;
  uint32_t block_size = 0;
  uint64_t orphans = 0;
  std::vector<StatePartial> partials;
  std::vector<StateObject> objects;
};

// Cumulative index counters (IndexStats).
struct StateCounters {
  uint64_t orphans = 0;
  uint64_t tokenless = 0;
  uint64_t unmapped = 0;
  uint64_t evictions = 0;
};

class IndexState {
 public:
  IndexState();
  ~IndexState();
  IndexState(IndexState&&) noexcept;
  IndexState& operator=(IndexState&&) noexcept;

  std::vector<SourceConfig> sources;  // in SourceId order
  std::vector<StateHolder> holders;   // in holder order
  std::vector<Scope> scopes;          // in scope id order
  std::vector<std::string> tiers;     // tier names by bit: GPU, CPU, DISK, then others
  std::vector<StateInstance> instances;  // in instance order (first AddSource() of each name)
  StateCounters counters;
  uint64_t blocks = 0;     // resident blocks
  uint64_t presences = 0;  // resident (block, holder, tier) presences
  // How long BeginCopy() held the shared lock (the writer's pause when it takes the point itself,
  // as the subscriber's I/O thread does, or waits for it), in nanoseconds of wall clock and of
  // that thread's CPU time.
  uint64_t pause_ns = 0;
  uint64_t pause_cpu_ns = 0;
  // The pieces the writer copied itself before changing them while the copy was finished, the
  // longest such pause (a copy, or a wait for the copying thread to finish that piece; wall clock
  // and the writer thread's CPU time) and their sum (wall clock), in nanoseconds.
  uint64_t writer_copies = 0;
  uint64_t writer_max_ns = 0;
  uint64_t writer_cpu_max_ns = 0;
  uint64_t writer_ns = 0;

  // Calls f(block) for every resident block, in visit order (positions 0, 1, ...).
  void ForEachBlock(const std::function<void(const StateBlock&)>& f) const;
  // Engine-map entries of instance `ii` whose block is resident, by ascending block position
  // (those given with their block, StateBlock::engine, excepted).
  uint64_t EngineCount(uint32_t ii) const;
  // Every resident engine-map entry, those given with their blocks included, in all and of
  // instance `ii`.
  uint64_t engine_entries = 0;
  uint64_t EngineEntries(uint32_t ii) const;
  // The key of the block at visit position `pos` (< blocks).
  uint64_t BlockHashAt(uint32_t pos) const;
  void ForEachEngine(uint32_t ii, const std::function<void(const StateEngineEntry&)>& f) const;
  // With IndexOptions::max_blocks: every block position, least recently touched first (the order
  // the index would evict them in). Empty when the index does not evict.
  std::span<const uint32_t> EvictionOrder() const;

  struct Copy;  // the records and maps as copied (index_state.cpp)

 private:
  friend class PrefixIndex;
  friend class StateCopy;
  std::unique_ptr<Copy> copy_;
};

// Records are copied in segments of this many (64 KiB): the most a writer's change waits for.
inline constexpr uint32_t kCopySegment = 2048;

// A copy begun by PrefixIndex::BeginCopy(): the index's state at that point, once Finish() has
// copied what the writer has not. Destroying it unfinished abandons the copy.
class StateCopy {
 public:
  StateCopy(StateCopy&& other) noexcept;
  StateCopy& operator=(StateCopy&&) = delete;
  StateCopy(const StateCopy&) = delete;
  ~StateCopy();

  // Copies the rest (without the index's lock) and ends the copy. Once only.
  IndexState Finish();

 private:
  friend class PrefixIndex;
  StateCopy(const PrefixIndex& index, IndexState state);
  void End();
  const PrefixIndex* index_ = nullptr;  // null once finished
  IndexState state_;
};

// Rebuilds a fresh (empty) index in bulk, in this order: every source, holder, scope and tier,
// then BeginBlocks() and every block, then the engine entries, instances' details, and Finish().
// Each call checks what it is given (indices in range, no duplicate block, presence or holder)
// and fails with kCorrupt, naming what is wrong; after a failure the index is left partly loaded
// and must be discarded.
class IndexLoader {
 public:
  // Fails (kInvalidArgument) when `index` already has a source.
  static Result<std::unique_ptr<IndexLoader>> Begin(PrefixIndex& index);
  ~IndexLoader();
  IndexLoader(const IndexLoader&) = delete;
  IndexLoader& operator=(const IndexLoader&) = delete;

  Status AddSource(const SourceConfig& config);
  Status AddHolder(const StateHolder& holder);
  Status AddScope(const Scope& scope);
  Status AddTier(const std::string& name);
  // `count`: the blocks that follow (the table is sized once).
  Status BeginBlocks(uint64_t count);
  // A run of blocks sharing scope, key space and presences, with keys `hashes` and, when not
  // empty, one engine hash each for the instance of their only holder (StateBlock::engine).
  Status AddRun(uint32_t scope, uint32_t ns, std::span<const StatePresence> presences,
                std::span<const uint64_t> hashes, std::span<const uint64_t> engines);
  // `count`: the entries of `instance` that follow (its map is sized once; a hint).
  void ReserveEngine(uint32_t instance, uint64_t count);
  Status AddEngine(uint32_t instance, const StateEngineEntry& entry);
  // Block positions in eviction order (least recently touched first), in pieces, after the
  // blocks: every block once (checked by Finish()). With IndexOptions::max_blocks the loaded
  // index then evicts in that order; without it, it is checked and ignored. When none is given,
  // blocks are touched in load order.
  Status AddEvictionOrder(std::span<const uint32_t> positions);
  // The details of instance `ii` (its name must be the one AddSource() made it).
  Status SetInstance(uint32_t ii, const StateInstance& instance);
  Status Finish(const StateCounters& counters);

  uint32_t instance_count() const;
  // The key of the loaded block at position `pos`, if loaded.
  std::optional<uint64_t> BlockHashAt(uint32_t pos) const;

 private:
  struct Impl;
  explicit IndexLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_INDEX_INDEX_STATE_H_
