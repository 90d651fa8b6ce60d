// Differential tests of the query JSON (query_json.h): ParseQueryRequest (the JSON library's
// reader) against an independent nlohmann_json DOM reference kept in the tests
// (query_json_diff.h), and RenderQueryAnswer's direct writer against RenderQueryAnswerWithDom, on
// a table of edge cases, on random bodies from a grammar that mixes valid and invalid pieces, and
// on mutations of both. Equal means: both accept with equal requests, or both reject with the
// same status code and message (an "invalid JSON" message may name another byte); answers
// byte-identical.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/query/query_json.h"
#include "query_json_diff.h"

namespace kvindex {
namespace {

using test::ParseDifference;

class BodyGen {
 public:
  explicit BodyGen(uint64_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool Chance(int percent) { return Pick(100) < static_cast<size_t>(percent); }

  std::string Ws() {
    static const char* kWs[] = {"", "", "", " ", "\n", " \t\r\n "};
    return kWs[Pick(6)];
  }
  std::string Int() {
    static const char* kInts[] = {
        "0", "1", "7", "16", "151935", "4294967295", "4294967296", "18446744073709551615",
        "18446744073709551616", "99999999999999999999999", "-1", "-0", "-16",
        "-9223372036854775808", "-9223372036854775809", "9223372036854775807",
        "9223372036854775808", "01", "1.5", "1e3", "1E2", "-", "2.0", "00", "-01", "0.0"};
    if (Chance(50)) return std::to_string(rng_() % (Chance(50) ? 200000 : 5000000000ull));
    return kInts[Pick(sizeof(kInts) / sizeof(kInts[0]))];
  }
  std::string Str() {
    static const char* kStrings[] = {
        R"("m")", R"("")", R"("qwen")", R"("a\"b")", R"("\u0041")", "\"caf\xc3\xa9\"",
        "\"bad\xff\"", R"("0x1f")", R"("0x")", R"("0XFFFFFFFFFFFFFFFF")", R"("123")", R"("-5")",
        R"("18446744073709551616")", "\"ctl\x01\"", R"("tab\t")", R"("vllm-0")", R"(" 12")",
        R"("0x1g")", R"("+7")", "\"unterminated"};
    return kStrings[Pick(sizeof(kStrings) / sizeof(kStrings[0]))];
  }
  std::string Scalar() {
    switch (Pick(6)) {
      case 0: return Int();
      case 1: return Str();
      case 2: return "true";
      case 3: return "false";
      case 4: return "null";
      default: return Chance(50) ? "nul" : "tru";
    }
  }
  std::string Array(int depth, bool ints, bool strings) {
    std::string s = "[" + Ws();
    const size_t n = Chance(20) ? 0 : Pick(40);
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) s += Ws() + "," + Ws();
      if (ints && (!strings || Chance(60)) && !Chance(3)) {
        s += Chance(90) ? std::to_string(rng_() % 151936) : Int();
      } else if (strings && !Chance(3)) {
        s += Str();
      } else {
        s += Value(depth + 1);
      }
    }
    if (Chance(3)) s += ",";
    return s + Ws() + (Chance(2) ? "" : "]");
  }
  std::string Value(int depth) {
    if (depth > 3) return Scalar();
    switch (Pick(8)) {
      case 0: return Array(depth, true, false);
      case 1: return Array(depth, false, true);
      case 2: return Object(depth + 1, false);
      default: return Scalar();
    }
  }
  std::string ValueFor(const std::string& key) {
    if (Chance(10)) return Value(1);
    if (Chance(5)) return "null";
    if (key == "\"token_ids\"") return Array(1, true, false);
    if (key == "\"block_hash\"" || key == "\"seq_hashes\"") return Array(1, true, true);
    if (key == "\"instances\"") return Chance(30) ? Str() : Array(1, false, true);
    if (key == "\"explain\"") return Chance(50) ? "true" : "false";
    if (key == "\"block_size\"" || key == "\"lora_id\"") return Int();
    if (key == "\"tenant_id\"" || key == "\"cache_salt\"") return Chance(50) ? Int() : Str();
    return Str();
  }
  std::string Object(int depth, bool request) {
    static const char* kKeys[] = {
        "\"model\"", "\"token_ids\"", "\"block_hash\"", "\"seq_hashes\"", "\"lora_name\"",
        "\"lora_id\"", "\"tenant_id\"", "\"cache_salt\"", "\"block_size\"", "\"instance_id\"",
        "\"instances\"", "\"explain\"", "\"other\"", "\"mod\\u0065l\"", "\"\"", "\"model_name\""};
    std::string s = "{" + Ws();
    std::vector<std::string> keys;
    if (request) {
      keys.push_back("\"model\"");
      keys.push_back(Chance(70)   ? "\"token_ids\""
                     : Chance(50) ? "\"block_hash\""
                                  : "\"seq_hashes\"");
    }
    const size_t extra = Pick(request ? 5 : 3);
    for (size_t i = 0; i < extra; ++i) {
      keys.push_back(kKeys[Pick(sizeof(kKeys) / sizeof(kKeys[0]))]);
    }
    std::shuffle(keys.begin(), keys.end(), rng_);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i > 0) s += Ws() + "," + Ws();
      s += keys[i] + Ws() + ":" + Ws() + (depth > 0 ? Value(depth) : ValueFor(keys[i]));
    }
    return s + Ws() + "}";
  }
  std::string Body() {
    std::string s = Ws() + Object(0, true) + Ws();
    if (Chance(2)) s = "\xEF\xBB\xBF" + s;
    if (Chance(2)) s += Chance(50) ? std::string(1, '\0') + "x" : "x";
    return s;
  }
  std::string Mutate(std::string s) {
    static const char kBytes[] = "{}[],:\"0123456789-.eE \\ntfux\x80\xff";
    const size_t n = 1 + Pick(4);
    for (size_t i = 0; i < n; ++i) {
      const size_t at = s.empty() ? 0 : Pick(s.size() + 1);
      switch (Pick(5)) {
        case 0:
          if (at < s.size()) s[at] = kBytes[Pick(sizeof(kBytes) - 1)];
          break;
        case 1: s.insert(at, 1, kBytes[Pick(sizeof(kBytes) - 1)]); break;
        case 2:
          if (at < s.size()) s.erase(at, 1 + Pick(4));
          break;
        case 3: s.resize(at); break;
        default:
          if (at < s.size()) s.insert(Pick(s.size() + 1), s.substr(at, 1 + Pick(16)));
      }
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

TEST_SUITE("query_json_diff") {

TEST_CASE("Edge cases: the parser and the DOM reference agree") {
  const std::vector<std::string> bodies = {
      R"({"model":"m","token_ids":[1,2,3]})",
      R"( {"model" : "m" , "token_ids" : [ 1 , 2 ] } )",
      "\t{\"model\":\"m\",\r\n\"token_ids\":[]}\n",
      R"({"model":"m","token_ids":[4294967295]})",
      R"({"model":"m","token_ids":[4294967296]})",
      R"({"model":"m","token_ids":[-1]})",
      R"({"model":"m","token_ids":[-0]})",
      R"({"model":"m","token_ids":[0]})",
      R"({"model":"m","token_ids":[01]})",
      R"({"model":"m","token_ids":[1.0]})",
      R"({"model":"m","token_ids":[1e2]})",
      R"({"model":"m","token_ids":[1,]})",
      R"({"model":"m","token_ids":[,1]})",
      R"({"model":"m","token_ids":["1"]})",
      R"({"model":"m","token_ids":[1]} x)",
      std::string("{\"model\":\"m\",\"token_ids\":[1]}\0x", 31),  // a NUL, then garbage
      "\xEF\xBB\xBF{\"model\":\"m\",\"token_ids\":[1]}",
      R"({"model":"m","token_ids":[1],"model":"n"})",
      R"({"model":"m","token_ids":[1],"token_ids":[2]})",
      R"({"model":"m","token_ids":null,"token_ids":[2]})",
      R"({"model":"m","token_ids":[1],"block_hash":null})",
      R"({"model":"m","token_ids":[1],"block_hash":[1]})",
      R"({"model":"m"})",
      R"({"token_ids":[1]})",
      R"({"model":null,"token_ids":[1]})",
      R"({"model":5,"token_ids":[1]})",
      R"({"mod\u0065l":"m","token_ids":[1]})",
      R"({"model":"\u006d","token_ids":[1]})",
      "{\"model\":\"caf\xc3\xa9\",\"token_ids\":[1]}",
      "{\"model\":\"bad\xff\",\"token_ids\":[1]}",
      R"({"model":"m","block_hash":[1,-1,"0x1f","17",18446744073709551615,-9223372036854775808]})",
      R"({"model":"m","block_hash":[18446744073709551616]})",
      R"({"model":"m","block_hash":[-9223372036854775809]})",
      R"({"model":"m","seq_hashes":["0x"]})",
      R"({"model":"m","seq_hashes":["0XABCDEF","-1"]})",
      R"({"model":"m","seq_hashes":[1.5]})",
      R"({"model":"m","token_ids":[1],"lora_name":"a","lora_id":3})",
      R"({"model":"m","token_ids":[1],"lora_name":"a","lora_id":-1})",
      R"({"model":"m","token_ids":[1],"lora_name":"","lora_id":3})",
      R"({"model":"m","token_ids":[1],"lora_id":9223372036854775808})",
      R"({"model":"m","token_ids":[1],"lora_id":-9223372036854775808})",
      R"({"model":"m","token_ids":[1],"lora_id":1.0})",
      R"({"model":"m","token_ids":[1],"tenant_id":-0,"cache_salt":18446744073709551615})",
      R"({"model":"m","token_ids":[1],"tenant_id":"","cache_salt":-42})",
      R"({"model":"m","token_ids":[1],"tenant_id":true})",
      R"({"model":"m","token_ids":[1],"block_size":0})",
      R"({"model":"m","token_ids":[1],"block_size":4294967295})",
      R"({"model":"m","token_ids":[1],"block_size":4294967296})",
      R"({"model":"m","token_ids":[1],"block_size":-16})",
      R"({"model":"m","token_ids":[1],"block_size":18446744073709551615})",
      R"({"model":"m","token_ids":[1],"instance_id":"a","instances":["b","c"]})",
      R"({"model":"m","token_ids":[1],"instance_id":"","instances":"b"})",
      R"({"model":"m","token_ids":[1],"instances":[1]})",
      R"({"model":"m","token_ids":[1],"instances":[]})",
      R"({"model":"m","token_ids":[1],"explain":true})",
      R"({"model":"m","token_ids":[1],"explain":1})",
      R"({"model":"m","token_ids":[1],"x":{"y":[1,{"z":null}],"w":-3},"v":[]})",
      R"({"model":"m","token_ids":[1],"x":1.5})",
      R"({"model":"m","token_ids":[1],"x":"a\"b"})",
      R"({"model":"m","token_ids":[1],"x":tru})",
      R"({"model":"m","token_ids":[1],})",
      R"({"model":"m",,"token_ids":[1]})",
      R"({"model":"m" "token_ids":[1]})",
      R"([{"model":"m","token_ids":[1]}])",
      R"("model")",
      R"({})",
      "",
      "   ",
      "{",
      R"({"model":"m","token_ids":[1)",
      R"({"model":"m","token_ids":[1]}})",
      // Arrays of ids read straight from the text, and their look-alikes the parser decides.
      "{\"model\":\"m\",\"token_ids\":[ 1 ,2 ,\n3\t,\r\n4 ]}",
      R"({"model":"m","token_ids":[1, 2, 3]})",
      R"({"model":"m","token_ids":[ ]})",
      R"({"model":"m","token_ids":[12345678,123456789,1234567,4294967295,0,10]})",
      R"({"model":"m","token_ids":[1234567890123456789]})",
      R"({"model":"m","token_ids":[12345678901234567890]})",
      R"({"model":"m","token_ids":[123456789012345678901]})",
      R"({"model":"m","token_ids":[00000001]})",
      R"({"model":"m","token_ids":[10,010]})",
      R"({"model":"m","token_ids":[1 2]})",
      R"({"model":"m","token_ids":[1,,2]})",
      R"({"model":"m","token_ids":[1,2,]})",
      R"({"model":"m","token_ids":[1,-2]})",
      R"({"model":"m","token_ids":[1,2.5]})",
      R"({"model":"m","token_ids":[1,2e1]})",
      R"({"model":"m","token_ids":[1,2,"3"]})",
      R"({"model":"m","token_ids":[1,[2]]})",
      R"({"model":"m","token_ids":[1,null]})",
      R"({"model":"m","token_ids":[12345)",
      R"({"model":"m","token_ids":[12345678901)",
      R"({"model":"m","token_ids":[1,2])",
      R"({"model":"m","token_ids":[1,2]]})",
      R"({"model":"m","token_ids":[1]2})",
      R"({"token_ids":[1,2,3],"model":"m"})",
      R"({"token_ids":[1,2,3] , "model":"m","token_ids":[4]})",
      // Exponents beyond the parser's range: zero and underflow are numbers, overflow is not.
      "0e" + std::string(120, '9'),
      " -0e99999 ",
      "0e99999 5",
      "0" + std::string(100, '9'),
      R"({"model":"m","token_ids":[1],"x":0e99999999999999999999999})",
      R"({"model":"m","token_ids":[1],"x":1e-99999999999999999999})",
      R"({"model":"m","token_ids":[1],"x":[0e99999999999999999999999,1]})",
      R"({"model":"m","token_ids":[1],"x":1e99999999999999999999})",
      R"({"model":"m","token_ids":[1],"x":0e99999999999999999999999x})",
      R"({"model":"m","token_ids":[1,9453GGG]})",
      // The KV-cache group, under either name.
      R"({"model":"m","token_ids":[1],"group":1})",
      R"({"model":"m","token_ids":[1],"group_idx":4294967295})",
      R"({"model":"m","token_ids":[1],"group":4294967296})",
      R"({"model":"m","token_ids":[1],"group":-1})",
      R"({"model":"m","token_ids":[1],"group":1.0})",
      R"({"model":"m","token_ids":[1],"group":"1"})",
      R"({"model":"m","token_ids":[1],"group":null,"group_idx":2})",
      R"({"model":"m","token_ids":[1],"group":1,"group_idx":1})",
      R"({"model":"m","token_ids":[1],"group_idx":"a","group":2,"group_idx":null})",
      R"({"model":"m","block_hash":[1],"group_idx":"a"})",
  };
  for (const std::string& body : bodies) {
    INFO(body);
    CHECK(ParseDifference(body) == "");
  }
}

TEST_CASE("The parser answers the common bodies: all fields, exact values") {
  auto r = ParseQueryRequest(R"({"model":"qwen","token_ids":[0,4294967295],"lora_id":7,
      "tenant_id":-3,"cache_salt":18446744073709551615,"instance_id":"a","instances":["b"],
      "block_size":16,"explain":true,"extra":[{"k":[null,false]}]})");
  REQUIRE(r.ok());
  CHECK(r->tokens == std::vector<TokenId>{0, 4294967295u});
  CHECK(r->match.tenant == "-3");
  CHECK(r->match.salt == "18446744073709551615");
  CHECK(r->match.lora == LoraNameFrom("", 7));
  CHECK(r->match.instances == std::vector<std::string>{"a", "b"});
  CHECK(r->match.block_size == 16);
  CHECK(r->explain);
  auto h = ParseQueryRequest(R"({"model":"m","seq_hashes":[-1,"0x10","10"]})");
  REQUIRE(h.ok());
  CHECK(h->kind == QueryKind::kPrefixHashes);
  CHECK(h->prefix_hashes ==
        std::vector<PrefixHash>{PrefixHash{~uint64_t{0}}, PrefixHash{16}, PrefixHash{10}});
}

TEST_CASE("Random and mutated bodies: the parser and the DOM reference agree") {
  BodyGen gen(20261130);
  int accepted = 0;
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = gen.Body();
    if (i % 2 == 1) body = gen.Mutate(body);
    const std::string diff = ParseDifference(body);
    if (!diff.empty()) {
      INFO("body: " << body);
      FAIL(diff);
    }
    (test::reference::ReferenceParseQueryRequest(body).ok() ? accepted : rejected) += 1;
  }
  // Both sides of the language are exercised.
  CHECK(accepted > 1000);
  CHECK(rejected > 2000);
}

TEST_CASE("Rendering: the direct writer and the DOM writer give the same bytes") {
  std::mt19937_64 rng(7);
  const std::vector<std::string> names = {"vllm-0", "vllm-1", "vllm-10", "b", "B", "a\"b",
                                          "x\\y", "caf\xc3\xa9", "ctl\x01", "", "DP"};
  const std::vector<std::string> tenants = {"default", "42", "t\"", ""};
  for (int i = 0; i < 5000; ++i) {
    PrefixMatch match;
    const size_t n = rng() % 6;
    for (size_t k = 0; k < n; ++k) {
      InstanceMatch& m = match.instances.emplace_back();
      m.instance = names[rng() % (rng() % 4 == 0 ? names.size() : 3)];
      m.longest_matched = rng() % 4096;
      m.gpu = rng() % 2 ? m.longest_matched : 0;
      m.cpu = rng() % 4096;
      m.disk = rng() % 3 == 0 ? ~uint64_t{0} : 0;
      const size_t ranks = rng() % 7;
      for (size_t r = 0; r < ranks; ++r) {
        m.dp.push_back({static_cast<DpRank>(static_cast<int>(rng() % 13) - 1), rng() % 100});
      }
      if (rng() % 10 == 0) m.other_tiers.emplace_back(rng() % 2 ? "NVME" : "DP", 5);
    }
    const std::string& tenant = tenants[rng() % tenants.size()];
    // `reused` keeps the previous answer's bytes: the reusing form must replace them all.
    static std::string reused;
    for (bool compat : {false, true}) {
      const std::string dom = RenderQueryAnswerWithDom(match, tenant, compat);
      CHECK(RenderQueryAnswer(match, tenant, compat) == dom);
      RenderQueryAnswer(match, tenant, compat, nullptr, reused);
      CHECK(reused == dom);
    }
  }
  // The common case is written directly, byte for byte as the upstream conductor shape.
  PrefixMatch one;
  InstanceMatch& m = one.instances.emplace_back();
  m.instance = "vllm-0";
  m.longest_matched = 32;
  m.gpu = 32;
  m.dp.push_back({0, 32});
  m.dp.push_back({1, 16});
  CHECK(RenderQueryAnswer(one, "default") ==
        R"({"data":{"default":{"vllm-0":{"CPU":0,"DISK":0,"DP":{"0":32,"1":16},"GPU":32,"longest_matched":32}}}})");
  CHECK(RenderQueryAnswer(PrefixMatch{}, "default", true) == "{}");
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
