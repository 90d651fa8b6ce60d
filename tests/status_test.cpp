#include "kvindex/core/status.h"

#include <memory>

#include <doctest/doctest.h>

namespace kvindex {
namespace {

Status FailIfNegative(int value) {
  if (value < 0) return Status::InvalidArgument("negative: " + std::to_string(value));
  return Status::Ok();
}

Result<int> Twice(int value) {
  KVINDEX_RETURN_IF_ERROR(FailIfNegative(value));
  return value * 2;
}

Result<int> FourTimes(int value) {
  KVINDEX_ASSIGN_OR_RETURN(const int twice, Twice(value));
  return twice * 2;
}

TEST_SUITE("status") {

TEST_CASE("The default Status is ok and prints as ok") {
  Status s;
  CHECK(s.ok());
  CHECK(s.ToString() == "ok");
  CHECK(s.WithContext("file") == Status::Ok());
}

TEST_CASE("A failed Status carries its code and message, and context prefixes it") {
  const Status s = Status::Malformed("expected array, got map");
  CHECK_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kMalformed);
  CHECK(s.ToString() == "malformed: expected array, got map");
  const Status c = s.WithContext("record 1832 (byte 99120)").WithContext("a.kvcap");
  CHECK(c.code() == StatusCode::kMalformed);
  CHECK(c.message() == "a.kvcap: record 1832 (byte 99120): expected array, got map");
}

TEST_CASE("Result holds a value or a Status, and the macros propagate failures") {
  CHECK(FourTimes(3).ok());
  CHECK(*FourTimes(3) == 12);
  const Result<int> bad = FourTimes(-1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "negative: -1");
  CHECK(Result<int>(5).status().ok());
}

TEST_CASE("Result works with move-only values") {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  REQUIRE(r.ok());
  std::unique_ptr<int> owned = std::move(r).value();
  CHECK(*owned == 7);
}

TEST_CASE("Every code has a distinct name") {
  CHECK(StatusCodeName(StatusCode::kOk) == "ok");
  CHECK(StatusCodeName(StatusCode::kCorrupt) == "corrupt");
  CHECK(StatusCodeName(StatusCode::kMalformed) != StatusCodeName(StatusCode::kUnsupported));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
