#include "kvindex/core/scope.h"

#include <unordered_set>

#include <doctest/doctest.h>

namespace kvindex {
namespace {

TEST_SUITE("scope") {

TEST_CASE("A LoRA name wins over a LoRA id") {
  CHECK(LoraNameFrom("adapter-a", 7) == "adapter-a");
  CHECK(LoraNameFrom("adapter-a", std::nullopt) == "adapter-a");
}

TEST_CASE("A LoRA id without a name becomes id:<n>; -1 or nil means no LoRA") {
  CHECK(LoraNameFrom(std::nullopt, 0) == "id:0");
  CHECK(LoraNameFrom(std::nullopt, 12) == "id:12");
  CHECK(LoraNameFrom("", 3) == "id:3");
  CHECK(LoraNameFrom(std::nullopt, -1).empty());
  CHECK(LoraNameFrom(std::nullopt, std::nullopt).empty());
  CHECK(LoraNameFrom("", -1).empty());
}

TEST_CASE("A request's cache_salt wins over the source's salt") {
  CHECK(EffectiveSalt("source-salt", std::nullopt) == "source-salt");
  CHECK(EffectiveSalt("source-salt", "") == "source-salt");
  CHECK(EffectiveSalt("source-salt", "request-salt") == "request-salt");
  CHECK(EffectiveSalt("", std::nullopt).empty());
}

TEST_CASE("An absent tenant is the default tenant") {
  CHECK(TenantOrDefault(std::nullopt) == "default");
  CHECK(TenantOrDefault("") == "default");
  CHECK(TenantOrDefault("acme") == "acme");
  CHECK(Scope{}.tenant == "default");
}

TEST_CASE("Scopes differing in any field are distinct keys") {
  Scope base;
  base.model = "llama";
  base.block_size = 16;
  std::unordered_set<Scope> set = {base};
  Scope other = base;
  other.tenant = "acme";
  CHECK(set.count(other) == 0);
  other = base;
  other.lora = "a";
  CHECK(set.count(other) == 0);
  other = base;
  other.salt = "s";
  CHECK(set.count(other) == 0);
  other = base;
  other.block_size = 32;
  CHECK(set.count(other) == 0);
  other = base;
  other.group = 1;
  CHECK(set.count(other) == 0);
  other = base;
  CHECK(set.count(other) == 1);
  // Field boundaries matter: ("ab","c") is not ("a","bc").
  Scope x = base, y = base;
  x.model = "ab";
  x.lora = "c";
  y.model = "a";
  y.lora = "bc";
  CHECK(x != y);
  CHECK(std::hash<Scope>()(x) != std::hash<Scope>()(y));
}

TEST_CASE("Scope::ToString names every non-default field") {
  Scope s;
  s.model = "m";
  s.block_size = 16;
  CHECK(s.ToString() == "default/m/bs=16");
  s.lora = "a";
  s.salt = "x";
  s.group = 2;
  CHECK(s.ToString() == "default/m/lora=a/salt=x/bs=16/group=2");
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
