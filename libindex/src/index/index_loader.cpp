// IndexLoader (index_state.h): rebuilds a fresh index from a state, block by block, without the
// apply path's event handling. Every index the caller passes is checked, so a damaged state fails
// cleanly instead of corrupting the index.
#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/index/index_state.h"

#include "index_impl.h"

namespace kvindex {

struct IndexLoader::Impl {
  Impl(PrefixIndex& i, PrefixIndex::Impl& m) : index(i), im(m) {}
  PrefixIndex& index;
  PrefixIndex::Impl& im;
  std::vector<uint16_t> holder_map;  // state holder -> index holder
  std::vector<uint32_t> scope_map;
  std::vector<uint32_t> tier_map;    // state tier bit -> index tier bit
  std::vector<uint32_t> positions;   // block position -> record
  std::vector<Presence> run;  // the current run's (holder, tiers), mapped
  bool in_blocks = false;
  uint64_t expected = 0;
  // The eviction order given (AddEvictionOrder()): block positions, least recently touched first.
  std::vector<uint32_t> order;
  std::vector<bool> ordered;  // by position: named by the order
  bool has_order = false;
};

namespace {

// Reservations from a declared count are capped: a damaged count must not allocate terabytes
// (the tables grow as usual past the cap).
constexpr uint64_t kMaxReserve = uint64_t{1} << 24;

// The room a table sized once for `n` entries is given: a fifth more, so that it ends near the
// load two-thirds (the middle of the 0.53-0.8 a growing table runs at) rather than at the 0.8
// where it would grow, whose probe runs make the inserts of a load measurably slower.
uint64_t Room(uint64_t n) { return std::min(n, kMaxReserve) + std::min(n, kMaxReserve) / 5; }

Status Bad(const std::string& what) { return Status::Corrupt(what); }

}  // namespace

IndexLoader::IndexLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexLoader::~IndexLoader() {
  if (impl_) impl_->im.WUnlock();
}

Result<std::unique_ptr<IndexLoader>> IndexLoader::Begin(PrefixIndex& index) {
  PrefixIndex::Impl& im = *index.impl_;
  if (!im.sources.empty() || im.live_blocks != 0) {
    return Status::InvalidArgument("load: the index is not empty");
  }
  return std::unique_ptr<IndexLoader>(new IndexLoader(std::make_unique<Impl>(index, im)));
}

uint32_t IndexLoader::instance_count() const {
  return static_cast<uint32_t>(impl_->im.instances.size());
}

std::optional<uint64_t> IndexLoader::BlockHashAt(uint32_t pos) const {
  if (pos >= impl_->positions.size()) return std::nullopt;
  return impl_->im.block(impl_->positions[pos]).hash;
}

Status IndexLoader::AddSource(const SourceConfig& config) {
  if (impl_->in_blocks) return Bad("source after the blocks");
  impl_->im.WUnlock();
  auto added = impl_->index.AddSource(config);
  if (!added.ok()) return Bad("source " + config.name + ": " + added.status().message());
  return Status::Ok();
}

Status IndexLoader::AddHolder(const StateHolder& holder) {
  Impl& l = *impl_;
  if (l.in_blocks) return Bad("holder after the blocks");
  if (holder.source >= l.im.sources.size()) {
    return Bad("holder of unknown source " + std::to_string(holder.source));
  }
  const uint32_t h = l.im.HolderFor(holder.source, holder.rank, true);
  if (h == kNone) return Bad("too many holders");
  l.holder_map.push_back(static_cast<uint16_t>(h));
  return Status::Ok();
}

Status IndexLoader::AddScope(const Scope& scope) {
  Impl& l = *impl_;
  if (l.in_blocks) return Bad("scope after the blocks");
  l.im.WLock();
  const uint32_t id = l.im.InternScope(scope);
  if (id != l.scope_map.size()) {  // the index is fresh: a new scope takes the next id
    return Bad("duplicate scope " + scope.ToString());
  }
  l.scope_map.push_back(id);
  return Status::Ok();
}

Status IndexLoader::AddTier(const std::string& name) {
  Impl& l = *impl_;
  if (l.in_blocks) return Bad("tier after the blocks");
  const size_t i = l.tier_map.size();
  if (i >= kMaxTiers) return Bad("more than 16 tiers");
  static constexpr const char* kFixed[] = {"GPU", "CPU", "DISK"};
  if (i < 3) {
    if (name != kFixed[i]) return Bad("tier " + std::to_string(i) + " is not " + kFixed[i]);
    l.tier_map.push_back(static_cast<uint32_t>(i));
    return Status::Ok();
  }
  const Tier tier = ParseTier(name);
  if (tier.kind() != Tier::Kind::kOther || tier.name() != name) return Bad("bad tier name " + name);
  const uint32_t t = l.im.TierIndex(tier, true);
  if (t == kNone || std::find(l.tier_map.begin(), l.tier_map.end(), t) != l.tier_map.end()) {
    return Bad("bad tier " + name);
  }
  l.tier_map.push_back(t);
  return Status::Ok();
}

Status IndexLoader::BeginBlocks(uint64_t count) {
  Impl& l = *impl_;
  if (l.in_blocks) return Bad("blocks twice");
  l.in_blocks = true;
  l.expected = count;
  l.im.WLock();
  l.im.table.Reserve(Room(count));
  l.positions.reserve(std::min(count, kMaxReserve));
  return Status::Ok();
}

Status IndexLoader::AddRun(uint32_t state_scope, uint32_t ns,
                           std::span<const StatePresence> presences,
                           std::span<const uint64_t> hashes, std::span<const uint64_t> engines) {
  Impl& l = *impl_;
  PrefixIndex::Impl& im = l.im;
  if (!l.in_blocks) return Bad("block before the blocks");
  if (hashes.size() > l.expected - l.positions.size()) return Bad("more blocks than declared");
  if (state_scope >= l.scope_map.size()) return Bad("block of unknown scope");
  if (ns > im.instances.size()) return Bad("block of unknown key space");
  if (presences.empty()) return Bad("block without presence");
  if (!engines.empty() && (engines.size() != hashes.size() || presences.size() != 1)) {
    return Bad("engine hashes with a block of several holders");
  }
  // The presences, checked once for the run: holders mapped, tier bits mapped, no duplicate.
  l.run.clear();
  for (const StatePresence& p : presences) {
    if (p.holder >= l.holder_map.size()) return Bad("presence of unknown holder");
    if (p.tiers == 0) return Bad("presence without tier");
    const uint16_t h = l.holder_map[p.holder];
    for (const Presence& other : l.run) {
      if (other.holder == h) return Bad("duplicate presence");
    }
    for (uint16_t m = p.tiers; m != 0; m &= static_cast<uint16_t>(m - 1)) {
      if (static_cast<uint32_t>(std::countr_zero(m)) >= l.tier_map.size()) {
        return Bad("presence in unknown tier");
      }
    }
    uint16_t tiers = 0;
    for (uint16_t m = p.tiers; m != 0; m &= static_cast<uint16_t>(m - 1)) {
      tiers |= static_cast<uint16_t>(1u << l.tier_map[static_cast<uint32_t>(std::countr_zero(m))]);
    }
    l.run.push_back({h, tiers});
  }
  const uint32_t scope = l.scope_map[state_scope];
  Instance* engine_inst =
      engines.empty() ? nullptr : im.instances[im.holders[l.run[0].holder].inst].get();
  // Every block of the run is fresh and gets the run's presences at once, in an array of the
  // capacity AddPresence() would have grown it to; the holders' counts are credited per run.
  const auto count = static_cast<uint16_t>(l.run.size());
  uint8_t cap_log2 = 1;
  while ((1u << cap_log2) < count) ++cap_log2;
  uint32_t per_block = 0;
  for (const Presence& p : l.run) per_block += static_cast<uint32_t>(std::popcount(p.tiers));
  size_t done = 0;
  auto credit = [&] {
    for (const Presence& p : l.run) {
      for (uint16_t m = p.tiers; m != 0; m &= static_cast<uint16_t>(m - 1)) {
        im.holders[p.holder].tier_presences[std::countr_zero(m)] += done;
      }
    }
    im.presences += uint64_t{per_block} * done;
    if (cap_log2 > 1) im.overflow_bytes += done * (size_t{1} << cap_log2) * sizeof(Presence);
  };
  // Keys are hashed once, kAhead blocks ahead (for the table prefetch), and kept in a ring.
  constexpr size_t kAhead = 8;
  uint64_t keys[kAhead];
  for (size_t i = 0; i < kAhead && i < hashes.size(); ++i) {
    keys[i] = KeyHash(hashes[i], scope, ns);
    im.table.Prefetch(keys[i]);
  }
  for (size_t i = 0; i < hashes.size(); ++i, ++done) {
    if (im.table.NeedsGrow()) im.GrowOutside(im.table);
    if (engine_inst != nullptr) im.GrowEngine(*engine_inst);
    im.WLock();
    const uint64_t hash = hashes[i];
    const uint64_t h = keys[i % kAhead];
    if (i + kAhead < hashes.size()) {
      keys[i % kAhead] = KeyHash(hashes[i + kAhead], scope, ns);
      im.table.Prefetch(keys[i % kAhead]);
      if (engine_inst != nullptr) engine_inst->engine.Prefetch(EngineMix(engines[i + kAhead]));
    }
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    const auto [pos, found] = im.table.FindOrSlot(h, [&](const BlockSlot& s) {
      if (s.tag != tag) return false;
      const Block& b = im.block(s.idx);
      return b.hash == hash && b.scope == scope && b.ns == ns;
    });
    if (found) {
      credit();
      return Bad("duplicate block");
    }
    const uint32_t idx = im.AllocBlock(hash, scope, ns, h, pos);
    l.positions.push_back(idx);
    Block& b = im.block(idx);
    Presence* to = b.store.inl;
    if (cap_log2 > 1) {
      to = new Presence[size_t{1} << cap_log2];
      b.store.heap = to;
      b.cap_log2 = cap_log2;
    }
    for (uint16_t k = 0; k < count; ++k) to[k] = l.run[k];  // no memmove call for a pair
    b.count = count;
    if (engine_inst != nullptr) {
      const uint64_t key = EngineKey(engines[i], im.scopes[scope].group);
      im.EngineSet(*engine_inst, key, EngineMix(key), idx);
    }
    im.Tick();
  }
  credit();
  return Status::Ok();
}

void IndexLoader::ReserveEngine(uint32_t instance, uint64_t count) {
  PrefixIndex::Impl& im = impl_->im;
  if (instance >= im.instances.size()) return;
  im.WLock();
  Instance& inst = *im.instances[instance];
  im.BeforeEngineWrite(inst);
  inst.engine.Reserve(inst.engine.size() + Room(count));
}

Status IndexLoader::AddEngine(uint32_t instance, const StateEngineEntry& entry) {
  Impl& l = *impl_;
  PrefixIndex::Impl& im = l.im;
  if (instance >= im.instances.size()) return Bad("engine entry of unknown instance");
  if (entry.block >= l.positions.size()) return Bad("engine entry of unknown block");
  Instance& inst = *im.instances[instance];
  im.GrowEngine(inst);
  im.WLock();
  const uint32_t idx = l.positions[entry.block];
  const uint64_t key = EngineKey(entry.engine, im.scopes[im.block(idx).scope].group);
  im.EngineSet(inst, key, EngineMix(key), idx);
  im.Tick();
  return Status::Ok();
}

Status IndexLoader::AddEvictionOrder(std::span<const uint32_t> positions) {
  Impl& l = *impl_;
  if (!l.in_blocks) return Bad("eviction order before the blocks");
  if (!l.has_order) {
    l.has_order = true;
    l.ordered.assign(l.positions.size(), false);
    l.order.reserve(l.positions.size());
  }
  for (uint32_t pos : positions) {
    if (pos >= l.ordered.size()) return Bad("eviction order names an unknown block");
    if (l.ordered[pos]) return Bad("eviction order names a block twice");
    l.ordered[pos] = true;
    l.order.push_back(pos);
  }
  return Status::Ok();
}

Status IndexLoader::SetInstance(uint32_t ii, const StateInstance& si) {
  Impl& l = *impl_;
  PrefixIndex::Impl& im = l.im;
  if (ii >= im.instances.size() || im.instances[ii]->name != si.name) {
    return Bad("instance " + std::to_string(ii) + " is not " + si.name);
  }
  im.WLock();
  Instance& inst = *im.instances[ii];
  inst.listed = si.listed;
  inst.block_size = si.block_size;
  inst.orphans = si.orphans;
  for (const StatePartial& sp : si.partials) {
    if (sp.scope >= l.scope_map.size()) return Bad("partial block of unknown scope");
    Partial p;
    p.scope = l.scope_map[sp.scope];
    p.has_before = sp.before.has_value();
    p.before = sp.before.value_or(0);
    p.tokens = sp.tokens;
    const uint64_t key = EngineKey(sp.key, im.scopes[p.scope].group);
    inst.partials[key] = std::move(p);
  }
  for (const StateObject& so : si.objects) {
    std::vector<BlockRef> refs;
    refs.reserve(so.blocks.size());
    for (uint32_t b : so.blocks) {
      if (b >= l.positions.size()) return Bad("object of unknown block");
      refs.push_back({l.positions[b], im.block(l.positions[b]).gen});
    }
    inst.objects[so.key] = std::move(refs);
  }
  im.RefreshQuery(ii);
  return Status::Ok();
}

Status IndexLoader::Finish(const StateCounters& counters) {
  Impl& l = *impl_;
  PrefixIndex::Impl& im = l.im;
  if (l.positions.size() != l.expected) return Bad("fewer blocks than declared");
  if (l.has_order && l.order.size() != l.positions.size()) {
    return Bad("the eviction order misses blocks");
  }
  im.WLock();
  if (l.has_order && im.evicting()) {
    // The blocks' touch stamps follow the order, and the heap is rebuilt from them: ascending
    // stamps are already a min-heap.
    im.heap.clear();
    im.heap.reserve(l.order.size());
    for (uint32_t pos : l.order) {
      const uint32_t idx = l.positions[pos];
      const uint64_t stamp = im.clock.fetch_add(1, std::memory_order_relaxed);
      im.touch(idx).store(stamp, std::memory_order_relaxed);
      im.heap.push_back({stamp, idx, im.block(idx).gen});
    }
  }
  im.orphans = counters.orphans;
  im.tokenless = counters.tokenless;
  im.unmapped = counters.unmapped;
  im.evictions = counters.evictions;
  if (im.evicting()) {
    ApplyResult r;
    im.MaybeEvict(r);
  }
  im.WUnlock();
  return Status::Ok();
}

}  // namespace kvindex
