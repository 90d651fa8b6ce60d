#include "kvindex/core/json_depth.h"

#include <random>
#include <string>

#include <doctest/doctest.h>

#include "kvindex/json/json_reader.h"

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

// JsonTooDeepAtFast counts the opening brackets in blocks first and runs JsonTooDeepAt only when
// there are more than the limit: the same answer as JsonTooDeepAt on texts around the limit, with
// the brackets at every offset of a block, bytes one bit away from '{' and '[' ('{' ^ 0x20 is '[';
// ';', '}', '{' + 0x80, ...), and strings holding brackets.
TEST_CASE("The counting pre-check answers as JsonTooDeepAt") {
  std::mt19937_64 rng(5);
  static const char kBytes[] = {'{', '[', '}', ']', ';', 'K', 'k', '\x5a', '\x7a', '\x7c',
                                '\xdb', '\xfb', '"', ' ', '1', ','};
  int deep = 0;
  for (int i = 0; i < 4000; ++i) {
    const size_t size = rng() % 700;
    std::string text;
    for (size_t k = 0; k < size; ++k) {
      // Mostly openers in some texts, so that the count lands on both sides of the limit.
      const bool opener = static_cast<int>(rng() % 100) < (i % 5) * 6;
      text += opener ? "{["[rng() % 2] : kBytes[rng() % sizeof kBytes];
    }
    const size_t want = JsonTooDeepAt(text);
    CAPTURE(text);
    CHECK(JsonTooDeepAtFast(text) == want);
    deep += want != std::string_view::npos;
  }
  CHECK(deep > 200);
  CHECK(JsonTooDeepAtFast(std::string(64, '[')) == std::string_view::npos);
  CHECK(JsonTooDeepAtFast(std::string(65, '[')) == 64);
  CHECK(JsonTooDeepAtFast(std::string(1000, ';') + std::string(65, '{')) == 1064);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
