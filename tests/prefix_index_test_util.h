// Helpers of the PrefixIndex tests (prefix_index_test.cpp, prefix_index_lifecycle_test.cpp):
// sources as the tests declare them, and calls that REQUIRE success.
#ifndef KVINDEX_TESTS_PREFIX_INDEX_TEST_UTIL_H_
#define KVINDEX_TESTS_PREFIX_INDEX_TEST_UTIL_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"

#include "prefix_index_builders.h"

namespace kvindex::test {

inline SourceConfig Engine(std::string name, std::optional<DpRank> rank = std::nullopt,
                           uint32_t block_size = 2) {
  SourceConfig c;
  c.name = std::move(name);
  c.format = "vllm";
  c.model = "m";
  c.block_size = block_size;
  c.dp_rank = rank;
  return c;
}

inline SourceConfig Store(std::string name, std::vector<std::string> serves,
                          uint32_t block_size = 2) {
  SourceConfig c;
  c.name = std::move(name);
  c.format = "mooncake";
  c.model = "m";
  c.block_size = block_size;
  c.serves = std::move(serves);
  return c;
}

inline MatchQuery Query(std::string model = "m") {
  MatchQuery q;
  q.model = std::move(model);
  return q;
}

inline SourceId Add(PrefixIndex& index, const SourceConfig& c) {
  auto id = index.AddSource(c);
  REQUIRE(id.ok());
  return *id;
}

inline ApplyResult Apply(PrefixIndex& index, SourceId s, const EventBatch& b) {
  auto r = index.Apply(s, b);
  REQUIRE(r.ok());
  return *r;
}

inline InstanceMatch MatchOne(const PrefixIndex& index, const MatchQuery& q,
                              const std::vector<TokenId>& tokens, std::string_view instance) {
  auto m = index.MatchTokens(q, tokens);
  REQUIRE(m.ok());
  const InstanceMatch* im = m->Find(instance);
  REQUIRE_MESSAGE(im != nullptr, "instance " << instance << " missing from the answer");
  InstanceMatch copy = *im;
  return copy;
}

inline const std::vector<TokenId> kPrompt = {101, 15, 100, 55, 89, 63};

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_PREFIX_INDEX_TEST_UTIL_H_
