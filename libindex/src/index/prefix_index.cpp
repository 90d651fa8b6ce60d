#include "kvindex/index/prefix_index.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "block_records.h"
#include "engine_map.h"
#include "flat_table.h"
#include "instance_state.h"
#include "rw_lock.h"

// Layout and concurrency are documented in docs/architecture.md ("Index memory layout", "Index
// concurrency"). In short: blocks live in fixed-size 2 MiB chunks (huge pages) of 32-byte records
// (stable indices, no reallocation), found through a FlatTable of (32-bit hash tag, block index)
// slots; presence is a small array of (holder, tier bitmask) pairs, two inline and the rest on the
// heap. One writer mutates under the exclusive side of a writer-preferring reader-writer lock
// (tables are rebuilt outside it when they grow); queries hold the shared side for one query.

namespace kvindex {

ApplyResult& ApplyResult::operator+=(const ApplyResult& o) {
  stored += o.stored;
  duplicates += o.duplicates;
  removed += o.removed;
  orphans += o.orphans;
  tokenless += o.tokenless;
  unmapped += o.unmapped;
  evicted += o.evicted;
  dp_rank_mismatches += o.dp_rank_mismatches;
  rejected += o.rejected;
  return *this;
}

// The index's private types and functions, named unqualified below.
using index_internal::Block;
using index_internal::BlockRef;
using index_internal::BlockSlot;
using index_internal::BlockTraits;
using index_internal::EngineMix;
using index_internal::EngineSlot;
using index_internal::HeapEntry;
using index_internal::Holder;
using index_internal::Instance;
using index_internal::InstQuery;
using index_internal::KeyHash;
using index_internal::kChunkBits;
using index_internal::kChunkBytes;
using index_internal::kChunkSize;
using index_internal::kMaxTiers;
using index_internal::kNoHolder;
using index_internal::kNone;
using index_internal::kStickyRefs;
using index_internal::Partial;
using index_internal::Presence;
using index_internal::RwLock;
using index_internal::Source;
using index_internal::UnmapChunk;

namespace {

using internal::FlatTable;

#if defined(__SANITIZE_ADDRESS__)
#define KVINDEX_HEAP_CHUNKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVINDEX_HEAP_CHUNKS 1
#endif
#endif
std::unique_ptr<Block[], UnmapChunk> MapChunk() {
#ifdef KVINDEX_HEAP_CHUNKS
  // Under AddressSanitizer chunks come from the heap: ASan then checks their bounds, and
  // LeakSanitizer sees the overflow presence arrays they point to (it does not scan private
  // mappings, so an index still alive at exit would report every overflow array as leaked).
  return {new Block[kChunkSize], UnmapChunk{false}};
#else
  // Map twice the size and trim to the aligned interior.
  void* raw = mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return {new Block[kChunkSize], UnmapChunk{false}};
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kChunkBytes - 1) & ~(uintptr_t{kChunkBytes} - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t tail = aligned + kChunkBytes;
  if (begin + 2 * kChunkBytes > tail) munmap(reinterpret_cast<void*>(tail), begin + 2 * kChunkBytes - tail);
  internal::AdviseHugePages(reinterpret_cast<void*>(aligned), kChunkBytes);
  return {new (reinterpret_cast<void*>(aligned)) Block[kChunkSize], UnmapChunk{true}};
#endif
}

// A helper on the apply path, forced inline (see Impl::Tick()).
#define KVINDEX_HOT [[gnu::always_inline]] inline

// A block of the event, as computed before taking the lock.
struct Pending {
  uint64_t hash;
  uint32_t ns;
  EngineHash engine;
  int32_t partial;  // -1: a full block; else an index into the event's partial pages
  uint64_t key_hash = 0;    // KeyHash(hash, scope, ns)
  uint64_t engine_mix = 0;  // EngineMix(engine): its engine-map hash
};

}  // namespace

struct PrefixIndex::Impl {
  IndexOptions options;
  mutable RwLock lock;

  // --- state read by queries (mutated only under the exclusive lock) ---
  std::vector<std::unique_ptr<Block[], UnmapChunk>> chunks;
  // Last-touch stamps (stored or matched), only with max_blocks; queries write them (relaxed).
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> touch_chunks;
  uint32_t allocated = 0;  // block records handed out (free ones included)
  // Reusable records: free_list[0, free_count) (a vector used as storage, so that a free is a
  // store and an increment, not a push_back call: the apply path frees a record per remove).
  std::vector<uint32_t> free_list;
  size_t free_count = 0;
  std::vector<uint32_t> deferred;  // freed, waiting for Recycle()
  std::vector<uint64_t> deferred_bits;  // bit per record: in `deferred` (a cache-friendly test)
  FlatTable<BlockSlot, BlockTraits> table;
  std::vector<std::unique_ptr<Instance>> instances;
  std::vector<InstQuery> inst_q;                 // per instance, see InstQuery
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

  // --- writer-only state ---
  std::vector<HeapEntry> heap;
  uint32_t ops_in_section = 0;
  std::vector<Pending> pending;
  std::vector<Partial> pending_partials;
  std::vector<uint64_t> remove_mix;  // EngineMix of a remove's engine hashes

  explicit Impl(IndexOptions o) : options(o) {
    if (options.max_blocks > 0) table.Reserve(options.max_blocks + 1);
  }
  ~Impl() {
    for (uint32_t i = 0; i < allocated; ++i) {
      Block& b = block(i);
      if (!b.inline_store()) delete[] b.store.heap;
    }
  }

  Block& block(uint32_t idx) { return chunks[idx >> kChunkBits][idx & (kChunkSize - 1)]; }
  const Block& block(uint32_t idx) const {
    return chunks[idx >> kChunkBits][idx & (kChunkSize - 1)];
  }
  bool evicting() const { return options.max_blocks > 0; }
  std::atomic<uint64_t>& touch(uint32_t idx) const {
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
  // block operation; docs/benchmarks.md "Fifth session: apply").
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

  // ---------------------------------------------------------------- interning (writer)
  uint32_t InternScope(const Scope& s) {
    auto it = scope_ids.find(s);
    if (it != scope_ids.end()) return it->second;
    WLock();
    const uint32_t id = static_cast<uint32_t>(scopes.size());
    scopes.push_back(s);
    scope_ids.emplace(s, id);
    scope_tm.push_back(InternTm(s.tenant, s.model));
    return id;
  }
  uint32_t InternTm(const std::string& tenant, const std::string& model) {
    auto key = std::make_pair(tenant, model);
    auto it = tm_ids.find(key);
    if (it != tm_ids.end()) return it->second;
    WLock();
    const uint32_t id = static_cast<uint32_t>(tm_ids.size());
    tm_ids.emplace(std::move(key), id);
    return id;
  }
  void AddTm(uint32_t ii, uint32_t tm) {
    Instance& inst = *instances[ii];
    if (std::find(inst.tms.begin(), inst.tms.end(), tm) != inst.tms.end()) return;
    WLock();
    inst.tms.push_back(tm);
    if (tm_members.size() <= tm) tm_members.resize(tm + 1);
    auto& members = tm_members[tm];
    members.insert(std::upper_bound(members.begin(), members.end(), inst.name,
                                    [&](const std::string& name, uint32_t x) {
                                      return name < instances[x]->name;
                                    }),
                   ii);
  }
  // Exclusive lock held.
  void RefreshQuery(uint32_t ii) {
    if (inst_q.size() <= ii) inst_q.resize(ii + 1);
    const Instance& inst = *instances[ii];
    InstQuery& q = inst_q[ii];
    q.name = inst.name;
    q.seed = inst.seed;
    q.block_size = inst.block_size;
    q.listed = inst.listed;
    q.holder = inst.holders.size() == 1 ? inst.holders[0] : kNoHolder;
    q.one_rank = q.holder != kNoHolder && holders[q.holder].has_rank;
    q.rank = q.one_rank ? holders[q.holder].rank : 0;
  }
  // The tier's bit position, or kNone when the bitmask is full.
  uint32_t TierIndex(const Tier& tier, bool create) {
    switch (tier.kind()) {
      case Tier::Kind::kGpu: return 0;
      case Tier::Kind::kCpu: return 1;
      case Tier::Kind::kDisk: return 2;
      case Tier::Kind::kOther: break;
    }
    for (uint32_t i = 3; i < tier_names.size(); ++i) {
      if (tier_names[i] == tier.name()) return i;
    }
    if (!create || tier_names.size() >= kMaxTiers) return kNone;
    WLock();
    tier_names.emplace_back(tier.name());
    return static_cast<uint32_t>(tier_names.size() - 1);
  }

  std::optional<DpRank> RankFor(const Source& src, std::optional<DpRank> event_rank,
                                std::optional<DpRank> batch_rank) const {
    std::optional<DpRank> r = event_rank ? event_rank : batch_rank;
    if (!r) r = src.config.dp_rank;
    if (!r && !src.config.is_store()) r = 0;
    if (r && *r < 0) r.reset();  // B47: a store's "-1" is no rank, never a DP key
    return r;
  }
  // The holder of (source, rank), or kNone when absent and !create.
  uint32_t HolderFor(uint32_t sid, std::optional<DpRank> rank, bool create) {
    Source& src = sources[sid];
    for (const auto& [r, h] : src.holders) {
      if (r == rank) return h;
    }
    if (!create || holders.size() >= 0xFFFF) return kNone;
    WLock();
    const uint16_t h = static_cast<uint16_t>(holders.size());
    Holder holder;
    holder.source = sid;
    holder.inst = src.inst;
    holder.has_rank = rank.has_value();
    holder.rank = rank.value_or(0);
    holders.push_back(holder);
    if (!src.config.serves.empty()) serving_holders.push_back(h);
    src.holders.emplace_back(rank, h);
    Instance& inst = *instances[src.inst];
    inst.holders.push_back(h);
    if (rank && std::find(inst.ranks.begin(), inst.ranks.end(), *rank) == inst.ranks.end()) {
      inst.ranks.insert(std::upper_bound(inst.ranks.begin(), inst.ranks.end(), *rank), *rank);
    }
    RefreshQuery(src.inst);
    return h;
  }

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
  // A new chunk is mapped outside the exclusive section: MapChunk() writes every record of the
  // fresh 2 MiB, and faulting that in cost ~10 ms on the 2-vCPU VM (its host hands free memory
  // back, so first touches are slow), a stall every 65,536 new blocks for every query waiting on
  // the lock (docs/benchmarks.md, "Sixth session"). Readers index `chunks`, so the lock is held for
  // the push_back. The caller's table position stays valid: only the writer mutates the table.
  [[gnu::noinline]] uint32_t NewRecord() {
    if ((allocated >> kChunkBits) >= chunks.size()) {
      BuildOutside(
          [&] {
            std::pair<std::unique_ptr<Block[], UnmapChunk>, std::unique_ptr<std::atomic<uint64_t>[]>>
                made{MapChunk(), nullptr};
            if (evicting()) made.second = std::make_unique<std::atomic<uint64_t>[]>(kChunkSize);
            return made;
          },
          [&](auto& made) {
            chunks.push_back(std::move(made.first));
            if (made.second) touch_chunks.push_back(std::move(made.second));
          });
    }
    return allocated++;
  }
  [[gnu::noinline]] void QueueForEviction(uint32_t idx) {
    const uint64_t now = clock.fetch_add(1, std::memory_order_relaxed);
    touch(idx).store(now, std::memory_order_relaxed);
    heap.push_back({now, idx, block(idx).gen});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }

  // `dropping`: engine entries pointing here that the caller erases right after (before any
  // allocation), so they do not hold the record back.
  KVINDEX_HOT void FreeBlock(uint32_t idx, uint8_t dropping = 0) {
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
  [[gnu::noinline]] void GrowFreeList() {
    free_list.resize(std::max<size_t>(1024, free_list.size() * 2));
  }
  [[gnu::noinline]] void FreeOverflow(Block& b) {
    overflow_bytes -= b.cap() * sizeof(Presence);
    delete[] b.store.heap;
  }
  [[gnu::noinline]] void Defer(uint32_t idx) {
    deferred.push_back(idx);
    if ((idx >> 6) >= deferred_bits.size()) deferred_bits.resize((idx >> 6) + 1024, 0);
    deferred_bits[idx >> 6] |= 1ULL << (idx & 63);
  }

  // Makes deferred records reusable once no engine map points at them. Amortised O(1) per free:
  // the sweep visits every engine entry but runs only after max(4096, live/2) frees. The scan is
  // a read (the writer may read without the lock); erasing is chunked under the lock.
  void MaybeRecycle() {
    if (deferred.size() < std::max<uint64_t>(4096, live_blocks / 2)) return;
    WUnlock();
    std::vector<std::pair<uint32_t, uint64_t>> dead;
    for (uint32_t ii = 0; ii < instances.size(); ++ii) {
      instances[ii]->engine.ForEach([&](const EngineSlot& e) {
        if ((e.block >> 6) < deferred_bits.size() &&
            (deferred_bits[e.block >> 6] >> (e.block & 63) & 1) != 0) {
          dead.emplace_back(ii, e.key());
        }
      });
    }
    WLock();
    for (const auto& [ii, key] : dead) {
      EngineErase(*instances[ii], key);
      Tick();
    }
    for (uint32_t idx : deferred) {
      PushFree(idx);
      deferred_bits[idx >> 6] &= ~(1ULL << (idx & 63));
      block(idx).engine_refs = 0;  // every entry pointing here was erased above
    }
    deferred.clear();
  }

  // Adds tier `t` for `holder` to block `idx`. Returns false for a duplicate.
  KVINDEX_HOT bool AddPresence(uint32_t idx, uint16_t holder, uint32_t t) {
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
  [[gnu::noinline]] Presence* GrowPresence(Block& b) {
    const uint32_t cap = b.cap() * 2;
    Presence* grown = new Presence[cap];
    std::memcpy(grown, b.data(), b.count * sizeof(Presence));
    if (!b.inline_store()) {
      overflow_bytes -= b.cap() * sizeof(Presence);
      delete[] b.store.heap;
    }
    overflow_bytes += cap * sizeof(Presence);
    b.store.heap = grown;
    ++b.cap_log2;
    return grown;
  }

  // Clears the tiers in `mask` of `holder` on block `idx`; returns how many presences went. Frees
  // the block when nobody holds it any more (reported through *freed).
  KVINDEX_HOT uint32_t RemovePresence(uint32_t idx, uint16_t holder, uint16_t mask, bool* freed,
                                      uint8_t dropping = 0) {
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
    const auto [pos, found] = inst.engine.FindOrSlot(h, EngineMatch(key));
    if (found) {
      uint32_t& target = inst.engine.at(pos).block;
      if (target == idx) return;
      block(target).DropRef();
      target = idx;
    } else {
      inst.engine.InsertAt(pos, {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32), idx});
    }
    block(idx).AddRef();
  }
  void EngineEraseAt(Instance& inst, size_t pos) {
    block(inst.engine.at(pos).block).DropRef();
    inst.engine.EraseAt(pos);
  }
  void EngineErase(Instance& inst, uint64_t key) {
    const size_t pos = inst.engine.Find(EngineMix(key), EngineMatch(key));
    if (pos != inst.engine.kNotFound) EngineEraseAt(inst, pos);
  }
  // Drops entries whose block is gone or no longer held by the instance (B20: no leaking map).
  void SweepEngine(uint32_t ii) {
    Instance& inst = *instances[ii];
    std::vector<uint64_t> dead;
    inst.engine.ForEach([&](const EngineSlot& s) {
      const Block& b = block(s.block);
      if (b.count == 0 || !InstanceHolds(b, ii)) dead.push_back(s.key());
    });
    for (uint64_t key : dead) {
      EngineErase(inst, key);
      Tick();
    }
    for (auto it = inst.objects.begin(); it != inst.objects.end();) {
      auto& refs = it->second;
      std::erase_if(refs, [&](const BlockRef& r) {
        const Block& b = block(r.idx);
        return b.gen != r.gen || b.count == 0 || !InstanceHolds(b, ii);
      });
      it = refs.empty() ? inst.objects.erase(it) : std::next(it);
    }
  }

  // ---------------------------------------------------------------- eviction
  void EvictBlock(uint32_t idx) {
    Block& b = block(idx);
    const Presence* p = b.data();
    for (uint16_t i = 0; i < b.count; ++i) {
      Holder& h = holders[p[i].holder];
      for (uint16_t m = p[i].tiers; m != 0; m &= static_cast<uint16_t>(m - 1)) {
        --h.tier_presences[std::countr_zero(m)];
        --presences;
      }
    }
    FreeBlock(idx);
    ++evictions;
  }
  void MaybeEvict(ApplyResult& r) {
    if (!evicting()) return;
    while (live_blocks > options.max_blocks && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      const HeapEntry e = heap.back();
      heap.pop_back();
      Block& b = block(e.idx);
      if (b.gen != e.gen || b.count == 0) continue;  // freed since
      const uint64_t last = touch(e.idx).load(std::memory_order_relaxed);
      if (last != e.touch) {  // touched since it was queued: requeue at its real time
        heap.push_back({last, e.idx, e.gen});
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
        continue;
      }
      EvictBlock(e.idx);
      ++r.evicted;
      Tick();
    }
    // Stale heap entries of removed blocks: rebuild when they dominate.
    if (heap.size() > 2 * live_blocks + 1024) {
      std::vector<HeapEntry> fresh;
      fresh.reserve(live_blocks);
      for (const HeapEntry& e : heap) {
        const Block& b = block(e.idx);
        if (b.gen == e.gen && b.count > 0) fresh.push_back(e);
      }
      std::make_heap(fresh.begin(), fresh.end(), std::greater<>());
      heap.swap(fresh);
    }
  }

  // ---------------------------------------------------------------- apply
  Scope RootScope(const Source& src, const EventScopeFields& f, uint32_t block_size) const {
    const SourceConfig& c = src.config;
    Scope s;
    s.tenant = std::string(TenantOrDefault(f.tenant ? std::optional<std::string_view>(*f.tenant)
                                                    : std::optional<std::string_view>(c.tenant)));
    s.model = f.model && !f.model->empty() ? *f.model : c.model;
    if (f.lora_name || f.lora_id) {
      s.lora = LoraNameFrom(f.lora_name ? std::optional<std::string_view>(*f.lora_name)
                                        : std::nullopt,
                            f.lora_id);
    } else {
      s.lora = c.lora;
    }
    s.salt = std::string(EffectiveSalt(
        c.salt, f.salt ? std::optional<std::string_view>(*f.salt) : std::nullopt));
    s.block_size = block_size;
    s.group = f.group.value_or(0);
    return s;
  }

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
        std::nullopt, HashBlockTokens(std::span<const TokenId>(ev.token_ids).first(bs), seed), seed);
    table.Prefetch(KeyHash(h.value, src.last_scope, 0));
  }

  void ApplyStored(uint32_t sid, const BlockStored& ev, std::optional<DpRank> batch_rank,
                   ApplyResult& r) {
    const size_t n = ev.block_hashes.size();
    if (n == 0) return;
    // Hashing happens outside the lock, unless the event is so small that releasing and taking
    // the lock would cost more than its hashing (live streams are mostly 1-block events).
    if (n > kSmallEvent) WUnlock();
    Source& src = sources[sid];
    const SourceConfig& cfg = src.config;
    const uint32_t ii = src.inst;
    Instance& inst = *instances[ii];
    const bool standard = ev.standard_hashes || cfg.hash_standard;
    const Tier tier = ev.tier ? *ev.tier : (cfg.is_store() ? Tier::Cpu() : Tier::Gpu());
    const uint32_t t = TierIndex(tier, true);
    if (t == kNone) {
      ++r.rejected;
      return;
    }
    const bool tokens = !ev.token_ids.empty() && !standard;
    const uint64_t tokenless_before = r.tokenless;

    // The event's own block (page) size.
    uint32_t page = ev.scope.block_size.value_or(0);
    if (page == 0 && tokens && ev.token_ids.size() % n == 0) {
      page = static_cast<uint32_t>(ev.token_ids.size() / n);
    }
    if (tokens && (page == 0 || ev.token_ids.size() != n * static_cast<size_t>(page))) {
      ++r.rejected;  // B19: never slice past the tokens
      return;
    }

    // Parent resolution: a known block, a partial page, the root, or an orphan.
    uint32_t parent_idx = kNone;
    const Partial* parent_partial = nullptr;
    if (ev.parent) {
      parent_idx = EngineLookup(inst, ev.parent->value);
      if (parent_idx == kNone) {
        auto it = inst.partials.find(ev.parent->value);
        if (it != inst.partials.end()) parent_partial = &it->second;
      }
      if (parent_idx == kNone && parent_partial == nullptr && !standard) {
        // B5: never re-root under a guessed chain.
        r.orphans += n;
        WLock();
        orphans += n;
        inst.orphans += n;
        return;
      }
    }

    uint32_t scope_id;
    uint32_t bs;
    if (parent_idx != kNone) {
      scope_id = block(parent_idx).scope;
      bs = scopes[scope_id].block_size;
    } else if (parent_partial != nullptr) {
      scope_id = parent_partial->scope;
      bs = scopes[scope_id].block_size;
    } else {
      uint32_t configured = cfg.block_size != 0 ? cfg.block_size : inst.block_size;
      if (configured == 0) configured = page;
      bs = configured;
      if (page != 0 && page != configured && !(page < configured && configured % page == 0)) {
        bs = page;  // an engine block size the configuration cannot accumulate: the engine wins
      }
      if (bs == 0) {
        ++r.rejected;
        return;
      }
      if (src.last_scope != kNone && src.last_block_size == bs && src.last_fields == ev.scope) {
        scope_id = src.last_scope;
      } else {
        scope_id = InternScope(RootScope(src, ev.scope, bs));
        src.last_fields = ev.scope;
        src.last_block_size = bs;
        src.last_scope = scope_id;
      }
    }
    if (inst.block_size == 0) {
      WLock();
      inst.block_size = bs;
      RefreshQuery(ii);
    }
    AddTm(ii, scope_tm[scope_id]);
    const uint32_t holder = HolderFor(sid, RankFor(src, ev.scope.dp_rank, batch_rank), true);
    if (holder == kNone) {
      ++r.rejected;
      return;
    }

    // Stage 1, outside the lock: the key of every block.
    pending.clear();
    pending_partials.clear();
    const uint64_t seed = cfg.hash_seed;
    if (standard) {
      for (const EngineHash& h : ev.block_hashes) pending.push_back({h.value, 0, h, -1});
    } else if (!tokens || (parent_idx != kNone && block(parent_idx).ns != 0)) {
      // Tokenless (or below a tokenless parent): the instance's engine-hash chain is the key.
      bool have = parent_idx != kNone;
      uint64_t prev = have ? block(parent_idx).hash : 0;
      uint32_t ns = have && block(parent_idx).ns != 0 ? block(parent_idx).ns : 1 + ii;
      for (const EngineHash& h : ev.block_hashes) {
        const uint32_t known = EngineLookup(inst, h.value);
        if (known != kNone && block(known).scope == scope_id) {
          pending.push_back({block(known).hash, block(known).ns, h, -1});
          prev = block(known).hash;
          ns = block(known).ns != 0 ? block(known).ns : 1 + ii;
        } else {
          prev = ChainPrefixHash(have ? std::optional<PrefixHash>(PrefixHash{prev}) : std::nullopt,
                                 LocalBlockHash{h.value}, seed)
                     .value;
          pending.push_back({prev, ns, h, -1});
          ++r.tokenless;
        }
        have = true;
      }
    } else if (page == bs && parent_partial == nullptr) {
      std::optional<PrefixHash> prev;
      if (parent_idx != kNone) prev = PrefixHash{block(parent_idx).hash};
      const std::span<const TokenId> all(ev.token_ids);
      const size_t mm = ev.multimodal.size();
      pending.resize(n);
      for (size_t i = 0; i < n; ++i) {
        LocalBlockHash local = HashBlockTokens(all.subspan(i * bs, bs), seed);
        if (i < mm && !ev.multimodal[i].empty()) {
          local = MixMultimodalKeys(local, ev.multimodal[i], seed);
        }
        prev = ChainPrefixHash(prev, local, seed);
        Pending& p = pending[i];
        p.hash = prev->value;
        p.ns = 0;
        p.engine = ev.block_hashes[i];
        p.partial = -1;
      }
    } else if (page < bs && bs % page == 0) {
      // Page accumulation: pages fill blocks; a page completing a block maps to that block.
      Partial cur;
      cur.scope = scope_id;
      if (parent_partial != nullptr) {
        cur = *parent_partial;
      } else if (parent_idx != kNone) {
        cur.has_before = true;
        cur.before = block(parent_idx).hash;
      }
      const std::span<const TokenId> all(ev.token_ids);
      for (size_t i = 0; i < n; ++i) {
        auto pg = all.subspan(i * page, page);
        cur.tokens.insert(cur.tokens.end(), pg.begin(), pg.end());
        if (cur.tokens.size() == bs) {
          const LocalBlockHash local = HashBlockTokens(cur.tokens, seed);
          const PrefixHash h = ChainPrefixHash(
              cur.has_before ? std::optional<PrefixHash>(PrefixHash{cur.before}) : std::nullopt,
              local, seed);
          pending.push_back({h.value, 0, ev.block_hashes[i], -1});
          cur.has_before = true;
          cur.before = h.value;
          cur.tokens.clear();
        } else {
          pending.push_back({0, 0, ev.block_hashes[i], static_cast<int32_t>(pending_partials.size())});
          pending_partials.push_back(cur);
        }
      }
    } else {
      ++r.rejected;  // a child whose pages do not fit its parent's block size
      return;
    }

    for (Pending& p : pending) {
      if (p.partial < 0) p.key_hash = KeyHash(p.hash, scope_id, p.ns);
      p.engine_mix = EngineMix(p.engine.value);
    }
    // Stage 2, under the exclusive lock in chunks: presence and maps.
    WLock();
    std::vector<BlockRef>* object = nullptr;
    if (ev.wire.object_key && cfg.is_store()) {
      object = &inst.objects[*ev.wire.object_key];
      object->clear();
    }
    // Prefetch the table and engine-map slots a few blocks ahead: the walk is memory-bound.
    constexpr size_t kAhead = 6;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (i + kAhead < pending.size()) {
        const Pending& next = pending[i + kAhead];
        table.Prefetch(next.key_hash);
        inst.engine.Prefetch2(next.engine_mix);
      }
      const Pending& p = pending[i];
      if (p.partial >= 0) {
        inst.partials[p.engine.value] = std::move(pending_partials[p.partial]);
        EngineErase(inst, p.engine.value);
        continue;
      }
      GrowOutside(table);
      GrowOutside(inst.engine);
      const uint32_t tag = static_cast<uint32_t>(p.key_hash >> 32);
      const auto [pos, found] = table.FindOrSlot(p.key_hash, [&](const BlockSlot& slot) {
        if (slot.tag != tag) return false;
        const Block& b = block(slot.idx);
        return b.hash == p.hash && b.scope == scope_id && b.ns == p.ns;
      });
      uint32_t idx;
      if (!found) {
        idx = AllocBlock(p.hash, scope_id, p.ns, p.key_hash, pos);
      } else {
        idx = table.at(pos).idx;
        if (evicting()) {
          touch(idx).store(clock.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
        }
      }
      if (AddPresence(idx, static_cast<uint16_t>(holder), t)) {
        ++r.stored;
      } else {
        ++r.duplicates;
      }
      EngineSet(inst, p.engine.value, p.engine_mix, idx);
      if (!inst.partials.empty()) inst.partials.erase(p.engine.value);
      if (object != nullptr) object->push_back({idx, block(idx).gen});
      Tick();
    }
    tokenless += r.tokenless - tokenless_before;
    MaybeEvict(r);
    MaybeRecycle();
  }

  void ApplyRemoved(uint32_t sid, const BlockRemoved& ev, std::optional<DpRank> batch_rank,
                    ApplyResult& r) {
    Source& src = sources[sid];
    const uint32_t ii = src.inst;
    Instance& inst = *instances[ii];
    const Tier tier = ev.tier ? *ev.tier : (src.config.is_store() ? Tier::Cpu() : Tier::Gpu());
    const uint32_t t = TierIndex(tier, false);
    const uint32_t holder = HolderFor(sid, RankFor(src, ev.scope.dp_rank, batch_rank), false);
    const auto& hashes = ev.block_hashes;
    const size_t n = hashes.size();
    remove_mix.resize(n);
    for (size_t k = 0; k < n; ++k) remove_mix[k] = EngineMix(hashes[k].value);
    WLock();
    // A remove chases three dependent cache misses (engine slot -> block record -> table slot);
    // prefetch them in a pipeline: the engine slot 8 hashes ahead, the record 4 ahead (its index
    // kept in a ring), the table slot 2 ahead.
    // The ring also keeps the engine position found by the peek: an erase shifts entries back
    // only within its probe run, so the position is usually still right (checked before use).
    uint32_t ring[8];
    size_t ring_pos[8];
    auto peek = [&](size_t k) {
      const size_t pos = inst.engine.Find(remove_mix[k], EngineMatch(hashes[k].value));
      const uint32_t idx = pos == inst.engine.kNotFound ? kNone : inst.engine.at(pos).block;
      if (idx != kNone) __builtin_prefetch(&block(idx));
      ring[k & 7] = idx;
      ring_pos[k & 7] = pos;
    };
    for (size_t k = 0; k < 4 && k < n; ++k) peek(k);
    for (size_t k = 0; k < n; ++k) {
      if (k + 8 < n) inst.engine.Prefetch2(remove_mix[k + 8]);
      if (k + 4 < n) peek(k + 4);
      if (k + 2 < n && ring[(k + 2) & 7] != kNone) {
        const Block& b = block(ring[(k + 2) & 7]);  // possibly stale: only a hint
        table.Prefetch(KeyHash(b.hash, b.scope, b.ns));
      }
      const EngineHash& h = hashes[k];
      size_t pos = ring_pos[k & 7];
      if (pos == inst.engine.kNotFound || pos >= inst.engine.capacity() ||
          inst.engine.at(pos).block == kNone || inst.engine.at(pos).key() != h.value) {
        pos = inst.engine.Find(remove_mix[k], EngineMatch(h.value));
      }
      uint32_t idx = pos == inst.engine.kNotFound ? kNone : inst.engine.at(pos).block;
      if (idx != kNone && block(idx).count == 0) idx = kNone;  // freed, awaiting the sweep
      if (idx == kNone) {
        if (inst.partials.erase(h.value) == 0) {
          ++r.unmapped;  // B48: an unknown hash creates nothing
          ++unmapped;
        }
        continue;
      }
      if (t == kNone || holder == kNone) continue;  // this holder never stored that tier
      bool freed = false;
      // If this frees the block, the entry at `pos` (pointing at it) is erased just below.
      r.removed += RemovePresence(idx, static_cast<uint16_t>(holder),
                                  static_cast<uint16_t>(1u << t), &freed, 1);
      // Only the block table changed since the lookup, so `pos` is still the entry.
      if (freed || !InstanceHolds(block(idx), ii)) EngineEraseAt(inst, pos);
      Tick();
    }
    MaybeRecycle();
  }

  // Removes the tiers in `mask` of every holder of source `sid` (chunked scan of all blocks).
  void ClearHolders(uint32_t sid, uint16_t mask, ApplyResult& r) {
    const Source& src = sources[sid];
    if (src.holders.empty()) return;
    std::vector<uint16_t> mine;
    for (const auto& entry : src.holders) mine.push_back(entry.second);
    WLock();
    uint32_t scanned = 0;
    for (uint32_t idx = 0; idx < allocated; ++idx) {
      Block& b = block(idx);
      if (++scanned % 16 == 0) Tick();  // the lock is released every 1,024 records
      if (b.count == 0) continue;
      for (uint16_t h : mine) {
        if (block(idx).count == 0) break;
        bool freed = false;
        const uint32_t n = RemovePresence(idx, h, mask, &freed);
        if (n > 0) {
          r.removed += n;
          Tick();
        }
        if (freed) break;
      }
    }
    instances[src.inst]->partials.clear();
    SweepEngine(src.inst);
    MaybeRecycle();
  }

  void ApplyStoreUpdate(uint32_t sid, const StoreUpdate& ev, ApplyResult& r) {
    Source& src = sources[sid];
    const uint32_t ii = src.inst;
    Instance& inst = *instances[ii];
    auto it = inst.objects.find(ev.key);
    if (it == inst.objects.end()) {
      WLock();
      ++r.unmapped;
      ++unmapped;
      return;
    }
    uint16_t want = 0;
    for (const Replica& rep : ev.replicas) {
      const uint32_t t = TierIndex(rep.tier, true);
      if (t == kNone) {
        ++r.rejected;
        continue;
      }
      want |= static_cast<uint16_t>(1u << t);
    }
    const uint32_t holder = HolderFor(sid, RankFor(src, std::nullopt, std::nullopt), true);
    if (holder == kNone) {
      ++r.rejected;
      return;
    }
    WLock();
    std::vector<BlockRef> refs = it->second;
    std::vector<BlockRef> kept;
    for (const BlockRef& ref : refs) {
      Block& b = block(ref.idx);
      if (b.gen != ref.gen || b.count == 0) continue;
      uint16_t have = 0;
      for (uint16_t i = 0; i < b.count; ++i) {
        if (b.data()[i].holder == holder) have = b.data()[i].tiers;
      }
      const uint16_t drop = static_cast<uint16_t>(have & ~want);
      const uint16_t add = static_cast<uint16_t>(want & ~have);
      bool freed = false;
      for (uint16_t m = add; m != 0; m &= static_cast<uint16_t>(m - 1)) {
        AddPresence(ref.idx, static_cast<uint16_t>(holder), std::countr_zero(m));
        ++r.stored;
      }
      if (drop != 0) r.removed += RemovePresence(ref.idx, static_cast<uint16_t>(holder), drop, &freed);
      if (!freed) kept.push_back({ref.idx, block(ref.idx).gen});
      Tick();
    }
    if (want == 0 || kept.empty()) {
      inst.objects.erase(ev.key);
    } else {
      it->second = std::move(kept);
    }
  }

  // ---------------------------------------------------------------- queries (shared lock)
  // 32 bytes and trivially initialised: a query over 64 instances builds 64 of these, so nothing
  // here is zeroed per tier (the per-tier counts live in Scratch::tier_counts).
  struct Member {
    uint32_t inst;
    uint32_t block_size;
    uint32_t scope;  // kNone: scope unknown -> zeros
    uint32_t matched;
    uint64_t seed;
    uint32_t seen;
    uint16_t mask;
    uint16_t last_mask;  // the tiers it matched the last fully walked block in
  };
  struct Scratch {
    std::vector<Member> members;
    std::vector<uint32_t> tier_counts;  // members x ntiers matched blocks per tier
    uint32_t ntiers = 0;
    std::vector<int32_t> holder_local;
    std::vector<uint32_t> holder_depth;
    std::vector<std::vector<uint32_t>> serves;  // store holder -> members it serves
    std::vector<uint32_t> alive;
    std::vector<uint16_t> advanced;  // holders whose prefix grew at the last fully walked block
    std::vector<uint32_t> group;
    std::vector<PrefixHash> hashes;
    std::vector<uint64_t> keys;       // prefix hash per depth (pipelined resolution)
    std::vector<uint64_t> key_hashes;  // KeyHash per depth
    std::vector<uint32_t> resolved;
    std::vector<uint32_t> named;
    std::vector<uint8_t> done;
  };

  // Walks `n` blocks for the members in `group` (indices into scratch.members); resolve(d) gives
  // the block index of depth d or kNone.
  template <typename Resolve>
  void Walk(Scratch& sc, size_t n, Resolve&& resolve) const {
    auto& m = sc.members;
    sc.alive.assign(sc.group.begin(), sc.group.end());
    for (uint32_t li : sc.group) {
      const uint16_t only = inst_q[m[li].inst].holder;
      if (only != kNoHolder) {
        sc.holder_local[only] = static_cast<int32_t>(li);
        continue;
      }
      for (uint16_t h : instances[m[li].inst]->holders) sc.holder_local[h] = static_cast<int32_t>(li);
    }
    // Stores serving members of this group.
    bool any_serving = false;
    for (uint16_t h : serving_holders) {
      sc.serves[h].clear();
      const Source& src = sources[holders[h].source];
      if (src.config.serves.empty()) continue;
      for (uint32_t li : sc.group) {
        if (m[li].inst == holders[h].inst) continue;
        if (src.config.serves_all() ||
            std::find(src.serves.begin(), src.serves.end(), m[li].inst) != src.serves.end()) {
          sc.serves[h].push_back(li);
          any_serving = true;
        }
      }
    }
    const bool touching = evicting();
    const uint64_t base = touching ? clock.fetch_add(n, std::memory_order_relaxed) : 0;
    // Runs: consecutive blocks of a prompt are usually held by the same holders in the same tiers,
    // stored in the same order (a shared prefix, one instance's own chain). A block whose presence
    // array equals the last fully walked block's has the same outcome: every alive member goes on
    // with the same tiers and the same holders' prefixes grow. Such blocks are only counted
    // (`run`) and credited at once when the run ends, instead of walking their presences.
    const Presence* run_p = nullptr;
    uint16_t run_count = 0;
    uint32_t run = 0;
    sc.advanced.clear();
    auto end_run = [&] {
      if (run == 0) return;
      for (uint32_t li : sc.alive) {
        Member& x = m[li];
        x.matched += run;
        uint32_t* counts = &sc.tier_counts[static_cast<size_t>(li) * sc.ntiers];
        for (uint16_t bits = x.last_mask; bits != 0; bits &= static_cast<uint16_t>(bits - 1)) {
          counts[std::countr_zero(bits)] += run;
        }
      }
      for (uint16_t h : sc.advanced) sc.holder_depth[h] += run;
      run = 0;
    };
    for (size_t d = 0; d < n && !sc.alive.empty(); ++d) {
      const uint32_t idx = resolve(d);
      if (idx == kNone) break;
      const Block& b = block(idx);
      const Presence* p = b.data();
      if (run_p != nullptr && b.count == run_count &&
          std::memcmp(p, run_p, b.count * sizeof(Presence)) == 0) {
        ++run;
        if (touching) touch(idx).store(base + d, std::memory_order_relaxed);
        continue;
      }
      end_run();
      sc.advanced.clear();
      const uint32_t stamp = static_cast<uint32_t>(d + 1);
      for (uint16_t i = 0; i < b.count; ++i) {
        const uint16_t h = p[i].holder;
        const int32_t li = sc.holder_local[h];
        if (li >= 0 && m[li].matched == d) {
          m[li].mask |= p[i].tiers;
          m[li].seen = stamp;
          if (sc.holder_depth[h] == d) {
            sc.holder_depth[h] = stamp;
            sc.advanced.push_back(h);
          }
        }
        if (any_serving) {
          for (uint32_t lj : sc.serves[h]) {
            if (m[lj].matched == d) {
              m[lj].mask |= p[i].tiers;
              m[lj].seen = stamp;
            }
          }
        }
      }
      size_t out = 0;
      for (uint32_t li : sc.alive) {
        Member& x = m[li];
        if (x.seen != stamp) continue;
        x.matched = stamp;
        uint32_t* counts = &sc.tier_counts[static_cast<size_t>(li) * sc.ntiers];
        for (uint16_t bits = x.mask; bits != 0; bits &= static_cast<uint16_t>(bits - 1)) {
          ++counts[std::countr_zero(bits)];
        }
        x.last_mask = x.mask;
        x.mask = 0;
        sc.alive[out++] = li;
      }
      sc.alive.resize(out);
      if (touching && out > 0) {
        touch(idx).store(base + d, std::memory_order_relaxed);
      }
      run_p = p;
      run_count = b.count;
    }
    end_run();
    for (uint32_t li : sc.group) {
      const uint16_t only = inst_q[m[li].inst].holder;
      if (only != kNoHolder) {
        sc.holder_local[only] = -1;
        continue;
      }
      for (uint16_t h : instances[m[li].inst]->holders) sc.holder_local[h] = -1;
    }
  }

  enum class Mode { kTokens, kEngine, kPrefix };

  Result<PrefixMatch> Match(const MatchQuery& q, Mode mode, std::span<const TokenId> tokens,
                            std::span<const EngineHash> engine,
                            std::span<const PrefixHash> prefix) const {
    if (q.block_size && *q.block_size == 0) {
      return Status::InvalidArgument("query: block_size must be positive (B18: no division by 0)");
    }
    thread_local Scratch sc;
    PrefixMatch out;
    std::shared_lock<RwLock> guard(lock);
    // Candidates, in name order.
    sc.members.clear();
    auto add_member = [&](uint32_t ii) {
      const InstQuery& inst = inst_q[ii];
      Member x;
      x.inst = ii;
      x.block_size = q.block_size.value_or(inst.block_size);
      x.scope = kNone;
      x.matched = 0;
      x.seed = inst.seed;
      x.seen = 0;
      x.mask = 0;
      x.last_mask = 0;
      sc.members.push_back(x);
    };
    if (!q.instances.empty()) {
      std::vector<uint32_t>& named = sc.named;
      named.clear();
      for (const std::string& name : q.instances) {
        auto it = instance_by_name.find(name);
        if (it != instance_by_name.end() && inst_q[it->second].listed) named.push_back(it->second);
      }
      std::sort(named.begin(), named.end(), [&](uint32_t a, uint32_t b) {
        return instances[a]->name < instances[b]->name;
      });
      named.erase(std::unique(named.begin(), named.end()), named.end());
      for (uint32_t ii : named) add_member(ii);
    } else {
      auto it = tm_ids.find({q.tenant, q.model});
      if (it == tm_ids.end()) return out;
      const uint32_t tm = it->second;
      if (tm < tm_members.size()) {
        for (uint32_t ii : tm_members[tm]) {
          if (inst_q[ii].listed) add_member(ii);
        }
      }
    }
    // Scope per distinct block size.
    Scope s;
    s.tenant = q.tenant;
    s.model = q.model;
    s.lora = q.lora;
    s.salt = q.salt;
    s.group = q.group;
    uint32_t last_bs = 0;
    uint32_t last_scope = kNone;
    for (Member& x : sc.members) {
      if (x.block_size == 0) continue;
      if (x.block_size != last_bs) {
        s.block_size = x.block_size;
        auto it = scope_ids.find(s);
        last_bs = x.block_size;
        last_scope = it == scope_ids.end() ? kNone : it->second;
      }
      x.scope = last_scope;
    }
    sc.ntiers = static_cast<uint32_t>(tier_names.size());
    sc.tier_counts.assign(sc.members.size() * sc.ntiers, 0);
    sc.holder_local.assign(holders.size(), -1);
    sc.holder_depth.assign(holders.size(), 0);
    if (sc.serves.size() < holders.size()) sc.serves.resize(holders.size());

    std::vector<uint8_t>& done = sc.done;
    done.assign(sc.members.size(), 0);
    for (size_t i = 0; i < sc.members.size(); ++i) {
      if (done[i] || sc.members[i].scope == kNone) continue;
      // A group shares the scope (and, for tokens, the seed): one walk answers all of them.
      sc.group.clear();
      for (size_t j = i; j < sc.members.size(); ++j) {
        if (done[j] || sc.members[j].scope != sc.members[i].scope) continue;
        if (mode == Mode::kTokens && sc.members[j].seed != sc.members[i].seed) continue;
        if (mode == Mode::kEngine && j != i) continue;  // engine hashes are per instance
        sc.group.push_back(static_cast<uint32_t>(j));
        done[j] = 1;
      }
      const Member& lead = sc.members[i];
      const uint32_t scope = lead.scope;
      if (mode == Mode::kEngine) {
        const Instance& inst = *instances[lead.inst];
        Walk(sc, engine.size(), [&](size_t d) {
          const uint32_t idx = EngineLookup(inst, engine[d].value);
          if (idx == kNone || block(idx).scope != scope) return kNone;
          return idx;
        });
        continue;
      }
      const size_t n = mode == Mode::kTokens ? tokens.size() / lead.block_size : prefix.size();
      const size_t bs = lead.block_size;
      const uint64_t seed = lead.seed;
      sc.hashes.clear();
      sc.keys.resize(n);
      sc.key_hashes.resize(n);
      sc.resolved.resize(n);
      // Software pipeline over the walk (memory-level parallelism: the walk is bound by dependent
      // cache misses per block: a table slot, then the block record, then for blocks with more
      // than two holders their presence array). Depth d + kSlotAhead gets its key (token ids
      // hashed lazily, a chunk of 8 at a time) and its table slot prefetched; depth d + kRecAhead
      // gets a candidate record and prefetches it; depth d + kVerifyAhead gets its candidate
      // verified and an overflow presence array prefetched; depth d is walked. A miss wastes at
      // most kSlotAhead keys.
      //
      // The candidate comes from the table (the slot's 32-bit tag), or, while the chain runs
      // through consecutive records, is guessed as the record next to the previous depth's: a
      // chain stored by one event gets consecutive records (AllocBlock), so most of a long
      // prompt's blocks lie side by side and the guess skips the table slot and its cache miss.
      // A guess is only a candidate: verification compares the full key and requires a live
      // record (count > 0; a freed record keeps its stale key), exactly as for a tag hit. While
      // guessing, keys get no slot prefetch (the guess makes it useless); a failed guess issues
      // the prefetches of the keys made since, falls back to the table, and stops guessing until
      // two verified depths are adjacent again.
      constexpr size_t kSlotAhead = 16;
      constexpr size_t kRecAhead = 8;
      constexpr size_t kVerifyAhead = 3;
      size_t keyed = 0;
      size_t probed = 0;
      size_t verified = 0;
      int64_t step = 0;  // 0: not guessing; else the record step between adjacent depths (+1, -1)
      auto key_to = [&](size_t end) {
        if (mode == Mode::kTokens) {
          end = std::min(n, std::max(end, keyed + 8));
          std::optional<PrefixHash> parent;
          if (!sc.hashes.empty()) parent = sc.hashes.back();
          AppendPrefixHashes(tokens.subspan(keyed * bs, (end - keyed) * bs),
                             static_cast<uint32_t>(bs), parent, seed, sc.hashes);
        }
        for (size_t k = keyed; k < end; ++k) {
          const uint64_t key = mode == Mode::kTokens ? sc.hashes[k].value : prefix[k].value;
          sc.keys[k] = key;
          sc.key_hashes[k] = KeyHash(key, scope, 0);
          if (step == 0) table.Prefetch(sc.key_hashes[k]);
        }
        keyed = end;
      };
      auto probe_table = [&](size_t k) {
        const uint64_t h = sc.key_hashes[k];
        const uint32_t tag = static_cast<uint32_t>(h >> 32);
        const size_t pos = table.Find(h, [tag](const BlockSlot& slot) { return slot.tag == tag; });
        return pos == table.kNotFound ? kNone : table.at(pos).idx;
      };
      auto probe = [&](size_t k) {
        uint32_t cand = kNone;
        if (step != 0 && k > 0 && sc.resolved[k - 1] != kNone) {
          const int64_t guess = static_cast<int64_t>(sc.resolved[k - 1]) + step;
          if (guess >= 0 && guess < static_cast<int64_t>(allocated)) cand = static_cast<uint32_t>(guess);
        }
        if (cand == kNone) cand = probe_table(k);
        sc.resolved[k] = cand;
        if (cand != kNone) __builtin_prefetch(&block(cand));
      };
      Walk(sc, n, [&](size_t d) -> uint32_t {
        if (keyed < n && keyed < d + kSlotAhead) key_to(std::min(n, d + kSlotAhead));
        for (const size_t end = std::min(n, d + kRecAhead); probed < end; ++probed) probe(probed);
        for (const size_t end = std::min(n, d + kVerifyAhead); verified < end; ++verified) {
          const size_t k = verified;
          uint32_t cand = sc.resolved[k];
          if (cand == kNone) continue;  // no slot carries the tag: absent
          const Block& b = block(cand);
          if (b.hash != sc.keys[k] || b.scope != scope || b.ns != 0 || b.count == 0) {
            // A tag collision or a failed guess: the full probe. Depths probed after this one
            // were guessed from it: probe them again.
            if (step != 0) {
              // Guessing skipped the slot prefetches of the keys made since: issue them now.
              for (size_t j = k; j < keyed; ++j) table.Prefetch(sc.key_hashes[j]);
              step = 0;
            }
            cand = FindBlockHashed(sc.key_hashes[k], sc.keys[k], scope, 0);
            sc.resolved[k] = cand;
            for (size_t j = k + 1; j < probed; ++j) probe(j);
            if (cand == kNone) continue;
          }
          if (k > 0 && sc.resolved[k - 1] != kNone) {
            const int64_t delta = static_cast<int64_t>(cand) - static_cast<int64_t>(sc.resolved[k - 1]);
            step = delta == 1 || delta == -1 ? delta : 0;
          }
          const Block& found = block(cand);
          if (!found.inline_store()) {
            // Up to four cache lines of presences (64 holders).
            const char* p = reinterpret_cast<const char*>(found.store.heap);
            const size_t bytes = std::min<size_t>(found.count * sizeof(Presence), 256);
            for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
          }
        }
        return sc.resolved[d];
      });
    }
    // Results.
    out.instances.reserve(sc.members.size());
    const uint32_t nt = sc.ntiers;
    for (size_t li = 0; li < sc.members.size(); ++li) {
      const Member& x = sc.members[li];
      const uint32_t* counts = &sc.tier_counts[li * nt];
      const InstQuery& iq = inst_q[x.inst];
      InstanceMatch& im = out.instances.emplace_back();
      im.instance = iq.name;
      im.block_size = x.block_size;
      const uint64_t bs = x.block_size;
      im.longest_matched = x.matched * bs;
      im.gpu = counts[0] * bs;
      im.cpu = counts[1] * bs;
      im.disk = counts[2] * bs;
      for (uint32_t t = 3; t < nt; ++t) {
        if (counts[t] > 0) im.other_tiers.emplace_back(tier_names[t], counts[t] * bs);
      }
      if (iq.one_rank) {
        im.dp.push_back({iq.rank, sc.holder_depth[iq.holder] * bs});
      } else if (iq.holder == kNoHolder) {
        const Instance& inst = *instances[x.inst];
        for (DpRank rank : inst.ranks) {
          uint64_t depth = 0;
          for (uint16_t h : inst.holders) {
            if (holders[h].has_rank && holders[h].rank == rank) {
              depth = std::max<uint64_t>(depth, sc.holder_depth[h]);
            }
          }
          im.dp.push_back({rank, depth * bs});
        }
      }
    }
    return out;
  }
};

// ------------------------------------------------------------------ public API

PrefixIndex::PrefixIndex(IndexOptions options) : impl_(std::make_unique<Impl>(options)) {}
PrefixIndex::~PrefixIndex() = default;

Result<SourceId> PrefixIndex::AddSource(const SourceConfig& config) {
  if (config.name.empty()) return Status::InvalidArgument("source: empty instance name");
  if (config.serves.size() > 1 &&
      std::find(config.serves.begin(), config.serves.end(), "*") != config.serves.end()) {
    return Status::InvalidArgument("source " + config.name +
                                   ": serves=* cannot be combined with instance names");
  }
  Impl& im = *impl_;
  im.WLock();
  uint32_t ii;
  auto it = im.instance_by_name.find(config.name);
  if (it == im.instance_by_name.end()) {
    ii = static_cast<uint32_t>(im.instances.size());
    auto inst = std::make_unique<Instance>();
    inst->name = config.name;
    im.instances.push_back(std::move(inst));
    im.instance_by_name.emplace(config.name, ii);
    im.sorted_instances.insert(
        std::upper_bound(im.sorted_instances.begin(), im.sorted_instances.end(), config.name,
                         [&](const std::string& name, uint32_t x) {
                           return name < im.instances[x]->name;
                         }),
        ii);
  } else {
    ii = it->second;
  }
  Instance& inst = *im.instances[ii];
  inst.listed = true;
  if (inst.block_size == 0) inst.block_size = config.block_size;
  inst.seed = config.hash_seed;
  const uint32_t sid = static_cast<uint32_t>(im.sources.size());
  inst.sources.push_back(sid);
  Source src;
  src.config = config;
  src.inst = ii;
  im.sources.push_back(std::move(src));
  if (!config.model.empty()) {
    const std::string tenant(TenantOrDefault(config.tenant));
    auto key = std::make_pair(tenant, config.model);
    auto tm = im.tm_ids.find(key);
    uint32_t id;
    if (tm == im.tm_ids.end()) {
      id = static_cast<uint32_t>(im.tm_ids.size());
      im.tm_ids.emplace(std::move(key), id);
    } else {
      id = tm->second;
    }
    im.AddTm(ii, id);
  }
  // Resolve every store's `serves` names (instances may be defined in any order).
  for (Source& s : im.sources) {
    s.serves.clear();
    if (s.config.serves_all()) continue;
    for (const std::string& name : s.config.serves) {
      auto found = im.instance_by_name.find(name);
      if (found != im.instance_by_name.end()) s.serves.push_back(found->second);
    }
  }
  // The configured rank is known (and reported, zeros included) before any event arrives.
  const Source& added = im.sources[sid];
  im.HolderFor(sid, im.RankFor(added, std::nullopt, std::nullopt), true);
  im.RefreshQuery(ii);
  im.WUnlock();
  return SourceId{sid};
}

Result<ApplyResult> PrefixIndex::Apply(SourceId source, const EventBatch& batch) {
  Impl& im = *impl_;
  if (source.value >= im.sources.size()) {
    return Status::InvalidArgument("apply: unknown source id " + std::to_string(source.value));
  }
  const auto& src = im.sources[source.value];
  if (!im.instances[src.inst]->listed) {
    return Status::NotFound("apply: instance " + im.instances[src.inst]->name + " is unregistered");
  }
  ApplyResult r;
  if (batch.dp_rank && src.config.dp_rank && *batch.dp_rank != *src.config.dp_rank) {
    ++r.dp_rank_mismatches;
  }
  constexpr size_t kPrefetchAhead = 4;  // events
  const size_t count = batch.events.size();
  for (size_t e = 0; e < count; ++e) {
    if (e + kPrefetchAhead < count) {
      if (const auto* next = std::get_if<BlockStored>(&batch.events[e + kPrefetchAhead])) {
        im.PrefetchStored(source.value, *next);
      }
    }
    const Event& event = batch.events[e];
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      im.ApplyStored(source.value, *stored, batch.dp_rank, r);
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      im.ApplyRemoved(source.value, *removed, batch.dp_rank, r);
    } else if (const auto* cleared = std::get_if<AllCleared>(&event)) {
      uint16_t mask = 0xFFFF;
      if (cleared->tier) {
        const uint32_t t = im.TierIndex(*cleared->tier, false);
        mask = t == kNone ? 0 : static_cast<uint16_t>(1u << t);
      }
      if (mask != 0) im.ClearHolders(source.value, mask, r);
    } else if (const auto* update = std::get_if<StoreUpdate>(&event)) {
      im.ApplyStoreUpdate(source.value, *update, r);
    }
  }
  im.WUnlock();
  return r;
}

Result<ApplyResult> PrefixIndex::ClearSource(SourceId source) {
  Impl& im = *impl_;
  if (source.value >= im.sources.size()) {
    return Status::InvalidArgument("clear: unknown source id " + std::to_string(source.value));
  }
  ApplyResult r;
  im.ClearHolders(source.value, 0xFFFF, r);
  im.WUnlock();
  return r;
}

Result<ApplyResult> PrefixIndex::RemoveInstance(std::string_view instance) {
  Impl& im = *impl_;
  auto it = im.instance_by_name.find(std::string(instance));
  if (it == im.instance_by_name.end()) {
    return Status::NotFound("unregister: unknown instance " + std::string(instance));
  }
  ApplyResult r;
  const std::vector<uint32_t> sources = im.instances[it->second]->sources;
  for (uint32_t sid : sources) im.ClearHolders(sid, 0xFFFF, r);
  im.WLock();
  Instance& inst = *im.instances[it->second];
  inst.listed = false;
  inst.objects.clear();
  inst.partials.clear();
  im.RefreshQuery(it->second);
  im.WUnlock();
  return r;
}

Result<PrefixMatch> PrefixIndex::MatchTokens(const MatchQuery& query,
                                             std::span<const TokenId> tokens) const {
  return impl_->Match(query, Impl::Mode::kTokens, tokens, {}, {});
}

Result<PrefixMatch> PrefixIndex::MatchEngineHashes(const MatchQuery& query,
                                                   std::span<const EngineHash> hashes) const {
  return impl_->Match(query, Impl::Mode::kEngine, {}, hashes, {});
}

Result<PrefixMatch> PrefixIndex::MatchPrefixHashes(const MatchQuery& query,
                                                   std::span<const PrefixHash> hashes) const {
  return impl_->Match(query, Impl::Mode::kPrefix, {}, {}, hashes);
}

IndexStats PrefixIndex::stats() const {
  const Impl& im = *impl_;
  std::shared_lock<RwLock> guard(im.lock);
  IndexStats s;
  s.blocks = im.live_blocks;
  s.presences = im.presences;
  s.scopes = im.scopes.size();
  s.orphans = im.orphans;
  s.tokenless = im.tokenless;
  s.unmapped = im.unmapped;
  s.evictions = im.evictions;
  uint64_t bytes = im.chunks.size() * static_cast<uint64_t>(kChunkSize) * sizeof(Block) +
                   im.chunks.capacity() * sizeof(void*) + im.table.bytes() +
                   im.free_list.capacity() * sizeof(uint32_t) +
                   im.heap.capacity() * sizeof(HeapEntry) + im.overflow_bytes +
                   im.holders.capacity() * sizeof(Holder) + im.sources.capacity() * sizeof(Source);
  for (uint32_t ii : im.sorted_instances) {
    const Instance& inst = *im.instances[ii];
    s.engine_hashes += inst.engine.size();
    bytes += sizeof(Instance) + inst.engine.bytes() +
             inst.partials.size() * (sizeof(Partial) + 32) +
             inst.objects.size() * (sizeof(std::string) + sizeof(std::vector<BlockRef>) + 32);
    if (!inst.listed) continue;
    InstanceStats is;
    is.instance = inst.name;
    is.orphans = inst.orphans;
    std::array<uint64_t, kMaxTiers> tiers{};
    for (uint16_t h : inst.holders) {
      for (uint32_t t = 0; t < kMaxTiers; ++t) tiers[t] += im.holders[h].tier_presences[t];
    }
    for (uint32_t t = 0; t < im.tier_names.size(); ++t) {
      if (tiers[t] > 0) is.tiers.push_back({im.tier_names[t], tiers[t]});
    }
    s.instances.push_back(std::move(is));
  }
  s.bytes = bytes;
  return s;
}

std::vector<Scope> PrefixIndex::scopes() const {
  std::shared_lock<RwLock> guard(impl_->lock);
  return impl_->scopes;
}

}  // namespace kvindex
