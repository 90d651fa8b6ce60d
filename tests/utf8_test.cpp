#include "kvindex/core/utf8.h"

#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace kvindex {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The tools write JSON with nlohmann's error_handler_t::replace (tools/kvindex/report.h DumpJson);
// the last case checks that its replacement is this policy, so the two never give different text.
std::string Replace(const nlohmann::json& value, bool ensure_ascii) {
  return value.dump(-1, ' ', ensure_ascii, nlohmann::json::error_handler_t::replace);
}

TEST_SUITE("utf8") {

TEST_CASE("Every vector of the independent oracle: replacement text and first bad offset") {
  std::ifstream in(KVINDEX_TEST_DATA_DIR "/utf8_vectors.json");
  REQUIRE(in);
  const nlohmann::json doc = nlohmann::json::parse(in);
  size_t invalid = 0;
  for (const auto& v : doc.at("vectors")) {
    const std::string input = FromHex(v.at("in").get<std::string>());
    const std::string expected = FromHex(v.at("out").get<std::string>());
    const int64_t first = v.at("first_invalid").get<int64_t>();
    INFO("input hex ", v.at("in").get<std::string>());
    CHECK(ToValidUtf8(input) == expected);
    if (first < 0) {
      CHECK(InvalidUtf8At(input) == std::string_view::npos);
      CHECK(IsValidUtf8(input));
    } else {
      ++invalid;
      CHECK(InvalidUtf8At(input) == static_cast<size_t>(first));
    }
    std::string copy = input;
    CHECK(MakeValidUtf8(copy) == (first >= 0));
    CHECK(copy == expected);
    // What the policy produces, every JSON writer accepts.
    CHECK_NOTHROW((void)nlohmann::json(expected).dump());
  }
  CHECK(doc.at("vectors").size() > 300);
  CHECK(invalid > 100);  // the random cases do exercise the replacement
}

TEST_CASE("Hand-computed replacements: one U+FFFD per maximal subpart") {
  CHECK(ToValidUtf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  // E2 82 is a truncated three-byte sequence: one replacement, then the full euro sign.
  CHECK(ToValidUtf8("\xE2\x82\xE2\x82\xAC") == "\xEF\xBF\xBD\xE2\x82\xAC");
  // ED A0 80 (a surrogate) is three separate ill-formed bytes.
  CHECK(ToValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(ToValidUtf8(std::string("n\0l", 3)) == std::string("n\0l", 3));
}

TEST_CASE("nlohmann's replace handler writes what the oracle's replacement text writes") {
    std::ifstream in(KVINDEX_TEST_DATA_DIR "/utf8_vectors.json");
    REQUIRE(in);
    const nlohmann::json doc = nlohmann::json::parse(in);
    size_t invalid = 0;
    for (const auto& v : doc.at("vectors")) {
      const std::string input = FromHex(v.at("in").get<std::string>());
      const std::string expected = FromHex(v.at("out").get<std::string>());
      INFO("input hex ", v.at("in").get<std::string>());
      if (input != expected) ++invalid;
      // The oracle's text is valid, so its strict dump is the reference; as a string, as an
      // object key, and inside other text.
      for (bool ascii : {false, true}) {
        CHECK(Replace(nlohmann::json(input), ascii) ==
              nlohmann::json(expected).dump(-1, ' ', ascii));
        CHECK(Replace(nlohmann::json{{input, 1}}, ascii) ==
              nlohmann::json{{expected, 1}}.dump(-1, ' ', ascii));
        CHECK(Replace(nlohmann::json("x" + input + "y"), ascii) ==
              nlohmann::json("x" + expected + "y").dump(-1, ' ', ascii));
      }
      CHECK(Replace(nlohmann::json(input), false) == nlohmann::json(ToValidUtf8(input)).dump());
    }
    CHECK(invalid > 100);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
