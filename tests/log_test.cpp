#include "kvindex/core/log.h"

#include <chrono>

#include <doctest/doctest.h>

namespace kvindex {
namespace {

TEST_SUITE("log") {

TEST_CASE("Log levels parse by name, case-insensitively") {
  CHECK(ParseLogLevel("error") == LogLevel::kError);
  CHECK(ParseLogLevel("WARN") == LogLevel::kWarn);
  CHECK(ParseLogLevel("info") == LogLevel::kInfo);
  CHECK(ParseLogLevel("Debug") == LogLevel::kDebug);
  CHECK(ParseLogLevel("trace") == LogLevel::kTrace);
  CHECK_FALSE(ParseLogLevel("loud").has_value());
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug,
                     LogLevel::kTrace}) {
    CHECK(ParseLogLevel(LogLevelName(l)) == l);
  }
}

TEST_CASE("The rate limiter lets one message through per interval and counts the rest") {
  LogRateLimiter limiter(std::chrono::hours(1));
  uint64_t suppressed = 99;
  CHECK(limiter.Allow(&suppressed));
  CHECK(suppressed == 0);
  CHECK_FALSE(limiter.Allow(&suppressed));
  CHECK_FALSE(limiter.Allow(&suppressed));
  LogRateLimiter open(std::chrono::milliseconds(0));
  CHECK(open.Allow(nullptr));
  CHECK(open.Allow(&suppressed));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
