#include "kvindex/index/prefix_match.h"

#include <algorithm>

namespace kvindex {

uint64_t InstanceMatch::TierTokens(const Tier& tier) const {
  switch (tier.kind()) {
    case Tier::Kind::kGpu: return gpu;
    case Tier::Kind::kCpu: return cpu;
    case Tier::Kind::kDisk: return disk;
    case Tier::Kind::kOther: break;
  }
  for (const auto& [name, tokens] : other_tiers) {
    if (name == tier.name()) return tokens;
  }
  return 0;
}

uint64_t InstanceMatch::DpRankTokens(DpRank rank) const {
  for (const DpTokens& d : dp) {
    if (d.rank == rank) return d.tokens;
  }
  return 0;
}

const InstanceMatch* PrefixMatch::Find(std::string_view instance) const {
  auto it = std::lower_bound(instances.begin(), instances.end(), instance,
                             [](const InstanceMatch& m, std::string_view name) {
                               return m.instance < name;
                             });
  if (it == instances.end() || it->instance != instance) return nullptr;
  return &*it;
}

}  // namespace kvindex
