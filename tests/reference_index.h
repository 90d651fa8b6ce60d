// ReferenceIndex: a deliberately naive model of docs/index-rules.md, the oracle of the differential
// test.
//
// Maps of sets, linear scans, no attention to speed. It shares nothing with libindex except the
// public vocabulary (event.h, instance.h, scope.h, prefix_match.h) and the hash chain of
// block_hash.h. It covers the rules the differential stream exercises: scopes by LoRA and salt,
// presence per (source, tier), idempotent stores and removes, orphans, clears, stores serving
// instances, and queries by token ids and engine hashes. Every source has one fixed DP rank.
#ifndef KVINDEX_TESTS_REFERENCE_INDEX_H_
#define KVINDEX_TESTS_REFERENCE_INDEX_H_

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/instance.h"
#include "kvindex/index/prefix_match.h"

namespace kvindex::test {

class ReferenceIndex {
 public:
  struct Source {
    std::string instance;
    DpRank rank = 0;
    bool store = false;
    std::vector<std::string> serves;  // "*" = all
  };
  // (lora, salt, prefix hash)
  using BlockKey = std::tuple<std::string, std::string, uint64_t>;

  int AddSource(Source s) {
    names_.insert(s.instance);
    sources_.push_back(std::move(s));
    return static_cast<int>(sources_.size() - 1);
  }

  uint64_t orphans = 0;
  uint64_t unmapped = 0;

  // lora/salt apply to a root block; children inherit their parent's.
  void Store(int source, const std::vector<uint64_t>& hashes, std::optional<uint64_t> parent,
             const std::vector<TokenId>& tokens, const std::string& tier, const std::string& lora,
             const std::string& salt, uint32_t block_size) {
    const std::string& inst = sources_[source].instance;
    std::string scope_lora = lora;
    std::string scope_salt = salt;
    std::optional<PrefixHash> prev;
    if (parent) {
      auto it = engine_.find({inst, *parent});
      if (it == engine_.end()) {
        orphans += hashes.size();
        return;
      }
      scope_lora = std::get<0>(it->second);
      scope_salt = std::get<1>(it->second);
      prev = PrefixHash{std::get<2>(it->second)};
    }
    for (size_t i = 0; i < hashes.size(); ++i) {
      std::vector<TokenId> block(tokens.begin() + i * block_size,
                                 tokens.begin() + (i + 1) * block_size);
      prev = ChainPrefixHash(prev, HashBlockTokens(block));
      BlockKey key{scope_lora, scope_salt, prev->value};
      blocks_[key][source].insert(tier);
      engine_[{inst, hashes[i]}] = key;
    }
  }

  void Remove(int source, const std::vector<uint64_t>& hashes, const std::string& tier) {
    const std::string& inst = sources_[source].instance;
    for (uint64_t h : hashes) {
      auto it = engine_.find({inst, h});
      if (it == engine_.end()) {
        ++unmapped;
        continue;
      }
      const BlockKey key = it->second;
      auto b = blocks_.find(key);
      if (b != blocks_.end()) {
        auto s = b->second.find(source);
        if (s != b->second.end()) {
          s->second.erase(tier);
          if (s->second.empty()) b->second.erase(s);
        }
        if (b->second.empty()) blocks_.erase(b);
      }
      if (!InstanceHolds(inst, key)) engine_.erase(it);
    }
  }

  void Clear(int source) {
    for (auto b = blocks_.begin(); b != blocks_.end();) {
      b->second.erase(source);
      b = b->second.empty() ? blocks_.erase(b) : std::next(b);
    }
    const std::string& inst = sources_[source].instance;
    for (auto e = engine_.begin(); e != engine_.end();) {
      if (e->first.first == inst && !InstanceHolds(inst, e->second)) {
        e = engine_.erase(e);
      } else {
        ++e;
      }
    }
  }

  // Every instance, sorted by name, walked over `keys` (nullopt = a key that cannot match).
  PrefixMatch Match(const std::vector<std::optional<BlockKey>>& keys_for_all,
                    const std::map<std::string, std::vector<std::optional<BlockKey>>>& per_instance,
                    uint32_t block_size) const {
    PrefixMatch out;
    for (const std::string& name : names_) {
      const auto pi = per_instance.find(name);
      const auto& keys = pi != per_instance.end() ? pi->second : keys_for_all;
      InstanceMatch m;
      m.instance = name;  // views names_, which lives as long as the reference
      m.block_size = block_size;
      uint64_t blocks = 0;
      uint64_t gpu = 0, cpu = 0, disk = 0;
      for (const auto& key : keys) {
        if (!key) break;
        std::set<std::string> tiers;
        for (size_t s = 0; s < sources_.size(); ++s) {
          if (!Counts(s, name)) continue;
          auto b = blocks_.find(*key);
          if (b == blocks_.end()) continue;
          auto h = b->second.find(static_cast<int>(s));
          if (h != b->second.end()) tiers.insert(h->second.begin(), h->second.end());
        }
        if (tiers.empty()) break;
        ++blocks;
        gpu += tiers.count("GPU");
        cpu += tiers.count("CPU");
        disk += tiers.count("DISK");
      }
      m.longest_matched = blocks * block_size;
      m.gpu = gpu * block_size;
      m.cpu = cpu * block_size;
      m.disk = disk * block_size;
      std::set<DpRank> ranks;
      for (const Source& s : sources_) {
        if (s.instance == name && !s.store) ranks.insert(s.rank);
      }
      for (DpRank r : ranks) {
        uint64_t depth = 0;
        for (size_t s = 0; s < sources_.size(); ++s) {
          if (sources_[s].instance != name || sources_[s].store || sources_[s].rank != r) continue;
          uint64_t d = 0;
          for (const auto& key : keys) {
            if (!key) break;
            auto b = blocks_.find(*key);
            if (b == blocks_.end() || !b->second.count(static_cast<int>(s))) break;
            ++d;
          }
          depth = std::max(depth, d);
        }
        m.dp.push_back({r, depth * block_size});
      }
      out.instances.push_back(m);
    }
    return out;
  }

  PrefixMatch MatchTokens(const std::vector<TokenId>& tokens, const std::string& lora,
                          const std::string& salt, uint32_t block_size) const {
    std::vector<std::optional<BlockKey>> keys;
    std::optional<PrefixHash> prev;
    for (size_t i = 0; i + block_size <= tokens.size(); i += block_size) {
      std::vector<TokenId> block(tokens.begin() + i, tokens.begin() + i + block_size);
      prev = ChainPrefixHash(prev, HashBlockTokens(block));
      keys.push_back(BlockKey{lora, salt, prev->value});
    }
    return Match(keys, {}, block_size);
  }

  PrefixMatch MatchEngine(const std::vector<uint64_t>& hashes, const std::string& lora,
                          const std::string& salt, uint32_t block_size) const {
    std::map<std::string, std::vector<std::optional<BlockKey>>> per;
    for (const Source& s : sources_) {
      auto& keys = per[s.instance];
      if (!keys.empty()) continue;
      for (uint64_t h : hashes) {
        auto it = engine_.find({s.instance, h});
        if (it == engine_.end() || std::get<0>(it->second) != lora ||
            std::get<1>(it->second) != salt) {
          keys.push_back(std::nullopt);
        } else {
          keys.push_back(it->second);
        }
      }
    }
    return Match({}, per, block_size);
  }

  size_t presences() const {
    size_t n = 0;
    for (const auto& [key, holders] : blocks_) {
      for (const auto& [source, tiers] : holders) n += tiers.size();
    }
    return n;
  }
  size_t blocks() const { return blocks_.size(); }

 private:
  // Whether source s's presence counts for instance `name` (its own, or a store serving it).
  bool Counts(size_t s, const std::string& name) const {
    const Source& src = sources_[s];
    if (src.instance == name) return true;
    for (const std::string& served : src.serves) {
      if (served == "*" || served == name) return true;
    }
    return false;
  }
  bool InstanceHolds(const std::string& inst, const BlockKey& key) const {
    auto b = blocks_.find(key);
    if (b == blocks_.end()) return false;
    for (const auto& [source, tiers] : b->second) {
      if (sources_[source].instance == inst) return true;
    }
    return false;
  }

  std::vector<Source> sources_;
  std::set<std::string> names_;
  std::map<BlockKey, std::map<int, std::set<std::string>>> blocks_;
  std::map<std::pair<std::string, uint64_t>, BlockKey> engine_;
};

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_REFERENCE_INDEX_H_
