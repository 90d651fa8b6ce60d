#include "kvindex/core/json_depth.h"

#include <string>

#include <doctest/doctest.h>

namespace kvindex {
namespace {

TEST_SUITE("json_depth") {

TEST_CASE("A text nested within the limit passes, one level deeper names the opening bracket") {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  CHECK(JsonTooDeepAt(ok) == std::string_view::npos);
  const std::string deep = "{\"a\":" + std::string(65, '[') + std::string(65, ']') + "}";
  CHECK(JsonTooDeepAt(deep) == 5 + 63);  // '{' is level 1, the 64th '[' is level 65
  CHECK(JsonTooDeepAt(std::string(200000, '{')) == 64);
}

TEST_CASE("Brackets inside strings, escaped quotes included, do not count") {
  const std::string s = "{\"k\": \"" + std::string(100, '[') + "\\\"" + std::string(100, '{') +
                        "\", \"v\": [1]}";
  CHECK(JsonTooDeepAt(s) == std::string_view::npos);
  CHECK(JsonTooDeepAt("[[[", 2) == 2);
  CHECK(JsonTooDeepAt("]]]][[", 2) == std::string_view::npos);  // stray closers never go below 0
  CHECK(JsonTooDeepAt("\"\\\\\"[[[", 2) == 6);  // an escaped backslash ends before the quote
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
