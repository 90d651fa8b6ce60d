// PrefixIndex::BeginCopy(), StateCopy and IndexState (index_state.h): the index's state at one
// point, copied in pieces while the writer goes on (the writer copies a piece itself before it
// first changes it).
#include "kvindex/index/index_state.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvindex/core/clock.h"

#include "index_impl.h"

namespace kvindex {

namespace {

constexpr uint32_t kSegmentBits = 11;
// An engine map is copied in pieces of this many slots (768 KiB): the longest copy the writer
// makes of one, whatever the map's size.
constexpr uint32_t kEngineSegmentBits = 16;
static_assert((1u << kSegmentBits) == kCopySegment);
static_assert(kSegmentBits <= kChunkBits, "a segment lies within one chunk");

// A piece's mark: not yet copied, being copied (by the writer or the copying thread), copied.
enum Mark : uint8_t { kPending = 0, kTaken = 1, kCopied = 2 };

// Storage filled by memcpy (never value-initialised: the point must not write megabytes).
struct FreeStorage {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], FreeStorage> RawArray(size_t n) {
  return std::unique_ptr<T[], FreeStorage>(
      static_cast<T*>(std::malloc(std::max<size_t>(1, n) * sizeof(T))));
}

// A span of the wall clock and of the calling thread's CPU time (the CPU time leaves out the
// time the thread was not running, which on a loaded machine dominates short wall spans).
struct Span {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  int64_t cpu = ReadClockNs(CLOCK_THREAD_CPUTIME_ID);
  uint64_t WallNs() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - wall)
                                     .count());
  }
  uint64_t CpuNs() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, ReadClockNs(CLOCK_THREAD_CPUTIME_ID) - cpu));
  }
};

}  // namespace

struct IndexState::Copy {
  // --- fixed at the point ---
  uint32_t allocated = 0;  // records at the point
  std::vector<const Block*> chunks;
  std::vector<const std::atomic<uint64_t>*> touch_chunks;  // with max_blocks only
  uint32_t segments = 0;
  std::unique_ptr<std::atomic<uint8_t>[]> seg_mark;
  std::vector<const Instance*> instances;
  // An instance's engine map at the point, copied in segments of its slot array. `base` stays
  // valid until the copy ends: the writer changes a segment only after copying it, and when the
  // map grows (a new slot array) the old array is handed to `kept` instead of being freed, and the
  // segments still to copy are read from it.
  struct EngineMap {
    const EngineSlot* base = nullptr;
    size_t slots = 0;
    uint32_t segments = 0;
    std::unique_ptr<std::atomic<uint8_t>[]> mark;
    std::vector<std::vector<EngineSlot>> pieces;  // per segment: its occupied slots
    std::vector<EngineSlot> kept;                 // the array at the point, once replaced
    bool writer_done = false;                     // the writer need not copy any more (writer-only)
  };
  std::vector<EngineMap> maps;  // per instance
  // --- the copy (each piece written once, by whoever took it) ---
  std::unique_ptr<Block[], FreeStorage>
      records;                                  // [allocated]; heap presences point into `overflow`
  std::vector<std::vector<Presence>> overflow;  // per segment
  std::unique_ptr<uint64_t[], FreeStorage> touch;  // per record, with max_blocks only
  std::vector<std::vector<EngineSlot>> engine;     // per instance
  // The writer's own copies (written under the exclusive lock, read after the copy ended).
  uint64_t writer_copies = 0;
  uint64_t writer_max_ns = 0;
  uint64_t writer_cpu_max_ns = 0;
  uint64_t writer_ns = 0;
  // --- derived by Finish() ---
  std::vector<uint32_t> position;       // record -> block position (kNone: free)
  std::vector<uint32_t> record;         // block position -> record
  std::vector<uint32_t> holder_inst;    // holder -> its instance
  std::vector<uint64_t> inline_engine;  // by position (has_inline)
  std::vector<bool> has_inline;
  std::vector<uint32_t> order;       // eviction order (positions)
  std::vector<uint64_t> engine_all;  // per instance: its entries, those travelling inline included

  const Block& block(uint32_t idx) const { return records[idx]; }

  // Takes piece `mark` and runs copy(), or waits until whoever took it is done. True when this
  // thread copied it.
  template <typename F>
  static bool Claim(std::atomic<uint8_t>& mark, F&& copy) {
    uint8_t expect = kPending;
    if (mark.compare_exchange_strong(expect, kTaken, std::memory_order_acquire)) {
      copy();
      mark.store(kCopied, std::memory_order_release);
      return true;
    }
    for (uint32_t i = 1; mark.load(std::memory_order_acquire) != kCopied; ++i) {
      index_internal::CpuRelax();
      if ((i & 1023) == 0) std::this_thread::yield();  // the other side may be descheduled
    }
    return false;
  }

  // Copies records [s * kCopySegment, ...) with their heap presence arrays (and touch stamps).
  void CopySegment(uint32_t s) {
    const uint32_t begin = s << kSegmentBits;
    const uint32_t end = std::min(begin + kCopySegment, allocated);
    const Block* from = chunks[begin >> kChunkBits] + (begin & (kChunkSize - 1));
    Block* to = records.get() + begin;
    std::memcpy(static_cast<void*>(to), from, (end - begin) * sizeof(Block));
    size_t heap = 0;
    for (uint32_t i = 0; i < end - begin; ++i) {
      if (to[i].count != 0 && !to[i].inline_store()) heap += to[i].count;
    }
    if (heap != 0) {
      std::vector<Presence>& o = overflow[s];
      o.resize(heap);
      size_t at = 0;
      for (uint32_t i = 0; i < end - begin; ++i) {
        Block& b = to[i];
        if (b.count == 0 || b.inline_store()) continue;
        std::memcpy(o.data() + at, b.store.heap, b.count * sizeof(Presence));
        b.store.heap = o.data() + at;
        at += b.count;
      }
    }
    if (touch) {
      for (uint32_t idx = begin; idx < end; ++idx) {
        touch[idx] =
            touch_chunks[idx >> kChunkBits][idx & (kChunkSize - 1)].load(std::memory_order_relaxed);
      }
    }
  }
  void CopyEngineSegment(uint32_t ii, uint32_t seg) {
    EngineMap& m = maps[ii];
    const size_t begin = size_t{seg} << kEngineSegmentBits;
    const size_t end = std::min(m.slots, begin + (size_t{1} << kEngineSegmentBits));
    std::vector<EngineSlot>& out = m.pieces[seg];
    out.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      if (m.base[i].block != kNone) out.push_back(m.base[i]);
    }
  }
  // Every segment of instance `ii`'s map not copied yet (waiting for one being copied).
  void CopyEngineRest(uint32_t ii) {
    EngineMap& m = maps[ii];
    for (uint32_t seg = 0; seg < m.segments; ++seg) {
      Claim(m.mark[seg], [&] { CopyEngineSegment(ii, seg); });
    }
  }
  void NoteWriter(const Span& span) {
    const uint64_t ns = span.WallNs();
    ++writer_copies;
    writer_ns += ns;
    writer_max_ns = std::max(writer_max_ns, ns);
    writer_cpu_max_ns = std::max(writer_cpu_max_ns, span.CpuNs());
  }
  // Record indices become block positions, engine entries of freed records go, and entries and
  // object blocks are put in position order.
  void Derive(IndexState& state);
};

IndexState::IndexState() : copy_(std::make_unique<Copy>()) {}
IndexState::~IndexState() = default;
IndexState::IndexState(IndexState&&) noexcept = default;
IndexState& IndexState::operator=(IndexState&&) noexcept = default;

void IndexState::ForEachBlock(const std::function<void(const StateBlock&)>& f) const {
  const Copy& c = *copy_;
  std::vector<StatePresence> held;
  StateBlock sb;
  for (uint32_t pos = 0; pos < c.record.size(); ++pos) {
    const Block& b = c.block(c.record[pos]);
    const Presence* p = b.data();
    held.resize(b.count);
    for (uint16_t i = 0; i < b.count; ++i) held[i] = {p[i].holder, p[i].tiers};
    sb.hash = b.hash;
    sb.scope = b.scope;
    sb.ns = b.ns;
    sb.presences = held;
    sb.engine.reset();
    if (c.has_inline[pos]) sb.engine = c.inline_engine[pos];
    f(sb);
  }
}

uint64_t IndexState::EngineCount(uint32_t ii) const {
  return ii < copy_->engine.size() ? copy_->engine[ii].size() : 0;
}

uint64_t IndexState::BlockHashAt(uint32_t pos) const {
  return pos < copy_->record.size() ? copy_->block(copy_->record[pos]).hash : 0;
}

void IndexState::ForEachEngine(uint32_t ii,
                               const std::function<void(const StateEngineEntry&)>& f) const {
  if (ii >= copy_->engine.size()) return;
  for (const EngineSlot& s : copy_->engine[ii]) f({s.key(), s.block});
}

std::span<const uint32_t> IndexState::EvictionOrder() const { return copy_->order; }

uint64_t IndexState::EngineEntries(uint32_t ii) const {
  return ii < copy_->engine_all.size() ? copy_->engine_all[ii] : 0;
}

// ---------------------------------------------------------------- the writer's side

void PrefixIndex::Impl::CopyBeforeWrite(uint32_t idx) {
  IndexState::Copy& c = *cow;
  if (idx >= c.allocated) return;  // a record new since the point
  std::atomic<uint8_t>& mark = c.seg_mark[idx >> kSegmentBits];
  if (mark.load(std::memory_order_acquire) == kCopied) return;
  const Span span;
  IndexState::Copy::Claim(mark, [&] { c.CopySegment(idx >> kSegmentBits); });
  c.NoteWriter(span);
}

void PrefixIndex::Impl::CopyEngineBeforeWrite(uint32_t ii, size_t first) {
  IndexState::Copy& c = *cow;
  if (ii >= c.maps.size()) return;  // an instance new since the point
  IndexState::Copy::EngineMap& m = c.maps[ii];
  if (m.writer_done) return;
  const auto& map = instances[ii]->engine;
  const std::vector<EngineSlot>& slots = map.slots();
  // The change writes from `first` to the end of its probe run (the first empty slot).
  size_t last = first;
  if (first != kWholeEngineMap && !map.NeedsGrow()) {
    while (last < slots.size() && slots[last].block != kNone) ++last;
    if (last < m.slots) {  // nothing to do when every segment it writes is copied already
      bool copied = true;
      for (size_t seg = first >> kEngineSegmentBits; seg <= (last >> kEngineSegmentBits); ++seg) {
        copied = copied && m.mark[seg].load(std::memory_order_acquire) == kCopied;
      }
      if (copied) return;
    }
  }
  const Span span;
  if (first == kWholeEngineMap) {
    c.CopyEngineRest(ii);
    m.writer_done = true;
  } else if (map.NeedsGrow()) {
    // The change would grow the map: grow it here, keeping the old array for the copy.
    std::vector<EngineSlot> grown = map.BuildGrown();
    instances[ii]->engine.Adopt(grown);
    m.kept = std::move(grown);
    m.writer_done = true;
  } else {
    // A run that reaches the end of the array appends a slot, which may move the array: then the
    // rest is copied first.
    if (last >= slots.size() || last >= m.slots) {
      c.CopyEngineRest(ii);
      m.writer_done = true;
    } else {
      for (size_t seg = first >> kEngineSegmentBits; seg <= (last >> kEngineSegmentBits); ++seg) {
        IndexState::Copy::Claim(m.mark[seg],
                                [&] { c.CopyEngineSegment(ii, static_cast<uint32_t>(seg)); });
      }
    }
  }
  c.NoteWriter(span);
}

void PrefixIndex::Impl::KeepEngineSlots(uint32_t ii, std::vector<EngineSlot>& old) {
  IndexState::Copy& c = *cow;
  if (ii >= c.maps.size() || c.maps[ii].writer_done) return;
  c.maps[ii].kept = std::move(old);
  c.maps[ii].writer_done = true;
}

// ---------------------------------------------------------------- the point

StateCopy::StateCopy(const PrefixIndex& index, IndexState state)
    : index_(&index), state_(std::move(state)) {}
StateCopy::StateCopy(StateCopy&& other) noexcept
    : index_(std::exchange(other.index_, nullptr)), state_(std::move(other.state_)) {}
StateCopy::~StateCopy() {
  if (index_ == nullptr) return;
  // Abandoned: every piece is marked done (waiting for one being copied), then the copy ends.
  IndexState::Copy& c = *state_.copy_;
  for (uint32_t s = 0; s < c.segments; ++s) IndexState::Copy::Claim(c.seg_mark[s], [] {});
  for (IndexState::Copy::EngineMap& m : c.maps) {
    for (uint32_t seg = 0; seg < m.segments; ++seg) IndexState::Copy::Claim(m.mark[seg], [] {});
  }
  End();
}

StateCopy PrefixIndex::BeginCopy() const {
  Impl& im = *impl_;
  {
    std::unique_lock<std::mutex> busy(im.copy_mu);
    im.copy_cv.wait(busy, [&] { return !im.copy_busy; });
    im.copy_busy = true;
  }
  IndexState state;
  IndexState::Copy& c = *state.copy_;
  {
    std::shared_lock<RwLock> guard(im.lock);
    const Span span;  // the lock held: what a writer waiting for it waits
    c.allocated = im.allocated;
    for (const auto& chunk : im.chunks) c.chunks.push_back(chunk.get());
    c.segments = (c.allocated + kCopySegment - 1) >> kSegmentBits;
    c.seg_mark = std::make_unique<std::atomic<uint8_t>[]>(c.segments);
    c.records = RawArray<Block>(c.allocated);
    c.overflow.resize(c.segments);
    if (im.evicting()) {
      for (const auto& chunk : im.touch_chunks) c.touch_chunks.push_back(chunk.get());
      c.touch = RawArray<uint64_t>(c.allocated);
    }
    c.maps.resize(im.instances.size());
    c.engine.resize(im.instances.size());
    for (const auto& inst_ptr : im.instances) {
      const Instance& inst = *inst_ptr;
      IndexState::Copy::EngineMap& m = c.maps[c.instances.size()];
      m.base = inst.engine.slots().data();
      m.slots = inst.engine.slots().size();
      m.segments = static_cast<uint32_t>((m.slots + (size_t{1} << kEngineSegmentBits) - 1) >>
                                         kEngineSegmentBits);
      m.mark = std::make_unique<std::atomic<uint8_t>[]>(m.segments);
      m.pieces.resize(m.segments);
      c.instances.push_back(&inst);
      StateInstance si;
      si.name = inst.name;
      si.listed = inst.listed;
      si.block_size = inst.block_size;
      si.orphans = inst.orphans;
      for (const auto& [key, p] : inst.partials) {
        StatePartial sp;
        sp.key = EngineKey(key, im.scopes[p.scope].group);  // the engine hash
        sp.scope = p.scope;
        if (p.has_before) sp.before = p.before;
        sp.tokens = p.tokens;
        si.partials.push_back(std::move(sp));
      }
      for (const auto& [key, refs] : inst.objects) {
        StateObject so;
        so.key = key;
        for (const BlockRef& r : refs) {
          const Block& b = im.block(r.idx);
          if (b.gen == r.gen && b.count != 0) so.blocks.push_back(r.idx);  // mapped in Derive()
        }
        si.objects.push_back(std::move(so));
      }
      state.instances.push_back(std::move(si));
    }
    for (const Source& s : im.sources) state.sources.push_back(s.config);
    for (const Holder& h : im.holders) {
      c.holder_inst.push_back(h.inst);
      state.holders.push_back(
          {h.source, h.has_rank ? std::optional<DpRank>(h.rank) : std::nullopt});
    }
    state.scopes = im.scopes;
    state.tiers = im.tier_names;
    state.counters = {im.orphans, im.tokenless, im.unmapped, im.evictions};
    state.blocks = im.live_blocks;
    state.presences = im.presences;
    im.cow = &c;  // from here the writer copies a piece before changing it
    state.pause_ns = span.WallNs();
    state.pause_cpu_ns = span.CpuNs();
  }
  return StateCopy(*this, std::move(state));
}

void StateCopy::End() {
  PrefixIndex::Impl& im = *index_->impl_;
  IndexState::Copy& c = *state_.copy_;
  {
    std::shared_lock<RwLock> guard(im.lock);  // no writer copy is running meanwhile
    im.cow = nullptr;
    state_.writer_copies = c.writer_copies;
    state_.writer_max_ns = c.writer_max_ns;
    state_.writer_cpu_max_ns = c.writer_cpu_max_ns;
    state_.writer_ns = c.writer_ns;
  }
  {
    std::lock_guard<std::mutex> busy(im.copy_mu);
    im.copy_busy = false;
  }
  im.copy_cv.notify_all();
  index_ = nullptr;
}

IndexState StateCopy::Finish() {
  IndexState::Copy& c = *state_.copy_;
  for (uint32_t s = 0; s < c.segments; ++s) {
    IndexState::Copy::Claim(c.seg_mark[s], [&] { c.CopySegment(s); });
  }
  for (uint32_t ii = 0; ii < c.maps.size(); ++ii) c.CopyEngineRest(ii);
  End();
  for (uint32_t ii = 0; ii < c.maps.size(); ++ii) {
    IndexState::Copy::EngineMap& m = c.maps[ii];
    size_t n = 0;
    for (const auto& piece : m.pieces) n += piece.size();
    c.engine[ii].reserve(n);
    for (auto& piece : m.pieces) {
      c.engine[ii].insert(c.engine[ii].end(), piece.begin(), piece.end());
      std::vector<EngineSlot>().swap(piece);
    }
    std::vector<EngineSlot>().swap(m.kept);
  }
  c.Derive(state_);
  return std::move(state_);
}

IndexState PrefixIndex::CopyState() const { return BeginCopy().Finish(); }

void IndexState::Copy::Derive(IndexState& state) {
  // Visit order: the blocks of one holder alone, holder by holder, then the blocks of several
  // holders; record order within each group. A snapshot's runs (docs/snapshot-format.md) are
  // consecutive blocks with the same presences, so an instance's blocks go in long runs even
  // where instances stored their prompts in turn.
  const size_t several = holder_inst.size();
  const auto group_of = [several](const Block& b) -> size_t {
    return b.count == 1 ? std::min<size_t>(b.data()[0].holder, several) : several;
  };
  std::vector<uint32_t> next_in(several + 2, 0);
  for (uint32_t idx = 0; idx < allocated; ++idx) {
    const Block& b = block(idx);
    if (b.count != 0) ++next_in[group_of(b) + 1];
  }
  for (size_t g = 1; g < next_in.size(); ++g) next_in[g] += next_in[g - 1];
  const uint32_t next = next_in.back();
  position.assign(allocated, kNone);
  record.assign(next, 0);
  for (uint32_t idx = 0; idx < allocated; ++idx) {
    const Block& b = block(idx);
    if (b.count == 0) continue;
    const uint32_t pos = next_in[group_of(b)]++;
    position[idx] = pos;
    record[pos] = idx;
  }
  inline_engine.assign(next, 0);
  has_inline.assign(next, false);
  engine_all.assign(engine.size(), 0);
  for (uint32_t ii = 0; ii < engine.size(); ++ii) {
    auto& slots = engine[ii];
    size_t kept = 0;
    for (const EngineSlot& s : slots) {
      if (s.block == kNone) continue;  // an empty slot
      const uint32_t pos = s.block < allocated ? position[s.block] : kNone;
      if (pos == kNone) continue;
      // The snapshot holds the engine hash: the key with the block's group taken out.
      const uint32_t group = state.scopes[block(s.block).scope].group;
      const uint64_t hash = EngineKey(s.key(), group);
      slots[kept++] = {static_cast<uint32_t>(hash), static_cast<uint32_t>(hash >> 32), pos};
    }
    slots.resize(kept);
    state.engine_entries += kept;
    engine_all[ii] = kept;
    std::sort(slots.begin(), slots.end(), [](const EngineSlot& a, const EngineSlot& b) {
      return a.block != b.block ? a.block < b.block : a.key() < b.key();
    });
    // An instance's only entry for a block held by it alone travels with the block.
    kept = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      const uint32_t pos = slots[i].block;
      const bool alone = (i == 0 || slots[i - 1].block != pos) &&
                         (i + 1 == slots.size() || slots[i + 1].block != pos);
      const Block& b = block(record[pos]);
      if (alone && b.count == 1 && holder_inst[b.data()[0].holder] == ii) {
        inline_engine[pos] = slots[i].key();
        has_inline[pos] = true;
      } else {
        slots[kept++] = slots[i];
      }
    }
    slots.resize(kept);
  }
  for (StateInstance& si : state.instances) {
    for (StateObject& so : si.objects) {
      for (uint32_t& b : so.blocks) b = position[b];
    }
    std::sort(si.objects.begin(), si.objects.end(),
              [](const StateObject& a, const StateObject& b) { return a.key < b.key; });
    std::sort(si.partials.begin(), si.partials.end(),
              [](const StatePartial& a, const StatePartial& b) { return a.key < b.key; });
  }
  if (touch) {
    std::vector<std::pair<uint64_t, uint32_t>> by_touch;
    by_touch.reserve(next);
    for (uint32_t pos = 0; pos < next; ++pos) by_touch.emplace_back(touch[record[pos]], pos);
    std::sort(by_touch.begin(), by_touch.end());
    order.reserve(next);
    for (const auto& [stamp, pos] : by_touch) order.push_back(pos);
  }
}

}  // namespace kvindex
