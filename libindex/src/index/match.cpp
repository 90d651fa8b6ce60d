// Queries (shared lock): the candidates of a query, one walk per group of candidates that share
// a scope (and, by token ids, a seed), the software-pipelined resolution of prefix keys to block
// records, and the answer.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/scope.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_match.h"

#include "index_impl.h"

namespace kvindex {

// 32 bytes and trivially initialised: a query over 64 instances builds 64 of these, so nothing
// here is zeroed per tier (the per-tier counts live in Scratch::tier_counts).
struct PrefixIndex::Impl::Member {
  uint32_t inst;
  uint32_t block_size;
  uint32_t scope;  // kNone: scope unknown -> zeros
  uint32_t matched;
  uint64_t seed;
  uint32_t seen;
  uint16_t mask;
  uint16_t last_mask;  // the tiers it matched the last fully walked block in
};
struct PrefixIndex::Impl::Scratch {
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
  std::vector<uint64_t> keys;        // prefix hash per depth (pipelined resolution)
  std::vector<uint64_t> key_hashes;  // KeyHash per depth
  std::vector<uint32_t> resolved;
  std::vector<uint32_t> named;
  std::vector<uint8_t> done;
  Scope scope;
  std::pair<std::string, std::string> tm_key;  // (tenant, model)
};

// Walks `n` blocks for the members in `group` (indices into scratch.members); resolve(d) gives
// the block index of depth d or kNone.
template <typename Resolve>
void PrefixIndex::Impl::Walk(Scratch& sc, size_t n, Resolve&& resolve) const {
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

void PrefixIndex::Impl::WalkKeyed(Scratch& sc, Mode mode, std::span<const TokenId> tokens,
                                  std::span<const PrefixHash> prefix, const Member& lead) const {
  const uint32_t scope = lead.scope;
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
      AppendPrefixHashes(tokens.subspan(keyed * bs, (end - keyed) * bs), static_cast<uint32_t>(bs),
                         parent, seed, sc.hashes);
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
      if (guess >= 0 && guess < static_cast<int64_t>(allocated))
        cand = static_cast<uint32_t>(guess);
    }
    if (cand == kNone) cand = probe_table(k);
    sc.resolved[k] = cand;
    if (cand != kNone) __builtin_prefetch(&block(cand));
  };
  // Forced inline: one call per walked depth otherwise (GCC keeps the lambda out of line).
  Walk(sc, n, [&](size_t d) __attribute__((always_inline)) -> uint32_t {
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

void PrefixIndex::Impl::CollectResults(const Scratch& sc, PrefixMatch& out) const {
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
}

Status PrefixIndex::Impl::Match(const MatchQuery& q, Mode mode, std::span<const TokenId> tokens,
                                std::span<const EngineHash> engine,
                                std::span<const PrefixHash> prefix, PrefixMatch& out) const {
  out.instances.clear();  // its capacity serves this answer
  if (q.block_size && *q.block_size == 0) {
    // Never a division by 0 (docs/upstream-pitfalls.md "A block size of 0 never divides").
    return Status::InvalidArgument("query: block_size must be positive");
  }
  thread_local Scratch sc;
  std::shared_lock<RwLock> guard(lock);
  // Candidates, in name order.
  sc.members.clear();
  // Forced inline: it runs per candidate, and Match() is past the compiler's growth limits.
  auto add_member = [&](uint32_t ii) __attribute__((always_inline)) {
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
    std::sort(named.begin(), named.end(),
              [&](uint32_t a, uint32_t b) { return instances[a]->name < instances[b]->name; });
    named.erase(std::unique(named.begin(), named.end()), named.end());
    for (uint32_t ii : named) add_member(ii);
  } else {
    sc.tm_key.first.assign(q.tenant);  // the scratch's key keeps its storage: no copy allocated
    sc.tm_key.second.assign(q.model);
    auto it = tm_ids.find(sc.tm_key);
    if (it == tm_ids.end()) return Status::Ok();
    const uint32_t tm = it->second;
    if (tm < tm_members.size()) {
      for (uint32_t ii : tm_members[tm]) {
        if (inst_q[ii].listed) add_member(ii);
      }
    }
  }
  // Scope per distinct block size (the scratch's, whose strings keep their storage).
  Scope& s = sc.scope;
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
      const uint32_t group = scopes[scope].group;
      Walk(sc, engine.size(), [&](size_t d) __attribute__((always_inline)) {
        const uint32_t idx = EngineLookup(inst, EngineKey(engine[d].value, group));
        if (idx == kNone || block(idx).scope != scope) return kNone;
        return idx;
      });
      continue;
    }
    WalkKeyed(sc, mode, tokens, prefix, lead);
  }
  CollectResults(sc, out);
  return Status::Ok();
}

}  // namespace kvindex
