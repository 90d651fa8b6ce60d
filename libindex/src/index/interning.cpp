// Interning (writer): scope ids, (tenant, model) pair ids and their member lists, holders (one
// source at one DP rank), and the packed per-instance query record they feed.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "index_impl.h"

namespace kvindex {

uint32_t PrefixIndex::Impl::InternScope(const Scope& s) {
  auto it = scope_ids.find(s);
  if (it != scope_ids.end()) return it->second;
  WLock();
  const uint32_t id = static_cast<uint32_t>(scopes.size());
  scopes.push_back(s);
  scope_ids.emplace(s, id);
  scope_tm.push_back(InternTm(s.tenant, s.model));
  return id;
}

uint32_t PrefixIndex::Impl::InternTm(const std::string& tenant, const std::string& model) {
  auto key = std::make_pair(tenant, model);
  auto it = tm_ids.find(key);
  if (it != tm_ids.end()) return it->second;
  WLock();
  const uint32_t id = static_cast<uint32_t>(tm_ids.size());
  tm_ids.emplace(std::move(key), id);
  return id;
}

void PrefixIndex::Impl::AddTm(uint32_t ii, uint32_t tm) {
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

void PrefixIndex::Impl::RefreshQuery(uint32_t ii) {
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

uint32_t PrefixIndex::Impl::HolderFor(uint32_t sid, std::optional<DpRank> rank, bool create) {
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

}  // namespace kvindex
