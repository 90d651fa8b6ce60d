// PrefixMatch: the answer to "how many leading tokens of this prompt are cached on each instance,
// and where?" (SPEC §3 "Query"), and MatchQuery, the question's scope.
//
// Per instance: `longest_matched` = block_size x the number of leading blocks present on the
// instance in any tier (its own sources, or a store serving it); per tier = block_size x the
// matched blocks present in that tier; per DP rank = block_size x the longest prefix held by that
// rank's own presence (store-served blocks carry no rank). All figures are tokens.
//
// Thread safety: plain values. `InstanceMatch::instance` views a name owned by the PrefixIndex that
// produced it and stays valid as long as that index lives.
#ifndef KVINDEX_PREFIX_MATCH_H_
#define KVINDEX_PREFIX_MATCH_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/instance.h"
#include "kvindex/scope.h"

namespace kvindex {

// The scope a query names and, optionally, the instances it asks about.
struct MatchQuery {
  std::string tenant{kDefaultTenant};
  std::string model;
  std::string lora;  // empty = no LoRA (use LoraNameFrom() for ids)
  std::string salt;  // the request's cache_salt; empty = unsalted
  // Tokens per block. nullopt: each instance's configured (or first seen) block size.
  std::optional<uint32_t> block_size;
  uint32_t group = 0;
  // Instances to answer for; empty = every instance known in the scope (zeros included). Names
  // the index does not know are left out of the answer.
  std::vector<std::string> instances;
};

// Tokens held by one DP rank of an instance.
struct DpTokens {
  DpRank rank = 0;
  uint64_t tokens = 0;
  friend bool operator==(const DpTokens&, const DpTokens&) = default;
};

struct InstanceMatch {
  std::string_view instance;  // owned by the index (see the header comment)
  uint32_t block_size = 0;    // the block size this instance was matched with
  uint64_t longest_matched = 0;
  uint64_t gpu = 0;
  uint64_t cpu = 0;
  uint64_t disk = 0;
  // Any other tier by its (upper-cased) name, in first-seen order; usually empty.
  std::vector<std::pair<std::string, uint64_t>> other_tiers;
  // Every DP rank the instance has (zeros included), ascending.
  std::vector<DpTokens> dp;

  // Tokens in `tier` (0 when absent).
  uint64_t TierTokens(const Tier& tier) const;
  // Tokens held by `rank` (0 when the rank is unknown).
  uint64_t DpRankTokens(DpRank rank) const;
};

struct PrefixMatch {
  // One entry per answered instance, sorted by name.
  std::vector<InstanceMatch> instances;
  // The entry for `instance`, or nullptr.
  const InstanceMatch* Find(std::string_view instance) const;
};

}  // namespace kvindex

#endif  // KVINDEX_PREFIX_MATCH_H_
