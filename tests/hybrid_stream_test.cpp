// Hybrid models and stream reasons: KV-cache groups in queries (`group` / `group_idx`), sparse
// groups (block_offsets) in the index, and the --explain reasons the index alone cannot give
// (group, eagle-bigram, silent-publisher). Expected answers are worked out by hand (block size 4).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/core/block_hash.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/match_explain.h"
#include "kvindex/query/query_json.h"
#include "prefix_index_builders.h"

namespace kvindex {
namespace {

using test::Batch;
using test::Stored;

SourceConfig Source(std::string name, std::string format = "vllm") {
  SourceConfig c;
  c.name = std::move(name);
  c.format = std::move(format);
  c.model = "m";
  c.block_size = 4;
  return c;
}

BlockStored InGroup(BlockStored e, uint32_t group) {
  e.scope.group = group;
  e.scope.block_size = 4;
  return e;
}

uint64_t Longest(const PrefixIndex& index, const std::string& body, const std::string& instance) {
  Result<QueryRequest> request = ParseQueryRequest(body);
  REQUIRE_MESSAGE(request.ok(), request.status().ToString());
  Result<PrefixMatch> match = MatchRequest(index, *request);
  REQUIRE(match.ok());
  const InstanceMatch* m = match->Find(instance);
  return m == nullptr ? 0 : m->longest_matched;
}

std::map<std::string, std::string> Reasons(const PrefixIndex& index,
                                           const std::vector<SourceConfig>& sources,
                                           const std::string& body,
                                           const ExplainContext& context = {}) {
  Result<QueryRequest> request = ParseQueryRequest(body);
  REQUIRE(request.ok());
  Result<PrefixMatch> match = MatchRequest(index, *request);
  REQUIRE(match.ok());
  Result<std::vector<MatchExplanation>> why =
      ExplainMatch(index, *request, *match, sources, context);
  REQUIRE(why.ok());
  std::map<std::string, std::string> out;
  for (const MatchExplanation& e : *why) {
    CHECK(!e.detail.empty());
    out[e.instance] = e.reason;
  }
  return out;
}

using ReasonMap = std::map<std::string, std::string>;

TEST_CASE("A query names its KV-cache group; a miss in another group is explained") {
  PrefixIndex index;
  const std::vector<SourceConfig> sources = {Source("hybrid")};
  const SourceId id = *index.AddSource(sources[0]);
  // Group 0 (full attention) holds [1..4][5..8]; group 1 holds only [1..4] under other hashes.
  REQUIRE(index.Apply(id, Batch({InGroup(Stored({11, 12}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8}), 0),
                                 InGroup(Stored({21}, std::nullopt, {1, 2, 3, 4}), 1)}))
              .ok());
  const std::string prompt = R"("model": "m", "token_ids": [1,2,3,4,5,6,7,8])";
  CHECK(Longest(index, "{" + prompt + "}", "hybrid") == 8);
  CHECK(Longest(index, "{" + prompt + R"(, "group": 1})", "hybrid") == 4);
  CHECK(Longest(index, "{" + prompt + R"(, "group_idx": 1})", "hybrid") == 4);
  CHECK(Longest(index, "{" + prompt + R"(, "group": 0})", "hybrid") == 8);
  // Group 2 holds nothing; group 1 alone holds [9..12].
  REQUIRE(index.Apply(id, Batch({InGroup(Stored({31}, std::nullopt, {9, 10, 11, 12}), 1)})).ok());
  CHECK(Reasons(index, sources, R"({"model": "m", "token_ids": [9,10,11,12]})") ==
        ReasonMap{{"hybrid", "group"}});
  CHECK(Reasons(index, sources, R"({"model": "m", "token_ids": [9,10,11,12], "group": 1})").empty());
  // A bad group is a usage error of the body.
  CHECK_FALSE(ParseQueryRequest(R"({"model": "m", "token_ids": [1], "group": -1})").ok());
  CHECK_FALSE(ParseQueryRequest(R"({"model": "m", "token_ids": [1], "group": "x"})").ok());
  // A reused request forgets the group of the body before (and a bad group before it).
  QueryRequest reused;
  REQUIRE(ParseQueryRequest(R"({"model": "m", "token_ids": [1], "group": 3})", reused).ok());
  CHECK(reused.match.group == 3);
  CHECK_FALSE(ParseQueryRequest(R"({"model": "m", "token_ids": [1], "group": -1})", reused).ok());
  REQUIRE(ParseQueryRequest(R"({"model": "m", "token_ids": [1]})", reused).ok());
  CHECK(reused.match.group == 0);
}

TEST_CASE("A sparse group's event: every chunk extends the chain, only the offsets are blocks") {
  PrefixIndex index;
  const SourceId id = *index.AddSource(Source("mamba"));
  // Three chunks [1..4][5..8][9..12]; the engine hashed chunks 1 and 2 only.
  BlockStored sparse = InGroup(Stored({41, 42}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), 0);
  sparse.block_offsets = {1, 2};
  REQUIRE(index.Apply(id, Batch({sparse})).ok());
  // The first chunk is not held: the prompt matches nothing from the root.
  CHECK(Longest(index, R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8]})", "mamba") == 0);
  // Chunks 1 and 2 are keyed by the prefix hashes of the whole chain (hand: the chain of the
  // three blocks, the second and third of which are held).
  std::vector<PrefixHash> chain =
      ChainPrefixHashes(std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4);
  REQUIRE(chain.size() == 3);
  const std::string by_hash = R"({"model": "m", "seq_hashes": [)" + std::to_string(chain[1].value) +
                              "," + std::to_string(chain[2].value) + "]}";
  CHECK(Longest(index, by_hash, "mamba") == 8);
  // A child continues from the last hashed chunk.
  REQUIRE(index.Apply(id, Batch({InGroup(Stored({43}, 42, {13, 14, 15, 16}), 0)})).ok());
  chain = ChainPrefixHashes(
      std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 4);
  const std::string child = R"({"model": "m", "seq_hashes": [)" + std::to_string(chain[3].value) + "]}";
  CHECK(Longest(index, child, "mamba") == 4);
  // Offsets that do not end at the last chunk cannot continue a chain: rejected whole.
  BlockStored open = InGroup(Stored({51}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8}), 0);
  open.block_offsets = {0};
  Result<ApplyResult> r = index.Apply(id, Batch({open}));
  REQUIRE(r.ok());
  CHECK(r->rejected == 1);
}

TEST_CASE("--explain names a silent publisher and an EAGLE stream configured plain") {
  PrefixIndex index;
  const std::vector<SourceConfig> sources = {Source("quiet"), Source("eagle", "sglang"),
                                             Source("loud")};
  for (const SourceConfig& c : sources) REQUIRE(index.AddSource(c).ok());
  const int64_t s = 1'000'000'000;
  ExplainContext context;
  context.now_ns = 1000 * s;
  context.silent_after_ns = 30 * s;
  // quiet: listened to since t=900 s, never a message; eagle: bigram pairs on a plain source;
  // loud: a message 1 s ago.
  context.sources = {
      {.instance = "quiet", .name = "quiet", .format = "vllm", .subscribed = true,
       .last_message_ns = 0, .watched_since_ns = 900 * s},
      {.instance = "eagle", .name = "eagle", .format = "sglang", .subscribed = true,
       .last_message_ns = 999 * s, .watched_since_ns = 900 * s, .bigram_events = 3,
       .token_form_mismatches = 3},
      {.instance = "loud", .name = "loud", .format = "vllm", .subscribed = true,
       .last_message_ns = 999 * s, .watched_since_ns = 900 * s}};
  const std::string body = R"({"model": "m", "token_ids": [1,2,3,4]})";
  // The configured sources list every instance in the scope, so nothing is unknown-scope.
  CHECK(Reasons(index, sources, body, context) ==
        ReasonMap{{"eagle", "eagle-bigram"}, {"loud", "first-block-absent"},
                  {"quiet", "silent-publisher"}});
  // The same once two of them hold blocks of the scope (not the prompt's).
  const SourceId eagle = SourceId{1}, loud = SourceId{2};
  REQUIRE(index.Apply(eagle, Batch({Stored({1}, std::nullopt, {9, 9, 9, 9})})).ok());
  REQUIRE(index.Apply(loud, Batch({Stored({2}, std::nullopt, {9, 9, 9, 9})})).ok());
  CHECK(Reasons(index, sources, body, context) ==
        ReasonMap{{"eagle", "eagle-bigram"}, {"loud", "first-block-absent"},
                  {"quiet", "silent-publisher"}});
  // Engine hashes asked of a bigram stream are named even when it is configured right.
  context.sources[1].format = "sglang-eagle";
  context.sources[1].token_form_mismatches = 0;
  CHECK(Reasons(index, sources, R"({"model": "m", "block_hash": [77]})", context).at("eagle") ==
        "eagle-bigram");
  CHECK(Reasons(index, sources, body, context).at("eagle") == "first-block-absent");
  // A message 40 s ago is silent too; one 10 s ago is not.
  context.sources[0].last_message_ns = 960 * s;
  CHECK(Reasons(index, sources, body, context).at("quiet") == "silent-publisher");
  context.sources[0].last_message_ns = 990 * s;
  CHECK(Reasons(index, sources, body, context).at("quiet") == "first-block-absent");
  // Stale by its trust state (subscribe --stale-after below 10 s): silent.
  context.sources[0].stale = true;
  CHECK(Reasons(index, sources, body, context).at("quiet") == "silent-publisher");
  context.sources[0].stale = false;
  // Not subscribed (offline): never silent.
  context.sources[0].last_message_ns = 0;
  for (ExplainSource& src : context.sources) src.subscribed = false;
  CHECK(Reasons(index, sources, body, context).at("quiet") == "first-block-absent");
}

}  // namespace
}  // namespace kvindex
