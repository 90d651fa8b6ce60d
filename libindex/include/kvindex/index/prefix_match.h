// PrefixMatch: the answer to "how many leading tokens of this prompt are cached on each instance,
// and where?" (docs/index-rules.md "Query walk"), and MatchQuery, the question's scope.
//
// Per instance: `longest_matched` = block_size x the number of leading blocks present on the
// instance in any tier (its own sources, or a store serving it); per tier = block_size x the
// matched blocks present in that tier; per DP rank = block_size x the longest prefix held by that
// rank's own presence (store-served blocks carry no rank). All figures are tokens.
//
// Thread safety: plain values. `InstanceMatch::instance` views a name owned by the PrefixIndex that
// produced it and stays valid as long as that index lives.
#ifndef KVINDEX_INDEX_PREFIX_MATCH_H_
#define KVINDEX_INDEX_PREFIX_MATCH_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/core/instance.h"
#include "kvindex/core/scope.h"

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

// The DP ranks of one instance: a small vector that keeps up to 4 ranks inline, so a query over
// many instances does not allocate per instance (std::vector-like: size, [], iteration, ==).
class DpList {
 public:
  DpList() = default;
  DpList(std::initializer_list<DpTokens> init) {
    for (const DpTokens& d : init) push_back(d);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const DpTokens* begin() const { return size_ <= kInline ? inline_.data() : heap_.data(); }
  const DpTokens* end() const { return begin() + size_; }
  const DpTokens& operator[](size_t i) const { return begin()[i]; }
  void reserve(size_t) {}
  void push_back(const DpTokens& d) {
    if (size_ < kInline) {
      inline_[size_] = d;
    } else {
      if (size_ == kInline) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(d);
    }
    ++size_;
  }
  friend bool operator==(const DpList& a, const DpList& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  static constexpr size_t kInline = 4;
  size_t size_ = 0;
  std::array<DpTokens, kInline> inline_{};
  std::vector<DpTokens> heap_;  // every entry, once there are more than kInline
};

struct InstanceMatch {
  // User-provided on purpose: value-initialisation (vector::emplace_back()) then runs only the
  // member initialisers below instead of first zeroing the whole object with `rep stos`, which was
  // a measurable share of a 64-instance query.
  InstanceMatch() {}  // NOLINT(modernize-use-equals-default)
  std::string_view instance;  // owned by the index (see the header comment)
  uint32_t block_size = 0;    // the block size this instance was matched with
  uint64_t longest_matched = 0;
  uint64_t gpu = 0;
  uint64_t cpu = 0;
  uint64_t disk = 0;
  // Any other tier by its (upper-cased) name, in first-seen order; usually empty.
  std::vector<std::pair<std::string, uint64_t>> other_tiers;
  // Every DP rank the instance has (zeros included), ascending.
  DpList dp;

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

#endif  // KVINDEX_INDEX_PREFIX_MATCH_H_
