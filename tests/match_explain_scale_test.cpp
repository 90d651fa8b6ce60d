// ExplainMatch over many sources: 2,000 instances, each with a source of its own, explained in
// one call. The explainer looks each instance's sources up once instead of scanning all of them
// per instance; the expected reason and detail of every instance are worked out by hand from
// the source definitions below, so a lookup that mixes instances up fails.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/match_explain.h"
#include "kvindex/query/query_json.h"

#include "prefix_index_builders.h"

namespace kvindex {
namespace {

using test::Batch;
using test::Stored;

constexpr int kSources = 2000;

// Even instances serve model "m" under their own configured salt "s<i>"; odd ones model
// "other<i>". Each stores the prompt [1..8] (block size 4).
SourceConfig Source(int i) {
  SourceConfig c;
  c.name = "inst-" + std::to_string(i);
  c.format = "vllm";
  c.model = i % 2 == 0 ? "m" : "other" + std::to_string(i);
  c.block_size = 4;
  if (i % 2 == 0) c.salt = "s" + std::to_string(i);
  return c;
}

TEST_CASE("ExplainMatch: 2,000 sources, each instance explained from its own source") {
  PrefixIndex index;
  std::vector<SourceConfig> sources;
  for (int i = 0; i < kSources; ++i) {
    sources.push_back(Source(i));
    const SourceId id = *index.AddSource(sources.back());
    REQUIRE(
        index.Apply(id, Batch({Stored({11, 12}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8})})).ok());
  }
  Result<QueryRequest> request =
      ParseQueryRequest(R"({"model": "m", "token_ids": [1, 2, 3, 4, 5, 6, 7, 8]})");
  REQUIRE(request.ok());
  Result<PrefixMatch> match = MatchRequest(index, *request);
  REQUIRE(match.ok());
  Result<std::vector<MatchExplanation>> why = ExplainMatch(index, *request, *match, sources);
  REQUIRE(why.ok());
  REQUIRE(why->size() == static_cast<size_t>(kSources));  // no salt given: nobody matches
  int salted = 0, other = 0;
  for (const MatchExplanation& e : *why) {
    const int i = std::stoi(e.instance.substr(5));
    INFO(e.instance, ": ", e.reason, ": ", e.detail);
    if (i % 2 == 0) {
      ++salted;
      CHECK(e.reason == "salt");
      // Its own configured salt, found first among the candidates, matches both blocks.
      CHECK(e.detail.find("with cache_salt 's" + std::to_string(i) +
                          "' (the instance's source configures it) the prompt matches 8 tokens") !=
            std::string::npos);
    } else {
      ++other;
      CHECK(e.reason == "unknown-scope");
      CHECK(e.detail.find("(its sources are configured for model 'other" + std::to_string(i) +
                          "' tenant 'default')") != std::string::npos);
    }
  }
  CHECK(salted == kSources / 2);
  CHECK(other == kSources / 2);
}

}  // namespace
}  // namespace kvindex
