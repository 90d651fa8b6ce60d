// PrefixIndex's public API: sources, batches, clears, unregistering, queries, stats and scopes.
// The state and the work behind it are PrefixIndex::Impl (index_impl.h).
#include "kvindex/index/prefix_index.h"

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "index_impl.h"

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
    inst->index = ii;
    inst->name = config.name;
    im.instances.push_back(std::move(inst));
    im.instance_by_name.emplace(config.name, ii);
    im.sorted_instances.insert(
        std::upper_bound(
            im.sorted_instances.begin(), im.sorted_instances.end(), config.name,
            [&](const std::string& name, uint32_t x) { return name < im.instances[x]->name; }),
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
  PrefixMatch out;
  KVINDEX_RETURN_IF_ERROR(MatchTokens(query, tokens, out));
  return out;
}

Result<PrefixMatch> PrefixIndex::MatchEngineHashes(const MatchQuery& query,
                                                   std::span<const EngineHash> hashes) const {
  PrefixMatch out;
  KVINDEX_RETURN_IF_ERROR(MatchEngineHashes(query, hashes, out));
  return out;
}

Result<PrefixMatch> PrefixIndex::MatchPrefixHashes(const MatchQuery& query,
                                                   std::span<const PrefixHash> hashes) const {
  PrefixMatch out;
  KVINDEX_RETURN_IF_ERROR(MatchPrefixHashes(query, hashes, out));
  return out;
}

Status PrefixIndex::MatchTokens(const MatchQuery& query, std::span<const TokenId> tokens,
                                PrefixMatch& out) const {
  return impl_->Match(query, Impl::Mode::kTokens, tokens, {}, {}, out);
}

Status PrefixIndex::MatchEngineHashes(const MatchQuery& query, std::span<const EngineHash> hashes,
                                      PrefixMatch& out) const {
  return impl_->Match(query, Impl::Mode::kEngine, {}, hashes, {}, out);
}

Status PrefixIndex::MatchPrefixHashes(const MatchQuery& query, std::span<const PrefixHash> hashes,
                                      PrefixMatch& out) const {
  return impl_->Match(query, Impl::Mode::kPrefix, {}, {}, hashes, out);
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
  const uint64_t mapped_chunks =
      im.chunks.size() + (im.chunk_ahead.load(std::memory_order_relaxed) ? 1 : 0);
  uint64_t bytes = mapped_chunks * static_cast<uint64_t>(kChunkSize) * sizeof(Block) +
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
