// PrefixIndex::Impl: the index's state (block records in chunks, the block table, instances,
// sources, holders, scopes) and the small operations the apply and match paths inline (the
// writer's lock sections, record allocation and freeing, presence changes, engine-map lookups).
// Its other methods are defined by concept: block_records.cpp (chunks, record and presence
// growth, recycling), engine_map.cpp, interning.cpp (scopes, (tenant, model) pairs, holders),
// apply.cpp (stores, removes, clears, store updates), eviction.cpp (the LRU heap) and match.cpp
// (queries); prefix_index.cpp is the public API. Private to the index layer.
//
// Layout and concurrency are documented in docs/architecture.md ("Index memory layout", "Index
// concurrency"). In short: blocks live in fixed-size 2 MiB chunks (huge pages) of 32-byte records
// (stable indices, no reallocation), found through a FlatTable of (32-bit hash tag, block index)
// slots; presence is a small array of (holder, tier bitmask) pairs, two inline and the rest on the
// heap. One writer mutates under the exclusive side of a writer-preferring reader-writer lock
// (tables are rebuilt outside it when they grow); queries hold the shared side for one query.
//
// Thread safety: as PrefixIndex (prefix_index.h). Methods that change state are called by the
// writer only, which takes the exclusive side (WLock()) before it changes what queries read;
// Match() and the const methods it calls run under the shared side, which Match() takes.
#ifndef KVINDEX_SRC_INDEX_IMPL_H_
#define KVINDEX_SRC_INDEX_IMPL_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/scope.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/index/prefix_match.h"

#include "block_records.h"
#include "engine_map.h"
#include "flat_table.h"
#include "instance_state.h"
#include "rw_lock.h"

// A function on the apply or match path, forced inline (see Impl::Tick()).
#define KVINDEX_HOT [[gnu::always_inline]] inline

namespace kvindex {

namespace index_internal {

// A block of the event, as computed before taking the lock.
struct Pending {
  uint64_t hash;
  uint32_t ns;
  EngineHash engine;
  int32_t partial;          // -1: a full block; else an index into the event's partial pages
  uint64_t key_hash = 0;    // KeyHash(hash, scope, ns)
  uint64_t engine_mix = 0;  // EngineMix(engine): its engine-map hash
};

}  // namespace index_internal

// The index's private types and functions, named unqualified in the index's files.
using index_internal::Block;
using index_internal::BlockRef;
using index_internal::BlockSlot;
using index_internal::BlockTraits;
using index_internal::EngineKey;
using index_internal::EngineMix;
using index_internal::EngineSlot;
using index_internal::HeapEntry;
using index_internal::Holder;
using index_internal::Instance;
using index_internal::InstQuery;
using index_internal::kChunkBits;
using index_internal::kChunkBytes;
using index_internal::kChunkSize;
using index_internal::KeyHash;
using index_internal::kMaxTiers;
using index_internal::kNoHolder;
using index_internal::kNone;
using index_internal::kStickyRefs;
using index_internal::Partial;
using index_internal::Pending;
using index_internal::Presence;
using index_internal::RwLock;
using index_internal::Source;
using index_internal::UnmapChunk;

struct PrefixIndex::Impl {
  IndexOptions options;
  mutable RwLock lock;

  // --- state read by queries (mutated only under the exclusive lock) ---
  std::vector<std::unique_ptr<Block[], UnmapChunk>> chunks;
  // A new chunk of records and, with max_blocks, its touch stamps (block_records.cpp).
  using NewChunk =
      std::pair<std::unique_ptr<Block[], UnmapChunk>, std::unique_ptr<std::atomic<uint64_t>[]>>;
  // A chunk and, when the index evicts, its touch stamps, every record written (faulted in).
  static NewChunk MakeChunk(bool evicting);
  // Last-touch stamps (stored or matched), only with max_blocks; queries write them (relaxed).
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> touch_chunks;
  uint32_t allocated = 0;  // block records handed out (free ones included)
  // Reusable records: free_list[0, free_count) (a vector used as storage, so that a free is a
  // store and an increment, not a push_back call: the apply path frees a record per remove).
  std::vector<uint32_t> free_list;
  size_t free_count = 0;
  std::vector<uint32_t> deferred;       // freed, waiting for Recycle()
  std::vector<uint64_t> deferred_bits;  // bit per record: in `deferred` (a cache-friendly test)
  internal::FlatTable<BlockSlot, BlockTraits> table;
  std::vector<std::unique_ptr<Instance>> instances;
  std::vector<InstQuery> inst_q;                  // per instance, see InstQuery
  std::vector<std::vector<uint32_t>> tm_members;  // (tenant, model) -> its instances, by name
  std::unordered_map<std::string, uint32_t> instance_by_name;
  std::vector<uint32_t> sorted_instances;  // by name
  std::vector<Source> sources;
  std::vector<Holder> holders;
  std::vector<uint16_t> serving_holders;  // holders of sources with `serves=`
  std::unordered_map<Scope, uint32_t> scope_ids;
  std::vector<Scope> scopes;
  std::vector<uint32_t> scope_tm;  // scope -> its (tenant, model) id
  std::map<std::pair<std::string, std::string>, uint32_t> tm_ids;
  std::vector<std::string> tier_names{"GPU", "CPU", "DISK"};
  uint64_t live_blocks = 0;
  uint64_t presences = 0;
  uint64_t overflow_bytes = 0;
  uint64_t orphans = 0;
  uint64_t tokenless = 0;
  uint64_t unmapped = 0;
  uint64_t evictions = 0;
  mutable std::atomic<uint64_t> clock{1};

  // --- a state copy in progress (index_state.cpp, StateCopy) ---
  // Set and cleared under the shared side of the lock by the copying thread, read by the writer
  // under the exclusive side before each change of a record or an engine map (BeforeWrite()), so
  // that the writer copies what the copy still needs before changing it. One copy at a time.
  IndexState::Copy* cow = nullptr;
  mutable std::mutex copy_mu;
  mutable std::condition_variable copy_cv;
  mutable bool copy_busy = false;

  // --- writer-only state ---
  // The next chunk, mapped on a helper thread since the current one became 3/4 full, and
  // whether there is one (read by stats() in readers).
  std::future<NewChunk> next_chunk;
  std::atomic<bool> chunk_ahead{false};
  std::vector<HeapEntry> heap;
  uint32_t ops_in_section = 0;
  std::vector<Pending> pending;
  std::vector<Partial> pending_partials;
  std::vector<uint64_t> remove_key;  // EngineKey of a remove's engine hashes
  std::vector<uint64_t> remove_mix;  // EngineMix of those keys

  explicit Impl(IndexOptions o) : options(o) {
    if (options.max_blocks > 0) table.Reserve(options.max_blocks + 1);
  }
  ~Impl() {
    for (uint32_t i = 0; i < allocated; ++i) {
      Block& b = block(i);
      if (!b.inline_store()) delete[] b.store.heap;
    }
  }

  // The record accessors are forced inline: the apply and match paths call them per block, also
  // from the forced-inline stages of ApplyStored() and Match(), whose calls the compiler would
  // otherwise weigh against its growth limit for those large functions.
  KVINDEX_HOT Block& block(uint32_t idx) {
    return chunks[idx >> kChunkBits][idx & (kChunkSize - 1)];
  }
  KVINDEX_HOT const Block& block(uint32_t idx) const {
    return chunks[idx >> kChunkBits][idx & (kChunkSize - 1)];
  }
  bool evicting() const { return options.max_blocks > 0; }
  KVINDEX_HOT std::atomic<uint64_t>& touch(uint32_t idx) const {
    return touch_chunks[idx >> kChunkBits][idx & (kChunkSize - 1)];
  }

  // The writer's exclusive section is taken lazily and released every kWriterChunk operations.
  bool writer_locked = false;
  void WLock() {
    if (!writer_locked) {
      lock.lock();
      writer_locked = true;
      ops_in_section = 0;
    }
  }
  void WUnlock() {
    if (writer_locked) {
      lock.unlock();
      writer_locked = false;
    }
  }
  // Grows `t` (a table readers use) if its next insert would, rebuilding it outside the exclusive
  // section: only the writer mutates tables, so it may read one without the lock while readers
  // read it too; the lock is held only to swap the new slots in. A rehash of a 20 MB table (about
  // 2 M blocks) thus no longer stalls queries for milliseconds. The old slots are freed outside
  // the lock too.
  template <typename Table>
  void GrowOutside(Table& t) {
    if (!t.NeedsGrow()) return;
    BuildOutside([&] { return t.BuildGrown(); }, [&](auto& fresh) { t.Adopt(fresh); });
  }
  // Runs `build` with the writer's exclusive section released, takes the lock only for
  // `adopt(built)`, and destroys what is left of `built` after releasing it again. Safe because the
  // writer is the only mutator: `build` may read what readers read meanwhile.
  template <typename Build, typename Adopt>
  void BuildOutside(Build build, Adopt adopt) {
    const bool was_locked = writer_locked;
    WUnlock();
    {
      auto built = build();
      WLock();
      adopt(built);
      WUnlock();
    }
    if (was_locked) WLock();
  }
  // Between two block operations: the section ends after kWriterChunk operations, or after
  // kWriterMinOps when a reader waits (the minimum keeps ingest moving under a query storm).
  // Inline: it runs after every block operation (the hot-path helpers below are forced inline and
  // their rare paths kept out of line, because a call's register saving cost about a tenth of a
  // block operation; docs/benchmarks.md "Index").
  KVINDEX_HOT void Tick() {
    ++ops_in_section;
    if (ops_in_section >= kWriterMinOps &&
        (ops_in_section >= kWriterChunk || lock.readers_waiting())) {
      EndSection();
    }
  }
  static_assert(kWriterChunk >= kWriterMinOps);
  [[gnu::noinline]] void EndSection() {
    if (writer_locked) {
      lock.YieldToReaders();
      ops_in_section = 0;
    } else {
      WLock();
    }
  }

  // Before record `idx` or instance `ii`'s engine map changes while a copy is in progress: copies
  // its segment (or the map's segments it will change) into the copy first, unless that is done
  // (index_state.cpp). Exclusive lock held.
  KVINDEX_HOT void BeforeWrite(uint32_t idx) {
    if (cow != nullptr) [[unlikely]] CopyBeforeWrite(idx);
  }
  // `first`: the first slot of the map the change may write (it writes from there to the end of
  // that probe run), or kWholeEngineMap for a change anywhere.
  static constexpr size_t kWholeEngineMap = ~size_t{0};
  KVINDEX_HOT void BeforeEngineWrite(const Instance& inst, size_t first = kWholeEngineMap) {
    if (cow != nullptr) [[unlikely]] CopyEngineBeforeWrite(inst.index, first);
  }
  [[gnu::noinline]] void CopyBeforeWrite(uint32_t idx);
  [[gnu::noinline]] void CopyEngineBeforeWrite(uint32_t ii, size_t first);
  // A grown map replaced instance `ii`'s slot array `old` during a copy: the copy keeps it.
  [[gnu::noinline]] void KeepEngineSlots(uint32_t ii, std::vector<EngineSlot>& old);
  // GrowOutside() for an instance's engine map.
  void GrowEngine(Instance& inst) {
    if (!inst.engine.NeedsGrow()) return;
    BuildOutside([&] { return inst.engine.BuildGrown(); },
                 [&](auto& fresh) {
                   inst.engine.Adopt(fresh);
                   if (cow != nullptr) [[unlikely]] KeepEngineSlots(inst.index, fresh);
                 });
  }

  // ---------------------------------------------------------------- interning (writer)
  // The id of scope `s`, interned (with its (tenant, model) pair) when new. interning.cpp.
  uint32_t InternScope(const Scope& s);
  // The id of the (tenant, model) pair, interned when new. Inline (as are the other methods below
  // that have one caller): defined in its caller's file.
  inline uint32_t InternTm(const std::string& tenant, const std::string& model);
  // Makes instance `ii` a member of (tenant, model) pair `tm` (kept in name order).
  void AddTm(uint32_t ii, uint32_t tm);
  // Rebuilds inst_q[ii] from instance `ii`. Exclusive lock held.
  void RefreshQuery(uint32_t ii);
  // The tier's bit position, or kNone when the bitmask is full.
  uint32_t TierIndex(const Tier& tier, bool create) {
    switch (tier.kind()) {
      case Tier::Kind::kGpu:
        return 0;
      case Tier::Kind::kCpu:
        return 1;
      case Tier::Kind::kDisk:
        return 2;
      case Tier::Kind::kOther:
        break;
    }
    for (uint32_t i = 3; i < tier_names.size(); ++i) {
      if (tier_names[i] == tier.name()) return i;
    }
    if (!create || tier_names.size() >= kMaxTiers) return kNone;
    WLock();
    tier_names.emplace_back(tier.name());
    return static_cast<uint32_t>(tier_names.size() - 1);
  }

  // The DP rank an event of `src` counts under: the event's, else the batch's, else the configured
  // one, else 0 for an engine (a store has none; a negative rank is none).
  std::optional<DpRank> RankFor(const Source& src, std::optional<DpRank> event_rank,
                                std::optional<DpRank> batch_rank) const {
    std::optional<DpRank> r = event_rank ? event_rank : batch_rank;
    if (!r) r = src.config.dp_rank;
    if (!r && !src.config.is_store()) r = 0;
    // A store's "-1" is no rank, never a DP key (docs/upstream-pitfalls.md
    // "A store batch has no DP rank").
    if (r && *r < 0) r.reset();
    return r;
  }
  // The holder of (source, rank), or kNone when absent and !create (or when 65,535 holders exist).
  uint32_t HolderFor(uint32_t sid, std::optional<DpRank> rank, bool create);

  // ---------------------------------------------------------------- blocks (exclusive lock)
  uint32_t FindBlock(uint64_t hash, uint32_t scope, uint32_t ns) const {
    return FindBlockHashed(KeyHash(hash, scope, ns), hash, scope, ns);
  }
  uint32_t FindBlockHashed(uint64_t h, uint64_t hash, uint32_t scope, uint32_t ns) const {
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    const size_t pos = table.Find(h, [&](const BlockSlot& s) {
      if (s.tag != tag) return false;
      const Block& b = block(s.idx);
      return b.hash == hash && b.scope == scope && b.ns == ns;
    });
    return pos == table.kNotFound ? kNone : table.at(pos).idx;
  }

  // Allocates the record of a block absent from the table: `h` is its KeyHash() and `pos` the empty
  // table position table.FindOrSlot(h, ...) returned for it.
  KVINDEX_HOT uint32_t AllocBlock(uint64_t hash, uint32_t scope, uint32_t ns, uint64_t h,
                                  size_t pos) {
    uint32_t idx;
    if (free_count != 0) {
      idx = free_list[--free_count];
    } else {
      idx = NewRecord();
    }
    BeforeWrite(idx);
    Block& b = block(idx);
    b.hash = hash;
    b.scope = scope;
    b.ns = ns;
    b.count = 0;
    b.cap_log2 = 1;
    b.engine_refs = 0;
    table.InsertAt(pos, {static_cast<uint32_t>(h >> 32), idx});
    ++live_blocks;
    if (evicting()) QueueForEviction(idx);
    return idx;
  }
  // A record index never handed out, mapping a new chunk when the last one is full.
  [[gnu::noinline]] uint32_t NewRecord();
  // Stamps record `idx` with a new touch and pushes it onto the eviction heap. eviction.cpp.
  [[gnu::noinline]] void QueueForEviction(uint32_t idx);

  // `dropping`: engine entries pointing here that the caller erases right after (before any
  // allocation), so they do not hold the record back.
  KVINDEX_HOT void FreeBlock(uint32_t idx, uint8_t dropping = 0) {
    BeforeWrite(idx);
    Block& b = block(idx);
    const uint64_t h = KeyHash(b.hash, b.scope, b.ns);
    const size_t pos = table.Find(h, [&](const BlockSlot& s) { return s.idx == idx; });
    if (pos != table.kNotFound) table.EraseAt(pos);
    if (!b.inline_store()) FreeOverflow(b);
    b.cap_log2 = 1;
    b.count = 0;
    ++b.gen;
    --live_blocks;
    if (b.engine_refs != kStickyRefs && b.engine_refs <= dropping) {
      b.engine_refs = 0;
      PushFree(idx);  // no engine entry points here (once the caller's go): reusable
      return;
    }
    Defer(idx);
  }
  KVINDEX_HOT void PushFree(uint32_t idx) {
    if (free_count == free_list.size()) GrowFreeList();
    free_list[free_count++] = idx;
  }
  [[gnu::noinline]] void GrowFreeList();
  // Frees the heap presence array of `b` (not inline_store()).
  [[gnu::noinline]] void FreeOverflow(Block& b);
  // Holds freed record `idx` back until no engine map points at it (MaybeRecycle()).
  [[gnu::noinline]] void Defer(uint32_t idx);
  // Makes deferred records reusable once enough have gathered. block_records.cpp.
  void MaybeRecycle();

  // Adds tier `t` for `holder` to block `idx`. Returns false for a duplicate.
  KVINDEX_HOT bool AddPresence(uint32_t idx, uint16_t holder, uint32_t t) {
    BeforeWrite(idx);
    Block& b = block(idx);
    Presence* p = b.data();
    const uint16_t bit = static_cast<uint16_t>(1u << t);
    for (uint16_t i = 0; i < b.count; ++i) {
      if (p[i].holder == holder) {
        if (p[i].tiers & bit) return false;
        p[i].tiers |= bit;
        ++holders[holder].tier_presences[t];
        ++presences;
        return true;
      }
    }
    if (b.count == b.cap()) p = GrowPresence(b);
    p[b.count++] = {holder, bit};
    ++holders[holder].tier_presences[t];
    ++presences;
    return true;
  }

  // Doubles the presence capacity of a full block; returns its presence array.
  [[gnu::noinline]] Presence* GrowPresence(Block& b);

  // Clears the tiers in `mask` of `holder` on block `idx`; returns how many presences went. Frees
  // the block when nobody holds it any more (reported through *freed).
  KVINDEX_HOT uint32_t RemovePresence(uint32_t idx, uint16_t holder, uint16_t mask, bool* freed,
                                      uint8_t dropping = 0) {
    BeforeWrite(idx);
    Block& b = block(idx);
    Presence* p = b.data();
    *freed = false;
    for (uint16_t i = 0; i < b.count; ++i) {
      if (p[i].holder != holder) continue;
      const uint16_t gone = p[i].tiers & mask;
      if (gone == 0) return 0;
      // Counted in the loop rather than with std::popcount: without -mpopcnt (the build assumes no
      // CPU feature) that is a libgcc call on every remove.
      uint32_t n = 0;
      for (uint16_t m = gone; m != 0; m &= static_cast<uint16_t>(m - 1)) {
        --holders[holder].tier_presences[std::countr_zero(m)];
        ++n;
      }
      presences -= n;
      p[i].tiers &= static_cast<uint16_t>(~mask);
      if (p[i].tiers == 0) {
        p[i] = p[b.count - 1];
        --b.count;
        if (b.count == 0) {
          FreeBlock(idx, dropping);
          *freed = true;
        }
      }
      return n;
    }
    return 0;
  }

  bool InstanceHolds(const Block& b, uint32_t inst) const {
    const Presence* p = b.data();
    for (uint16_t i = 0; i < b.count; ++i) {
      if (holders[p[i].holder].inst == inst) return true;
    }
    return false;
  }

  // ---------------------------------------------------------------- engine maps
  // The block an instance's engine hash maps to, if still valid.
  static auto EngineMatch(uint64_t key) {
    const uint32_t lo = static_cast<uint32_t>(key);
    const uint32_t hi = static_cast<uint32_t>(key >> 32);
    return [lo, hi](const EngineSlot& s) { return s.lo == lo && s.hi == hi; };
  }
  uint32_t EngineLookup(const Instance& inst, uint64_t key) const {
    const size_t pos = inst.engine.Find(EngineMix(key), EngineMatch(key));
    if (pos == inst.engine.kNotFound) return kNone;
    const uint32_t idx = inst.engine.at(pos).block;
    return block(idx).count == 0 ? kNone : idx;  // a freed record is never reused while mapped
  }
  // `h` is EngineMix(key).
  void EngineSet(Instance& inst, uint64_t key, uint64_t h, uint32_t idx) {
    if (cow != nullptr) [[unlikely]] CopyEngineBeforeWrite(inst.index, inst.engine.Home(h));
    const auto [pos, found] = inst.engine.FindOrSlot(h, EngineMatch(key));
    if (found) {
      uint32_t& target = inst.engine.at(pos).block;
      if (target == idx) return;
      BeforeWrite(target);
      block(target).DropRef();
      target = idx;
    } else {
      inst.engine.InsertAt(pos,
                           {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32), idx});
    }
    BeforeWrite(idx);
    block(idx).AddRef();
  }
  void EngineEraseAt(Instance& inst, size_t pos) {
    BeforeEngineWrite(inst, pos);
    BeforeWrite(inst.engine.at(pos).block);
    block(inst.engine.at(pos).block).DropRef();
    inst.engine.EraseAt(pos);
  }
  void EngineErase(Instance& inst, uint64_t key) {
    const size_t pos = inst.engine.Find(EngineMix(key), EngineMatch(key));
    if (pos != inst.engine.kNotFound) EngineEraseAt(inst, pos);
  }
  // Drops entries whose block is gone or no longer held by the instance. engine_map.cpp.
  void SweepEngine(uint32_t ii);

  // ---------------------------------------------------------------- eviction (eviction.cpp)
  // Frees block `idx` and its presences, counted as an eviction.
  inline void EvictBlock(uint32_t idx);
  // Evicts least recently touched blocks while more than max_blocks are resident (adding them to
  // r.evicted), and rebuilds the heap when stale entries dominate it.
  void MaybeEvict(ApplyResult& r);

  // ---------------------------------------------------------------- apply (apply.cpp)
  // The scope of a root block of `src` whose event carried fields `f`, at block size `block_size`.
  inline Scope RootScope(const Source& src, const EventScopeFields& f, uint32_t block_size) const;

  static constexpr size_t kSmallEvent = 4;

  // Prefetches what applying `ev` will look up first: the engine-map slots of its parent and
  // first block, and the table slot of its first block when its key is known without a lookup (a
  // root block in the source's last scope). Apply() calls it a few events ahead, so the cache
  // misses of 1-block events overlap instead of adding up. A hint only: nothing is changed.
  void PrefetchStored(uint32_t sid, const BlockStored& ev) const {
    if (ev.block_hashes.empty()) return;
    const Source& src = sources[sid];
    const Instance& inst = *instances[src.inst];
    if (ev.parent) inst.engine.Prefetch(EngineMix(ev.parent->value));
    inst.engine.Prefetch(EngineMix(ev.block_hashes[0].value));
    const uint32_t bs = src.last_block_size;
    if (ev.parent || src.last_scope == kNone || ev.standard_hashes || src.config.hash_standard ||
        !ev.multimodal.empty() || ev.token_ids.size() != ev.block_hashes.size() * bs ||
        !(ev.scope == src.last_fields)) {
      return;
    }
    const uint64_t seed = src.config.hash_seed;
    const PrefixHash h = ChainPrefixHash(
        std::nullopt, HashBlockTokens(std::span<const TokenId>(ev.token_ids).first(bs), seed),
        seed);
    table.Prefetch(KeyHash(h.value, src.last_scope, 0));
  }

  // Applies one event of source `sid`, adding what it did to `r` (rejected, orphan and tokenless
  // blocks included). `batch_rank` is the batch's DP rank, if any.
  void ApplyStored(uint32_t sid, const BlockStored& ev, std::optional<DpRank> batch_rank,
                   ApplyResult& r);
  // ApplyStored()'s stages, forced inline into it, after it resolved the event's parent, scope,
  // tier and holder (StoredPlan, apply.cpp): the keys of the blocks, into `pending` (false: the
  // event is rejected, counted in `r`), then the presences and maps, under the exclusive lock.
  struct StoredPlan;
  KVINDEX_HOT bool KeyStored(const BlockStored& ev, const StoredPlan& plan, ApplyResult& r);
  KVINDEX_HOT void IndexStored(const BlockStored& ev, const StoredPlan& plan, ApplyResult& r);
  // Applies a remove of source `sid` (unknown hashes counted as unmapped), adding to `r`.
  void ApplyRemoved(uint32_t sid, const BlockRemoved& ev, std::optional<DpRank> batch_rank,
                    ApplyResult& r);
  // Removes the tiers in `mask` of every holder of source `sid` (chunked scan of all blocks).
  void ClearHolders(uint32_t sid, uint16_t mask, ApplyResult& r);
  // Applies a Mooncake store update of source `sid` (the replicas of a stored key), adding to `r`.
  void ApplyStoreUpdate(uint32_t sid, const StoreUpdate& ev, ApplyResult& r);

  // ---------------------------------------------------------------- queries (match.cpp)
  // A candidate instance of a query, and a query's thread-local working state.
  struct Member;
  struct Scratch;

  // Walks `n` blocks for the members in `group` (indices into scratch.members); resolve(d) gives
  // the block index of depth d or kNone.
  template <typename Resolve>
  void Walk(Scratch& sc, size_t n, Resolve&& resolve) const;

  enum class Mode { kTokens, kEngine, kPrefix };

  // The answer to `q` by token ids, engine hashes or prefix hashes (the span of `mode`; the others
  // are empty), into `out` (cleared first, its storage reused). Fails (kInvalidArgument) for an
  // explicit block size of 0. Takes the shared lock; the spans are read only during the call.
  Status Match(const MatchQuery& q, Mode mode, std::span<const TokenId> tokens,
               std::span<const EngineHash> engine, std::span<const PrefixHash> prefix,
               PrefixMatch& out) const;
  // Match()'s stages, forced inline into it: the walk of the group led by `lead` by token ids
  // or prefix hashes (the software-pipelined resolution of their keys), and the answer built from
  // the walks.
  KVINDEX_HOT void WalkKeyed(Scratch& sc, Mode mode, std::span<const TokenId> tokens,
                             std::span<const PrefixHash> prefix, const Member& lead) const;
  KVINDEX_HOT void CollectResults(const Scratch& sc, PrefixMatch& out) const;
};

}  // namespace kvindex

#endif  // KVINDEX_SRC_INDEX_IMPL_H_
