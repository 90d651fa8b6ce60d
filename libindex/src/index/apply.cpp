// Applying events (writer): stores (keys from token ids, engine hashes or accumulated pages,
// parents resolved through the instance's engine map, orphans counted), removes, clears of a
// source's holders, and Mooncake store updates.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/scope.h"

#include "index_impl.h"

namespace kvindex {

Scope PrefixIndex::Impl::RootScope(const Source& src, const EventScopeFields& f,
                                   uint32_t block_size) const {
  const SourceConfig& c = src.config;
  Scope s;
  s.tenant = std::string(TenantOrDefault(f.tenant ? std::optional<std::string_view>(*f.tenant)
                                                  : std::optional<std::string_view>(c.tenant)));
  s.model = f.model && !f.model->empty() ? *f.model : c.model;
  if (f.lora_name || f.lora_id) {
    s.lora = LoraNameFrom(
        f.lora_name ? std::optional<std::string_view>(*f.lora_name) : std::nullopt, f.lora_id);
  } else {
    s.lora = c.lora;
  }
  s.salt = std::string(
      EffectiveSalt(c.salt, f.salt ? std::optional<std::string_view>(*f.salt) : std::nullopt));
  s.block_size = block_size;
  s.group = f.group.value_or(0);
  return s;
}

// What ApplyStored() resolved about an event before its stages key the blocks and index them.
struct PrefixIndex::Impl::StoredPlan {
  Source* src;
  Instance* inst;
  uint32_t ii;    // the instance's index
  bool standard;  // the engine hashes are the keys
  bool tokens;    // token ids key the blocks
  uint32_t t;     // the tier's bit position
  uint32_t page;  // the event's own block (page) size
  uint32_t parent_idx;
  const Partial* parent_partial;
  uint32_t scope_id;
  uint32_t bs;  // the scope's block size
  uint32_t holder;
};

bool PrefixIndex::Impl::KeyStored(const BlockStored& ev, const StoredPlan& plan, ApplyResult& r) {
  const size_t n = ev.block_hashes.size();
  const SourceConfig& cfg = plan.src->config;
  const Instance& inst = *plan.inst;
  const uint32_t ii = plan.ii;
  const bool standard = plan.standard;
  const bool tokens = plan.tokens;
  const uint32_t page = plan.page;
  const uint32_t parent_idx = plan.parent_idx;
  const Partial* parent_partial = plan.parent_partial;
  const uint32_t scope_id = plan.scope_id;
  const uint32_t bs = plan.bs;
  // Stage 1, outside the lock: the key of every block.
  pending.clear();
  pending_partials.clear();
  const uint64_t seed = cfg.hash_seed;
  const uint32_t group = ev.scope.group.value_or(0);
  if (standard) {
    for (const EngineHash& h : ev.block_hashes) pending.push_back({h.value, 0, h, -1});
  } else if (!tokens || (parent_idx != kNone && block(parent_idx).ns != 0)) {
    // Tokenless (or below a tokenless parent): the instance's engine-hash chain is the key.
    bool have = parent_idx != kNone;
    uint64_t prev = have ? block(parent_idx).hash : 0;
    uint32_t ns = have && block(parent_idx).ns != 0 ? block(parent_idx).ns : 1 + ii;
    for (const EngineHash& h : ev.block_hashes) {
      const uint32_t known = EngineLookup(inst, EngineKey(h.value, group));
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
    // Dense: chunk c is block c. Sparse (block_offsets): every chunk extends the chain, and only
    // the chunks the offsets name become blocks (docs/index-rules.md "Sparse groups").
    const std::vector<uint32_t>& offsets = ev.block_offsets;
    const size_t token_chunks = offsets.empty() ? n : all.size() / bs;
    pending.resize(n);
    size_t i = 0;  // the block (hash) the next hashed chunk belongs to
    for (size_t c = 0; c < token_chunks && i < n; ++c) {
      const bool hashed = offsets.empty() || offsets[i] == c;
      LocalBlockHash local = HashBlockTokens(all.subspan(c * bs, bs), seed);
      if (hashed && i < mm && !ev.multimodal[i].empty()) {
        local = MixMultimodalKeys(local, ev.multimodal[i], seed);
      } else if (!hashed && c < ev.skipped_multimodal.size() && !ev.skipped_multimodal[c].empty()) {
        local = MixMultimodalKeys(local, ev.skipped_multimodal[c], seed);
      }
      prev = ChainPrefixHash(prev, local, seed);
      if (!hashed) continue;
      Pending& p = pending[i];
      p.hash = prev->value;
      p.ns = 0;
      p.engine = ev.block_hashes[i];
      p.partial = -1;
      ++i;
    }
  } else if (page < bs && bs % page == 0 && ev.block_offsets.empty()) {
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
        pending.push_back(
            {0, 0, ev.block_hashes[i], static_cast<int32_t>(pending_partials.size())});
        pending_partials.push_back(cur);
      }
    }
  } else {
    ++r.rejected;  // a child whose pages do not fit its parent's block size
    return false;
  }

  for (Pending& p : pending) {
    if (p.partial < 0) p.key_hash = KeyHash(p.hash, scope_id, p.ns);
    p.engine.value = EngineKey(p.engine.value, group);  // from here on the engine-map key
    p.engine_mix = EngineMix(p.engine.value);
  }
  return true;
}

void PrefixIndex::Impl::IndexStored(const BlockStored& ev, const StoredPlan& plan, ApplyResult& r) {
  const SourceConfig& cfg = plan.src->config;
  Instance& inst = *plan.inst;
  const uint32_t scope_id = plan.scope_id;
  const uint32_t holder = plan.holder;
  const uint32_t t = plan.t;
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
    GrowEngine(inst);
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
}

void PrefixIndex::Impl::ApplyStored(uint32_t sid, const BlockStored& ev,
                                    std::optional<DpRank> batch_rank, ApplyResult& r) {
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
  // A sparse event (block_offsets) sends every chunk's tokens but hashes only some chunks.
  const bool sparse = tokens && !ev.block_offsets.empty();
  if (page == 0 && tokens && !sparse && ev.token_ids.size() % n == 0) {
    page = static_cast<uint32_t>(ev.token_ids.size() / n);
  }
  const size_t token_chunks = sparse && page != 0 ? ev.token_ids.size() / page : n;
  // Sparse: one offset per hash, the last chunk hashed (the chain continues from it).
  const bool sparse_ok = !sparse || (ev.block_offsets.size() == n && token_chunks > 0 &&
                                     ev.block_offsets.back() + size_t{1} == token_chunks);
  if (tokens && (page == 0 || ev.token_ids.size() != token_chunks * static_cast<size_t>(page) ||
                 !sparse_ok)) {
    // Rejected whole, never sliced past the tokens
    // (docs/upstream-pitfalls.md "Inconsistent events are rejected, not sliced").
    ++r.rejected;
    return;
  }

  // Parent resolution: a known block, a partial page, the root, or an orphan.
  uint32_t parent_idx = kNone;
  const Partial* parent_partial = nullptr;
  if (ev.parent) {
    const uint64_t parent_key = EngineKey(ev.parent->value, ev.scope.group.value_or(0));
    parent_idx = EngineLookup(inst, parent_key);
    if (parent_idx == kNone) {
      auto it = inst.partials.find(parent_key);
      if (it != inst.partials.end()) parent_partial = &it->second;
    }
    if (parent_idx == kNone && parent_partial == nullptr && !standard) {
      // An orphan, never re-rooted under a guessed chain
      // (docs/upstream-pitfalls.md "An unknown parent makes an orphan, never a new root").
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

  const StoredPlan plan{&src,       &inst,          ii,       standard, tokens, t, page,
                        parent_idx, parent_partial, scope_id, bs,       holder};
  if (!KeyStored(ev, plan, r)) return;
  IndexStored(ev, plan, r);
  tokenless += r.tokenless - tokenless_before;
  MaybeEvict(r);
  MaybeRecycle();
}

void PrefixIndex::Impl::ApplyRemoved(uint32_t sid, const BlockRemoved& ev,
                                     std::optional<DpRank> batch_rank, ApplyResult& r) {
  Source& src = sources[sid];
  const uint32_t ii = src.inst;
  Instance& inst = *instances[ii];
  const Tier tier = ev.tier ? *ev.tier : (src.config.is_store() ? Tier::Cpu() : Tier::Gpu());
  const uint32_t t = TierIndex(tier, false);
  const uint32_t holder = HolderFor(sid, RankFor(src, ev.scope.dp_rank, batch_rank), false);
  const auto& hashes = ev.block_hashes;
  const size_t n = hashes.size();
  const uint32_t group = ev.scope.group.value_or(0);
  remove_key.resize(n);
  remove_mix.resize(n);
  for (size_t k = 0; k < n; ++k) {
    remove_key[k] = EngineKey(hashes[k].value, group);
    remove_mix[k] = EngineMix(remove_key[k]);
  }
  WLock();
  // A remove chases three dependent cache misses (engine slot -> block record -> table slot);
  // prefetch them in a pipeline: the engine slot 8 hashes ahead, the record 4 ahead (its index
  // kept in a ring), the table slot 2 ahead.
  // The ring also keeps the engine position found by the peek: an erase shifts entries back
  // only within its probe run, so the position is usually still right (checked before use).
  uint32_t ring[8];
  size_t ring_pos[8];
  auto peek = [&](size_t k) {
    const size_t pos = inst.engine.Find(remove_mix[k], EngineMatch(remove_key[k]));
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
    const uint64_t key = remove_key[k];
    size_t pos = ring_pos[k & 7];
    if (pos == inst.engine.kNotFound || pos >= inst.engine.capacity() ||
        inst.engine.at(pos).block == kNone || inst.engine.at(pos).key() != key) {
      pos = inst.engine.Find(remove_mix[k], EngineMatch(key));
    }
    uint32_t idx = pos == inst.engine.kNotFound ? kNone : inst.engine.at(pos).block;
    if (idx != kNone && block(idx).count == 0) idx = kNone;  // freed, awaiting the sweep
    if (idx == kNone) {
      if (inst.partials.erase(key) == 0) {
        // An unknown hash creates nothing
        // (docs/upstream-pitfalls.md "A remove for an unknown hash creates nothing").
        ++r.unmapped;
        ++unmapped;
      }
      continue;
    }
    if (t == kNone || holder == kNone) continue;  // this holder never stored that tier
    bool freed = false;
    // If this frees the block, the entry at `pos` (pointing at it) is erased just below.
    r.removed += RemovePresence(idx, static_cast<uint16_t>(holder), static_cast<uint16_t>(1u << t),
                                &freed, 1);
    // Only the block table changed since the lookup, so `pos` is still the entry.
    if (freed || !InstanceHolds(block(idx), ii)) EngineEraseAt(inst, pos);
    Tick();
  }
  MaybeRecycle();
}

void PrefixIndex::Impl::ClearHolders(uint32_t sid, uint16_t mask, ApplyResult& r) {
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

void PrefixIndex::Impl::ApplyStoreUpdate(uint32_t sid, const StoreUpdate& ev, ApplyResult& r) {
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
    if (drop != 0)
      r.removed += RemovePresence(ref.idx, static_cast<uint16_t>(holder), drop, &freed);
    if (!freed) kept.push_back({ref.idx, block(ref.idx).gen});
    Tick();
  }
  if (want == 0 || kept.empty()) {
    inst.objects.erase(ev.key);
  } else {
    it->second = std::move(kept);
  }
}

}  // namespace kvindex
