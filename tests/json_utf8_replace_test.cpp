// The tools write JSON with nlohmann's error_handler_t::replace (tools/kvindex/report.h
// DumpJson): this checks that its replacement of invalid UTF-8 is the project's policy
// (kvindex/core/utf8.h), on every vector of the independent Python oracle, so the two never give
// different text for the same name.
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/core/utf8.h"

namespace kvindex {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string Replace(const nlohmann::json& value, bool ensure_ascii) {
  return value.dump(-1, ' ', ensure_ascii, nlohmann::json::error_handler_t::replace);
}

TEST_SUITE("json_utf8_replace") {
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
