// Fuzz target for the HTTP/query body parsers: any bytes give a request or a one-line error,
// never a crash or an exception; a parsed request respects the limits; and ParseQueryRequest
// agrees with the independent nlohmann DOM reference of tests/query_json_diff.h: both accept with
// equal requests or both reject with the same message; and the forms that parse into a reused
// request answer as the fresh ones.
#include <cstdlib>
#include <string_view>

#include "kvindex/query/query_json.h"
#include "query_json_diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // One request per form kept across inputs: the reusing parse must answer as a fresh one.
  static kvindex::QueryRequest reused[2];
  for (bool cache : {false, true}) {
    auto r = cache ? kvindex::ParseCacheRequest(body) : kvindex::ParseQueryRequest(body);
    kvindex::QueryRequest& again = reused[cache ? 1 : 0];
    const kvindex::Status status = cache ? kvindex::ParseCacheRequest(body, again)
                                         : kvindex::ParseQueryRequest(body, again);
    if (status.ok() != r.ok()) std::abort();
    if (!r.ok() && status.message() != r.status().message()) std::abort();
    if (r.ok() && !kvindex::test::SameRequest(again, *r)) std::abort();
    if (r.ok()) {
      if (r->tokens.size() > kvindex::kMaxQueryTokens) std::abort();
      if (r->match.block_size && *r->match.block_size == 0) std::abort();
      if (r->match.tenant.empty()) std::abort();
    } else if (r.status().message().empty() ||
               r.status().message().find('\n') != std::string::npos) {
      std::abort();
    }
  }
  if (!kvindex::test::ParseDifference(body).empty()) std::abort();
  return 0;
}
