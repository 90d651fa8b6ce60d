// Helpers of the hybrid-model index tests (KV-cache groups, sparse groups): one source "hybrid"
// (vllm, model "m", block size 2) and the longest prefix a query body matches on it.
#ifndef KVINDEX_TESTS_HYBRID_TEST_UTIL_H_
#define KVINDEX_TESTS_HYBRID_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"

namespace kvindex::test {

inline SourceId AddHybrid(PrefixIndex& index) {
  SourceConfig c;
  c.name = "hybrid";
  c.format = "vllm";
  c.model = "m";
  c.block_size = 2;
  Result<SourceId> id = index.AddSource(c);
  REQUIRE(id.ok());
  return *id;
}

// longest_matched of instance "hybrid" for the /query body `body` (0 when it is not listed).
inline uint64_t Longest(const PrefixIndex& index, const std::string& body) {
  Result<QueryRequest> request = ParseQueryRequest(body);
  REQUIRE_MESSAGE(request.ok(), request.status().ToString());
  Result<PrefixMatch> match = MatchRequest(index, *request);
  REQUIRE(match.ok());
  const InstanceMatch* m = match->Find("hybrid");
  return m == nullptr ? 0 : m->longest_matched;
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_HYBRID_TEST_UTIL_H_
