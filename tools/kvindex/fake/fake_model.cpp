#include "fake/fake_model.h"

#include <algorithm>
#include <set>
#include <utility>

namespace kvindex::cli {

uint8_t FakeTierBit(const std::optional<Tier>& tier) {
  if (!tier) return 1;
  switch (tier->kind()) {
    case Tier::Kind::kGpu: return 1;
    case Tier::Kind::kCpu: return 2;
    case Tier::Kind::kDisk: return 4;
    case Tier::Kind::kOther: return 0;  // publish-fake never publishes other tiers
  }
  return 1;
}

size_t FakeModel::AddSource(std::string instance, std::optional<DpRank> rank, uint32_t block_size) {
  Source s;
  s.instance = std::move(instance);
  s.rank = rank;
  s.block_size = block_size;
  sources_.push_back(std::move(s));
  return sources_.size() - 1;
}

void FakeModel::Set(Source& s, const EngineKey& key, uint64_t prefix, uint8_t tiers) {
  Block& b = s.blocks[key];
  b.prefix = prefix;
  b.tiers |= tiers;
  s.by_prefix[key.first][prefix] |= tiers;
}

void FakeModel::Unset(Source& s, const EngineKey& key, uint8_t tiers) {
  auto it = s.blocks.find(key);
  if (it == s.blocks.end()) return;
  it->second.tiers &= static_cast<uint8_t>(~tiers);
  PrefixTiers& group = s.by_prefix[key.first];
  auto p = group.find(it->second.prefix);
  if (p != group.end()) {
    p->second &= static_cast<uint8_t>(~tiers);
    if (p->second == 0) group.erase(p);
  }
  if (it->second.tiers == 0) s.blocks.erase(it);
}

void FakeModel::Clear(size_t source) {
  Source& s = sources_[source];
  s.blocks.clear();
  s.by_prefix.clear();
  s.objects.clear();
}

void FakeModel::Apply(size_t source, const EventBatch& batch) {
  Source& s = sources_[source];
  for (const Event& event : batch.events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      std::optional<PrefixHash> parent;
      const uint32_t group = stored->scope.group.value_or(0);
      if (stored->parent) {
        // The parent is the block of that hash in the event's own group.
        auto it = s.blocks.find({group, stored->parent->value});
        if (it == s.blocks.end()) continue;  // an orphan: never indexed under a guessed chain
        parent = PrefixHash{it->second.prefix};
      }
      const uint32_t bs = stored->scope.block_size.value_or(s.block_size);
      std::vector<PrefixHash> prefixes;
      AppendPrefixHashes(stored->token_ids, bs, parent, kDefaultHashSeed, prefixes);
      const uint8_t bit = FakeTierBit(stored->tier);
      const std::vector<uint32_t>& offsets = stored->block_offsets;
      for (size_t i = 0; i < stored->block_hashes.size(); ++i) {
        // Sparse: hash i is the block of chunk offsets[i]; dense: of chunk i.
        const size_t chunk =
            offsets.empty() ? i : (i < offsets.size() ? offsets[i] : prefixes.size());
        if (chunk >= prefixes.size()) break;
        Set(s, {group, stored->block_hashes[i].value}, prefixes[chunk].value, bit);
      }
      if (stored->wire.object_key && !stored->block_hashes.empty()) {
        s.objects[*stored->wire.object_key] = {group, stored->block_hashes.back().value};
      }
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      const uint8_t bit = FakeTierBit(removed->tier);
      const uint32_t group = removed->scope.group.value_or(0);
      for (EngineHash h : removed->block_hashes) Unset(s, {group, h.value}, bit);
    } else if (const auto* cleared = std::get_if<AllCleared>(&event)) {
      if (!cleared->tier) {
        Clear(source);
      } else {
        const uint8_t bit = FakeTierBit(cleared->tier);
        std::vector<EngineKey> keys;
        for (const auto& [key, block] : s.blocks) keys.push_back(key);
        for (const EngineKey& key : keys) Unset(s, key, bit);
      }
    } else if (const auto* update = std::get_if<StoreUpdate>(&event)) {
      auto it = s.objects.find(update->key);
      if (it == s.objects.end()) continue;  // unmapped: never stored with tokens
      uint8_t tiers = 0;
      for (const Replica& r : update->replicas) tiers |= FakeTierBit(r.tier);
      auto b = s.blocks.find(it->second);
      if (b == s.blocks.end()) continue;
      const uint8_t drop = static_cast<uint8_t>(b->second.tiers & ~tiers);
      const EngineKey key = it->second;
      const uint64_t prefix = b->second.prefix;
      if (drop) Unset(s, key, drop);
      if (tiers) Set(s, key, prefix, tiers);
      if (update->replicas.empty()) s.objects.erase(it);
    }
  }
}

nlohmann::json FakeModel::Expect(std::span<const TokenId> tokens, uint32_t group) const {
  std::map<std::string, std::vector<const Source*>> by_instance;
  for (const Source& s : sources_) by_instance[s.instance].push_back(&s);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [instance, sources] : by_instance) {
    const uint32_t bs = sources.front()->block_size;
    const std::vector<PrefixHash> chain = ChainPrefixHashes(tokens, bs);
    auto tiers_at = [&](const Source* s, size_t i) -> uint8_t {
      const auto g = s->by_prefix.find(group);
      if (g == s->by_prefix.end()) return 0;
      auto it = g->second.find(chain[i].value);
      return it == g->second.end() ? 0 : it->second;
    };
    uint64_t matched = 0, gpu = 0, cpu = 0, disk = 0;
    for (size_t i = 0; i < chain.size(); ++i) {
      uint8_t any = 0;
      for (const Source* s : sources) any |= tiers_at(s, i);
      if (any == 0) break;
      ++matched;
      if (any & 1) ++gpu;
      if (any & 2) ++cpu;
      if (any & 4) ++disk;
    }
    nlohmann::json dp = nlohmann::json::object();
    std::set<DpRank> ranks;
    for (const Source* s : sources) {
      if (s->rank) ranks.insert(*s->rank);
    }
    for (DpRank r : ranks) {
      uint64_t depth = 0;
      for (size_t i = 0; i < chain.size(); ++i) {
        uint8_t any = 0;
        for (const Source* s : sources) {
          if (s->rank == r) any |= tiers_at(s, i);
        }
        if (any == 0) break;
        ++depth;
      }
      dp[std::to_string(r)] = depth * bs;
    }
    out[instance] = {{"longest_matched", matched * bs},
                     {"GPU", gpu * bs},
                     {"CPU", cpu * bs},
                     {"DISK", disk * bs},
                     {"DP", dp}};
  }
  return out;
}

}  // namespace kvindex::cli
