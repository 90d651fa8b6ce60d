// Fuzz target for the HTTP/query body parsers: any bytes give a request or a one-line error,
// never a crash or an exception; a parsed request respects the limits; and ParseQueryRequest
// agrees with the independent nlohmann DOM reference of tests/query_json_diff.h: both accept with
// equal requests or both reject with the same message.
#include <cstdlib>
#include <string_view>

#include "kvindex/query/query_json.h"
#include "query_json_diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool cache : {false, true}) {
    auto r = cache ? kvindex::ParseCacheRequest(body) : kvindex::ParseQueryRequest(body);
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
