// The differential check of the query JSON fast paths against their nlohmann DOM references
// (query_json.h): used by tests/query_json_diff_test.cpp and the query_json fuzz target.
#ifndef KVINDEX_TESTS_QUERY_JSON_DIFF_H_
#define KVINDEX_TESTS_QUERY_JSON_DIFF_H_

#include <string>
#include <string_view>

#include "kvindex/query/query_json.h"

namespace kvindex::test {

inline bool SameRequest(const QueryRequest& a, const QueryRequest& b) {
  return a.kind == b.kind && a.match.tenant == b.match.tenant && a.match.model == b.match.model &&
         a.match.lora == b.match.lora && a.match.salt == b.match.salt &&
         a.match.block_size == b.match.block_size && a.match.group == b.match.group &&
         a.match.instances == b.match.instances && a.tokens == b.tokens &&
         a.engine_hashes == b.engine_hashes && a.prefix_hashes == b.prefix_hashes &&
         a.explain == b.explain;
}

// "" when ParseQueryRequest and ParseQueryRequestWithDom agree on `body` (both accept with equal
// requests, or both reject with the same code and message); else what differs.
inline std::string ParseDifference(std::string_view body) {
  const Result<QueryRequest> fast = ParseQueryRequest(body);
  const Result<QueryRequest> dom = ParseQueryRequestWithDom(body);
  if (fast.ok() != dom.ok()) {
    return std::string("fast ") + (fast.ok() ? "accepts" : "rejects: " + fast.status().message()) +
           ", DOM " + (dom.ok() ? "accepts" : "rejects: " + dom.status().message());
  }
  if (!fast.ok()) {
    if (fast.status().code() != dom.status().code() ||
        fast.status().message() != dom.status().message()) {
      return "errors differ: " + fast.status().message() + " | " + dom.status().message();
    }
    return "";
  }
  return SameRequest(*fast, *dom) ? "" : "requests differ";
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_QUERY_JSON_DIFF_H_
