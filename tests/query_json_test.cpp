#include "kvindex/query/query_json.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace kvindex {
namespace {

using nlohmann::json;

TEST_SUITE("query_json") {

TEST_CASE("A /query body parses with every optional field") {
  auto r = ParseQueryRequest(R"({"model": "qwen", "token_ids": [1, 2, 4294967295],
      "lora_name": "a", "tenant_id": 42, "cache_salt": "s", "instance_id": "vllm-0",
      "instances": ["vllm-1"], "block_size": 16, "unknown_key": {"ignored": true}})");
  REQUIRE(r.ok());
  CHECK(r->kind == QueryKind::kTokens);
  CHECK(r->match.model == "qwen");
  CHECK(r->tokens == std::vector<TokenId>{1, 2, 4294967295u});
  CHECK(r->match.lora == "a");
  CHECK(r->match.tenant == "42");
  CHECK(r->match.salt == "s");
  CHECK(r->match.block_size == 16);
  CHECK(r->match.instances == std::vector<std::string>{"vllm-0", "vllm-1"});
}

TEST_CASE("Defaults: tenant 'default', no LoRA, no salt, the instance's own block size") {
  auto r = ParseQueryRequest(R"({"model": "m", "token_ids": [], "tenant_id": null, "lora_id": -1})");
  REQUIRE(r.ok());
  CHECK(r->match.tenant == "default");
  CHECK(r->match.lora.empty());
  CHECK(r->match.salt.empty());
  CHECK_FALSE(r->match.block_size.has_value());
  auto id = ParseQueryRequest(R"({"model": "m", "token_ids": [1], "lora_id": 3, "cache_salt": 7})");
  REQUIRE(id.ok());
  CHECK(id->match.lora == "id:3");
  CHECK(id->match.salt == "7");
}

TEST_CASE("/query_by_hash takes engine hashes or prefix hashes, signed or as strings") {
  auto engine = ParseQueryRequest(R"({"model": "m", "block_hash": [1, -1, "0xff", "18446744073709551615"]})");
  REQUIRE(engine.ok());
  CHECK(engine->kind == QueryKind::kEngineHashes);
  REQUIRE(engine->engine_hashes.size() == 4);
  CHECK(engine->engine_hashes[1] == EngineHash{~uint64_t{0}});
  CHECK(engine->engine_hashes[2] == EngineHash{255});
  CHECK(engine->engine_hashes[3] == EngineHash{~uint64_t{0}});
  auto prefix = ParseQueryRequest(R"({"model": "m", "seq_hashes": [18446744073709551615]})");
  REQUIRE(prefix.ok());
  CHECK(prefix->kind == QueryKind::kPrefixHashes);
  CHECK(prefix->prefix_hashes[0] == PrefixHash{~uint64_t{0}});
}

TEST_CASE("Bad bodies are 400s with one line naming the field") {
  struct Case {
    const char* body;
    const char* says;
  };
  const Case cases[] = {
      {"", "invalid JSON"},
      {"{", "invalid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"token_ids": [1]})", "model: missing"},
      {R"({"model": 5, "token_ids": [1]})", "model: expected a string"},
      {R"({"model": "m"})", "exactly one of"},
      {R"({"model": "m", "token_ids": [1], "seq_hashes": [1]})", "exactly one of"},
      {R"({"model": "m", "token_ids": "1,2"})", "token_ids: expected an array"},
      {R"({"model": "m", "token_ids": [1, -1]})", "token_ids[1]"},
      {R"({"model": "m", "token_ids": [4294967296]})", "token_ids[0]"},
      {R"({"model": "m", "token_ids": [1.5]})", "token_ids[0]"},
      {R"({"model": "m", "token_ids": [1], "block_size": 0})", "block_size"},
      {R"({"model": "m", "token_ids": [1], "block_size": -16})", "block_size"},
      {R"({"model": "m", "token_ids": [1], "lora_name": "a", "lora_id": 2})", "mutually exclusive"},
      {R"({"model": "m", "token_ids": [1], "tenant_id": [1]})", "tenant_id"},
      {R"({"model": "m", "block_hash": ["zz"]})", "block_hash[0]"},
      {R"({"model": "m", "token_ids": [1], "instances": [1]})", "instances"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.body);
    auto r = ParseQueryRequest(c.body);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("Token ids of every length parse, at every distance from the end of the body") {
  // Ids of 1 to 10 digits, with and without spaces, at every distance from the end of the body
  // (where a parser that reads several bytes at once must stop early).
  const std::vector<TokenId> ids = {0,       7,        42,        999,        1000,
                                    65535,   100000,   1234567,   9999999,    12345678,
                                    99999999, 123456789, 4000000000u, 4294967295u, 10};
  for (size_t shift = 0; shift < 10; ++shift) {
    for (const char* sep : {",", ", ", " ,\n"}) {
      std::string body = R"({"model": "m", "token_ids": [)";
      std::vector<TokenId> expect;
      for (size_t k = 0; k < ids.size(); ++k) {
        const TokenId id = ids[(k + shift) % ids.size()];
        if (k > 0) body += sep;
        body += std::to_string(id);
        expect.push_back(id);
      }
      body += "]" + std::string(shift % 3, ' ') + "}";
      CAPTURE(body);
      auto r = ParseQueryRequest(body);
      REQUIRE(r.ok());
      CHECK(r->tokens == expect);
    }
  }
  for (const char* bad : {"[01, 1, 1, 1, 1]", "[1, 00, 1, 1, 1]", "[1234567.5, 1, 1]",
                          "[1234567e3, 1, 1]", "[1, 12345678901, 1]", "[4294967296, 1, 1, 1]",
                          "[1, 2, 3, 1234567-]", "[0001234, 5, 6, 7]"}) {
    const std::string body = std::string(R"({"model": "m", "token_ids": )") + bad + "}";
    CAPTURE(body);
    CHECK_FALSE(ParseQueryRequest(body).ok());
  }
}

TEST_CASE("Limits: more than 1 M token ids is a 400, a body over 16 MiB a 413") {
  std::string many = R"({"model": "m", "token_ids": [)";
  for (size_t i = 0; i <= kMaxQueryTokens; ++i) many += i == 0 ? "1" : ",1";
  many += "]}";
  auto r = ParseQueryRequest(many);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  std::string huge(kMaxQueryBodyBytes + 1, ' ');
  auto h = ParseQueryRequest(huge);
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().code() == StatusCode::kLimitExceeded);
}

TEST_CASE("The upstream proxy's /cache body parses") {
  auto r = ParseCacheRequest(
      R"({"instances": ["10.0.0.1:8000", "vllm-1"], "token_ids": [5, 6], "model_name": "q", "lora_id": -1})");
  REQUIRE(r.ok());
  CHECK(r->match.model == "q");
  CHECK(r->match.instances.size() == 2);
  CHECK(r->tokens.size() == 2);
  CHECK_FALSE(ParseCacheRequest(R"({"instances": [], "model_name": "q"})").ok());
}

TEST_CASE("Answers render in the /query shape, with the data wrapper unless conductor compat") {
  PrefixMatch match;
  InstanceMatch a;
  a.instance = "vllm-0";
  a.longest_matched = 6;
  a.gpu = 4;
  a.cpu = 4;
  a.disk = 4;
  a.dp = {{0, 4}, {1, 2}};
  InstanceMatch b;
  b.instance = "vllm-1";
  b.other_tiers = {{"HBM3", 2}};
  match.instances = {a, b};
  const json expected = json::parse(R"({"data": {"default": {
      "vllm-0": {"longest_matched": 6, "GPU": 4, "CPU": 4, "DISK": 4, "DP": {"0": 4, "1": 2}},
      "vllm-1": {"longest_matched": 0, "GPU": 0, "CPU": 0, "DISK": 0, "HBM3": 2, "DP": {}}}}})");
  CHECK(json::parse(RenderQueryAnswer(match, "default")) == expected);
  CHECK(json::parse(RenderQueryAnswer(match, "default", true)) == expected["data"]);
  CHECK(json::parse(RenderQueryAnswer(PrefixMatch{}, "default")) == json::parse(R"({"data": {}})"));
  CHECK(json::parse(RenderCacheAnswer(match)) ==
        json::parse(R"({"HitStatus": {"vllm-0": 6, "vllm-1": 0}})"));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
