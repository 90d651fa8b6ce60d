#include "kvindex/core/instance.h"

#include <doctest/doctest.h>

namespace kvindex {
namespace {

TEST_SUITE("instance") {

// docs/wire-formats.md "Tiers"
TEST_CASE("Every spelling of the tier table normalises, case-insensitively") {
  struct Case {
    const char* wire;
    Tier::Kind kind;
  };
  const Case cases[] = {
      {"GPU", Tier::Kind::kGpu},       {"gpu", Tier::Kind::kGpu},       {"NPU", Tier::Kind::kGpu},
      {"cuda", Tier::Kind::kGpu},      {"CUDA", Tier::Kind::kGpu},      {"device", Tier::Kind::kGpu},
      {"CPU", Tier::Kind::kCpu},       {"cpu", Tier::Kind::kCpu},       {"host", Tier::Kind::kCpu},
      {"memory", Tier::Kind::kCpu},    {"MEMORY", Tier::Kind::kCpu},    {"CPU_PINNED", Tier::Kind::kCpu},
      {"cpu_pinned", Tier::Kind::kCpu}, {"DISK", Tier::Kind::kDisk},    {"disk", Tier::Kind::kDisk},
      {"ssd", Tier::Kind::kDisk},      {"SSD", Tier::Kind::kDisk},      {"local_disk", Tier::Kind::kDisk},
      {"STORAGE", Tier::Kind::kDisk},  {"storage", Tier::Kind::kDisk},  {"EXTERNAL", Tier::Kind::kDisk},
      {"external", Tier::Kind::kDisk},
  };
  for (const Case& c : cases) {
    CAPTURE(c.wire);
    CHECK(ParseTier(c.wire).kind() == c.kind);
  }
  CHECK(ParseTier("cuda").name() == "GPU");
  CHECK(ParseTier("memory").name() == "CPU");
  CHECK(ParseTier("local_disk").name() == "DISK");
}

TEST_CASE("A missing medium is GPU") {
  CHECK(ParseTier("") == Tier::Gpu());
  CHECK(Tier() == Tier::Gpu());
}

TEST_CASE("Any other tier name is kept as its own tier, upper-cased") {
  const Tier hbm = ParseTier("hbm3");
  CHECK(hbm.kind() == Tier::Kind::kOther);
  CHECK(hbm.name() == "HBM3");
  CHECK(ParseTier("HBM3") == hbm);
  CHECK(ParseTier("remote") != hbm);
  // Near misses of table entries are not folded into them.
  CHECK(ParseTier("gpus").kind() == Tier::Kind::kOther);
  CHECK(ParseTier("local disk").kind() == Tier::Kind::kOther);
  CHECK(std::hash<Tier>()(ParseTier("hbm3")) == std::hash<Tier>()(hbm));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
