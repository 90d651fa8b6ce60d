// Where a block lives: instances, sources, data-parallel ranks and tiers.
//
// An *instance* is one serving engine (a vLLM or SGLang server, or a Mooncake store), named by
// the user. A *source* is one ZeroMQ endpoint publishing for one instance and one DP rank;
// several sources may share an instance. A *tier* is the memory a block is held in: GPU (G1),
// CPU (G2), DISK (G3), or any other name a publisher uses, kept as its own tier.
//
// Thread safety: plain values.
#ifndef KVINDEX_CORE_INSTANCE_H_
#define KVINDEX_CORE_INSTANCE_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kvindex {

// Dense id of a source within one index or capture (assigned in order of definition).
struct SourceId {
  uint32_t value = 0;
  friend auto operator<=>(const SourceId&, const SourceId&) = default;
};

// A data-parallel rank as published (vLLM `data_parallel_rank`, SGLang `attn_dp_rank`).
using DpRank = int32_t;

class Tier {
 public:
  enum class Kind : uint8_t { kGpu = 0, kCpu = 1, kDisk = 2, kOther = 3 };

  // GPU by default: an engine event without a medium is a GPU event.
  Tier() = default;
  static Tier Gpu() { return Tier(Kind::kGpu); }
  static Tier Cpu() { return Tier(Kind::kCpu); }
  static Tier Disk() { return Tier(Kind::kDisk); }
  // A tier outside the table; `name` is stored upper-cased. Prefer ParseTier().
  static Tier Other(std::string_view name);

  Kind kind() const { return kind_; }
  // "GPU", "CPU", "DISK", or the upper-cased name of another tier.
  std::string_view name() const;

  friend bool operator==(const Tier&, const Tier&) = default;

 private:
  explicit Tier(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::kGpu;
  std::string other_;  // only for kOther
};

// Normalises a publisher's tier spelling, case-insensitively (docs/wire-formats.md "Tiers"):
//   GPU, NPU, cuda, device                     -> GPU
//   CPU, host, memory, CPU_PINNED              -> CPU
//   DISK, ssd, local_disk, STORAGE, EXTERNAL,
//   FS, SHARED_STORAGE                         -> DISK
//   empty                                      -> GPU (a missing medium)
//   anything else                              -> Other(upper-cased name)
Tier ParseTier(std::string_view wire_name);

}  // namespace kvindex

template <>
struct std::hash<kvindex::SourceId> {
  size_t operator()(const kvindex::SourceId& s) const noexcept { return s.value; }
};
template <>
struct std::hash<kvindex::Tier> {
  size_t operator()(const kvindex::Tier& t) const noexcept {
    return t.kind() == kvindex::Tier::Kind::kOther ? std::hash<std::string_view>()(t.name())
                                                   : static_cast<size_t>(t.kind());
  }
};

#endif  // KVINDEX_CORE_INSTANCE_H_
