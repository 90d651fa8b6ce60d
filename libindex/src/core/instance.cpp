#include "kvindex/core/instance.h"

#include <array>
#include <cctype>

namespace kvindex {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

struct Spelling {
  std::string_view name;
  Tier::Kind kind;
};

// The tier table of docs/wire-formats.md "Tiers"; keep the two in sync.
constexpr std::array<Spelling, 15> kSpellings = {{
    {"GPU", Tier::Kind::kGpu},
    {"NPU", Tier::Kind::kGpu},
    {"cuda", Tier::Kind::kGpu},
    {"device", Tier::Kind::kGpu},
    {"CPU", Tier::Kind::kCpu},
    {"host", Tier::Kind::kCpu},
    {"memory", Tier::Kind::kCpu},
    {"CPU_PINNED", Tier::Kind::kCpu},
    {"DISK", Tier::Kind::kDisk},
    {"ssd", Tier::Kind::kDisk},
    {"local_disk", Tier::Kind::kDisk},
    {"STORAGE", Tier::Kind::kDisk},
    {"EXTERNAL", Tier::Kind::kDisk},
    {"FS", Tier::Kind::kDisk},
    {"SHARED_STORAGE", Tier::Kind::kDisk},
}};

}  // namespace

Tier Tier::Other(std::string_view name) {
  Tier tier(Kind::kOther);
  tier.other_.reserve(name.size());
  for (char c : name) tier.other_.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return tier;
}

std::string_view Tier::name() const {
  switch (kind_) {
    case Kind::kGpu: return "GPU";
    case Kind::kCpu: return "CPU";
    case Kind::kDisk: return "DISK";
    case Kind::kOther: return other_;
  }
  return other_;
}

Tier ParseTier(std::string_view wire_name) {
  if (wire_name.empty()) return Tier::Gpu();
  for (const Spelling& spelling : kSpellings) {
    if (EqualsIgnoreCase(spelling.name, wire_name)) {
      switch (spelling.kind) {
        case Tier::Kind::kGpu: return Tier::Gpu();
        case Tier::Kind::kCpu: return Tier::Cpu();
        case Tier::Kind::kDisk: return Tier::Disk();
        case Tier::Kind::kOther: break;
      }
    }
  }
  return Tier::Other(wire_name);
}

}  // namespace kvindex
