// FakeModel: publish-fake's own, deliberately simple model of what it published, used to write the
// `expect` answers of `--emit-queries` (docs/cli.md "Expected answers"). It must stay independent
// of PrefixIndex (the code those answers test): per source, a map from (KV-cache group, engine
// hash) to (prefix hash, tiers), and per query a walk over the prompt's prefix hashes (block_hash.h), instance by
// instance.
//
// Rules it models (docs/index-rules.md): a BlockStored is indexed under its parent's prefix hash
// (root when the parent is nil) and only when the parent is known to that source (else an orphan,
// skipped); token ids chain into prefix hashes with kDefaultHashSeed; removals clear one tier;
// AllCleared and a restart clear the source; a Mooncake-seed StoreUpdate replaces an object's tiers
// by key; each KV-cache group (vLLM group_idx, 0 by default; an event's hashes and parent are
// those of its own group) is its own prefix tree, and a query walks one group; a sparse event (block_offsets) chains every
// chunk of its token ids and holds only the chunks the offsets name. An instance matches a block
// while any of its sources holds it in any tier; DP[r] is the longest prefix rank r's sources hold.
//
// Thread safety: none (one thread).
#ifndef KVINDEX_TOOLS_FAKE_FAKE_MODEL_H_
#define KVINDEX_TOOLS_FAKE_FAKE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"

namespace kvindex::cli {

class FakeModel {
 public:
  // Adds a source of `instance`; `rank` is the DP rank the index will know it by (nullopt: none).
  // Returns its index (sources are numbered in order of addition).
  size_t AddSource(std::string instance, std::optional<DpRank> rank, uint32_t block_size);

  // Applies one batch a correct subscriber applied.
  void Apply(size_t source, const EventBatch& batch);
  // A restart or AllCleared: the source holds nothing.
  void Clear(size_t source);

  // The expected /query answer for `tokens`: {instance: {"longest_matched", "GPU", "CPU", "DISK",
  // "DP": {rank: tokens}}} for every instance, in name order.
  // `group` is the KV-cache group the query names (0 without one).
  nlohmann::json Expect(std::span<const TokenId> tokens, uint32_t group = 0) const;

  // Blocks (engine hashes) a source holds, for tests and the summary.
  size_t blocks(size_t source) const { return sources_[source].blocks.size(); }

 private:
  struct Block {
    uint64_t prefix = 0;
    uint8_t tiers = 0;  // bit 0 GPU, 1 CPU, 2 DISK
  };
  using PrefixTiers = std::unordered_map<uint64_t, uint8_t>;  // prefix hash -> tiers
  // An engine hash names a block within its KV-cache group (vLLM reuses a hash across groups).
  using EngineKey = std::pair<uint32_t, uint64_t>;  // (group, engine hash)
  struct Source {
    std::string instance;
    std::optional<DpRank> rank;
    uint32_t block_size = 0;
    std::map<EngineKey, Block> blocks;
    std::map<uint32_t, PrefixTiers> by_prefix;           // KV-cache group -> its blocks
    std::unordered_map<std::string, EngineKey> objects;  // Mooncake key -> its last block
  };
  void Set(Source& s, const EngineKey& key, uint64_t prefix, uint8_t tiers);
  void Unset(Source& s, const EngineKey& key, uint8_t tiers);

  std::vector<Source> sources_;
};

// The tier bit FakeModel uses for `tier` (nullopt = an engine event without a medium = GPU).
uint8_t FakeTierBit(const std::optional<Tier>& tier);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAKE_MODEL_H_
