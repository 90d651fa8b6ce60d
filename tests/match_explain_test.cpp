// ExplainMatch: one case per reason, on a hand-built index (block size 4). Expected reasons are
// worked out by hand from the sources and events below.
#include <map>
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

SourceConfig Source(std::string name, std::string lora = "", std::string salt = "") {
  SourceConfig c;
  c.name = std::move(name);
  c.format = "vllm";
  c.model = "m";
  c.block_size = 4;
  c.lora = std::move(lora);
  c.salt = std::move(salt);
  return c;
}

// plain: [1..4][5..8]; adapted: the same prompt under its configured LoRA "L"; salted: under its
// configured salt "s".
struct Fixture {
  PrefixIndex index;
  std::vector<SourceConfig> sources = {Source("plain"), Source("adapted", "L"),
                                       Source("salted", "", "s")};
  Fixture() {
    for (const SourceConfig& c : sources) {
      const SourceId id = *index.AddSource(c);
      REQUIRE(index.Apply(id, Batch({Stored({11, 12}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8})})).ok());
    }
  }
  // reason per instance for `request` (JSON body).
  std::map<std::string, std::string> Reasons(const std::string& body) {
    Result<QueryRequest> request = ParseQueryRequest(body);
    REQUIRE(request.ok());
    Result<PrefixMatch> match = MatchRequest(index, *request);
    REQUIRE(match.ok());
    Result<std::vector<MatchExplanation>> why = ExplainMatch(index, *request, *match, sources);
    REQUIRE(why.ok());
    std::map<std::string, std::string> out;
    for (const MatchExplanation& e : *why) {
      CHECK(!e.detail.empty());
      CHECK(e.detail.find('\n') == std::string::npos);
      out[e.instance] = e.reason;
    }
    return out;
  }
};

using Reasons = std::map<std::string, std::string>;

TEST_CASE("ExplainMatch: configured LoRA and salt, and a matching instance is not explained") {
  Fixture f;
  // plain matches; adapted's blocks are under LoRA L; salted's under salt s.
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8]})") ==
        Reasons{{"adapted", "lora"}, {"salted", "salt"}});
  // With the LoRA: plain matches without it; salted needs its salt and no LoRA (both differ: the
  // salt is named first); adapted matches.
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [1,2,3,4], "lora_name": "L"})") ==
        Reasons{{"plain", "lora"}, {"salted", "salt"}});
  // With the salt: plain matches without it; adapted needs no salt and its LoRA (salt first).
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [1,2,3,4], "cache_salt": "s"})") ==
        Reasons{{"adapted", "salt"}, {"plain", "salt"}});
}

TEST_CASE("ExplainMatch: scope, block size, short prompt, first block, unknown instance") {
  Fixture f;
  CHECK(f.Reasons(R"({"model": "x", "token_ids": [1,2,3,4]})") ==
        Reasons{{"adapted", "unknown-scope"}, {"plain", "unknown-scope"}, {"salted", "unknown-scope"}});
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8], "block_size": 8,
                      "instance_id": "plain"})") == Reasons{{"plain", "block-size"}});
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [1,2,3], "instance_id": "plain"})") ==
        Reasons{{"plain", "short-prompt"}});
  CHECK(f.Reasons(R"({"model": "m", "token_ids": [9,9,9,9], "instance_id": "plain"})") ==
        Reasons{{"plain", "first-block-absent"}});
  CHECK(f.Reasons(R"({"model": "m", "block_hash": [99], "instance_id": "plain"})") ==
        Reasons{{"plain", "first-block-absent"}});
  CHECK(f.Reasons(R"({"model": "m", "block_hash": [11], "instances": ["plain", "nope"]})") ==
        Reasons{{"nope", "unknown-instance"}});
  CHECK(RenderExplanations({{"a", "lora", "d"}}) == R"({"a":{"detail":"d","reason":"lora"}})");
}

TEST_CASE("ParseQueryRequest: explain must be a boolean") {
  CHECK(ParseQueryRequest(R"({"model": "m", "token_ids": [], "explain": true})")->explain);
  CHECK(!ParseQueryRequest(R"({"model": "m", "token_ids": []})")->explain);
  CHECK(ParseQueryRequest(R"({"model": "m", "token_ids": [], "explain": 1})").status().code() ==
        StatusCode::kInvalidArgument);
}


TEST_CASE("ExplainMatch: a salt or LoRA only the stored events carry is named") {
  // No source configures a salt or a LoRA: "evsalt"'s event carries a per-request cache_salt
  // "r1", "evlora"'s a LoRA name "A" (hand-built; before the index's scopes were consulted both
  // were reported first-block-absent).
  PrefixIndex index;
  std::vector<SourceConfig> sources = {Source("evsalt"), Source("evlora")};
  BlockStored salted = Stored({11, 12}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8});
  salted.scope.salt = "r1";
  BlockStored adapted = Stored({21, 22}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8});
  adapted.scope.lora_name = "A";
  REQUIRE(index.Apply(*index.AddSource(sources[0]), Batch({salted})).ok());
  REQUIRE(index.Apply(*index.AddSource(sources[1]), Batch({adapted})).ok());
  Result<QueryRequest> request = ParseQueryRequest(R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8]})");
  REQUIRE(request.ok());
  Result<PrefixMatch> match = MatchRequest(index, *request);
  REQUIRE(match.ok());
  Result<std::vector<MatchExplanation>> why = ExplainMatch(index, *request, *match, sources);
  REQUIRE(why.ok());
  REQUIRE(why->size() == 2);
  CHECK((*why)[0].instance == "evlora");
  CHECK((*why)[0].reason == "lora");
  CHECK((*why)[0].detail.find("with LoRA 'A' (stored events carry it) the prompt matches 8 tokens") !=
        std::string::npos);
  CHECK((*why)[1].instance == "evsalt");
  CHECK((*why)[1].reason == "salt");
  CHECK((*why)[1].detail.find("with cache_salt 'r1' (stored events carry it) the prompt matches 8 tokens") !=
        std::string::npos);
  // PrefixIndex::scopes(): both interned scopes, first seen first.
  const std::vector<Scope> scopes = index.scopes();
  REQUIRE(scopes.size() == 2);
  CHECK(scopes[0].salt == "r1");
  CHECK(scopes[0].lora.empty());
  CHECK(scopes[1].lora == "A");
  CHECK(scopes[1].block_size == 4);
}

}  // namespace
}  // namespace kvindex
