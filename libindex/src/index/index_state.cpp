// PrefixIndex::CopyState() and IndexLoader (index_state.h): the index's state copied under the
// shared lock, and rebuilt in bulk under the exclusive one.
#include "kvindex/index/index_state.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "index_impl.h"

namespace kvindex {

// The records and maps as copied. Chunk copies are allocated (and their pages touched) before the
// lock is taken, so the lock covers memory copies only.
struct IndexState::Copy {
  std::vector<std::unique_ptr<Block[]>> chunks;
  uint32_t allocated = 0;
  // Presence arrays of records with more than two holders: (record, first presence) in record
  // order, presences in `overflow`.
  std::vector<std::pair<uint32_t, uint32_t>> heap_at;
  std::vector<Presence> overflow;
  std::vector<std::vector<EngineSlot>> engine;  // per instance
  std::vector<uint32_t> position;               // record -> block position (kNone: free)
  std::vector<uint32_t> record;                 // block position -> record
  std::vector<uint32_t> holder_inst;            // holder -> its instance
  std::vector<uint64_t> inline_engine;          // by position (has_inline)
  std::vector<bool> has_inline;

  const Block& block(uint32_t idx) const {
    return chunks[idx >> kChunkBits][idx & (kChunkSize - 1)];
  }
  // The first presence of record `idx` (count > 0).
  const Presence& first_presence(uint32_t idx) const {
    const Block& b = block(idx);
    if (b.inline_store()) return b.store.inl[0];
    const auto it = std::lower_bound(heap_at.begin(), heap_at.end(),
                                     std::make_pair(idx, uint32_t{0}));
    return overflow[it->second];
  }
};

IndexState::IndexState() : copy_(std::make_unique<Copy>()) {}
IndexState::~IndexState() = default;
IndexState::IndexState(IndexState&&) noexcept = default;
IndexState& IndexState::operator=(IndexState&&) noexcept = default;

void IndexState::ForEachBlock(const std::function<void(const StateBlock&)>& f) const {
  const Copy& c = *copy_;
  size_t heap_next = 0;
  std::vector<StatePresence> held;
  for (uint32_t idx = 0; idx < c.allocated; ++idx) {
    const Block& b = c.block(idx);
    if (b.count == 0) continue;
    const Presence* p = b.store.inl;
    if (!b.inline_store()) {
      while (c.heap_at[heap_next].first != idx) ++heap_next;
      p = c.overflow.data() + c.heap_at[heap_next].second;
    }
    held.resize(b.count);
    for (uint16_t i = 0; i < b.count; ++i) held[i] = {p[i].holder, p[i].tiers};
    StateBlock sb;
    sb.hash = b.hash;
    sb.scope = b.scope;
    sb.ns = b.ns;
    sb.presences = held;
    const uint32_t pos = c.position[idx];
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

IndexState PrefixIndex::CopyState() const {
  const Impl& im = *impl_;
  IndexState state;
  IndexState::Copy& c = *state.copy_;
  // Chunks mapped before the lock; one spare for the writer's growth meanwhile.
  size_t want = 0;
  {
    std::shared_lock<RwLock> guard(im.lock);
    want = im.chunks.size() + 1;
    c.engine.resize(im.instances.size());
    for (size_t ii = 0; ii < im.instances.size(); ++ii) {
      c.engine[ii].resize(im.instances[ii]->engine.slots().size());  // faulted in now
    }
  }
  auto fresh_chunk = [] { return std::unique_ptr<Block[]>(new Block[kChunkSize]); };
  while (c.chunks.size() < want) c.chunks.push_back(fresh_chunk());
  const auto started = std::chrono::steady_clock::now();
  {
    std::shared_lock<RwLock> guard(im.lock);
    while (c.chunks.size() < im.chunks.size()) c.chunks.push_back(fresh_chunk());
    c.chunks.resize(im.chunks.size());
    c.allocated = im.allocated;
    // Chunk by chunk, so that the heap presence arrays are found in the copy while it is cached.
    for (size_t i = 0; i < im.chunks.size(); ++i) {
      const size_t used = std::min<size_t>(kChunkSize, im.allocated - i * size_t{kChunkSize});
      const Block* copy = c.chunks[i].get();
      std::memcpy(static_cast<void*>(c.chunks[i].get()), im.chunks[i].get(),
                  used * sizeof(Block));
      for (size_t j = 0; j < used; ++j) {
        const Block& b = copy[j];
        if (b.count == 0 || b.inline_store()) continue;
        c.heap_at.emplace_back(static_cast<uint32_t>(i * kChunkSize + j),
                               static_cast<uint32_t>(c.overflow.size()));
        c.overflow.insert(c.overflow.end(), b.store.heap, b.store.heap + b.count);
      }
    }
    c.engine.resize(im.instances.size());
    for (size_t ii = 0; ii < im.instances.size(); ++ii) {
      const Instance& inst = *im.instances[ii];
      const auto& slots = inst.engine.slots();
      c.engine[ii].resize(slots.size());
      if (!slots.empty()) {
        std::memcpy(static_cast<void*>(c.engine[ii].data()), slots.data(),
                    slots.size() * sizeof(EngineSlot));
      }
      StateInstance si;
      si.name = inst.name;
      si.listed = inst.listed;
      si.block_size = inst.block_size;
      si.orphans = inst.orphans;
      for (const auto& [key, p] : inst.partials) {
        StatePartial sp;
        sp.key = key;
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
          if (b.gen == r.gen && b.count != 0) so.blocks.push_back(r.idx);  // mapped below
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
  }
  state.pause_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - started)
                                             .count());
  // Outside the lock: record indices become block positions, engine entries of freed records
  // go, and entries and object blocks are put in position order.
  c.position.assign(c.allocated, kNone);
  uint32_t next = 0;
  for (uint32_t idx = 0; idx < c.allocated; ++idx) {
    if (c.block(idx).count == 0) continue;
    c.position[idx] = next++;
    c.record.push_back(idx);
  }
  c.inline_engine.assign(next, 0);
  c.has_inline.assign(next, false);
  for (uint32_t ii = 0; ii < c.engine.size(); ++ii) {
    auto& slots = c.engine[ii];
    size_t kept = 0;
    for (const EngineSlot& s : slots) {
      if (s.block == kNone) continue;  // an empty slot
      const uint32_t pos = s.block < c.allocated ? c.position[s.block] : kNone;
      if (pos != kNone) slots[kept++] = {s.lo, s.hi, pos};
    }
    slots.resize(kept);
    state.engine_entries += kept;
    std::sort(slots.begin(), slots.end(), [](const EngineSlot& a, const EngineSlot& b) {
      return a.block != b.block ? a.block < b.block : a.key() < b.key();
    });
    // An instance's only entry for a block held by it alone travels with the block.
    kept = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      const uint32_t pos = slots[i].block;
      const bool alone = (i == 0 || slots[i - 1].block != pos) &&
                         (i + 1 == slots.size() || slots[i + 1].block != pos);
      const Block& b = c.block(c.record[pos]);
      if (alone && b.count == 1 && c.holder_inst[c.first_presence(c.record[pos]).holder] == ii) {
        c.inline_engine[pos] = slots[i].key();
        c.has_inline[pos] = true;
      } else {
        slots[kept++] = slots[i];
      }
    }
    slots.resize(kept);
  }
  for (StateInstance& si : state.instances) {
    for (StateObject& so : si.objects) {
      for (uint32_t& b : so.blocks) b = c.position[b];
    }
    std::sort(si.objects.begin(), si.objects.end(),
              [](const StateObject& a, const StateObject& b) { return a.key < b.key; });
    std::sort(si.partials.begin(), si.partials.end(),
              [](const StatePartial& a, const StatePartial& b) { return a.key < b.key; });
  }
  return state;
}

}  // namespace kvindex
