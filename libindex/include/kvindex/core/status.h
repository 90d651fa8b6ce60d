// Status and Result<T>: how every libindex function reports an expected failure.
//
// A Status is a code plus a one-line message; the ok Status carries no message and costs no
// allocation. Result<T> holds either a T or a non-ok Status. Both are [[nodiscard]]: bad bytes,
// files or ids are reported through them, never thrown. Programmer errors are debug asserts.
//
// Thread safety: plain values; distinct objects may be used from distinct threads.
#ifndef KVINDEX_CORE_STATUS_H_
#define KVINDEX_CORE_STATUS_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvindex {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // a caller-supplied value is out of its domain (usage errors)
  kNotFound,         // a named thing (file, instance, model) does not exist
  kMalformed,        // bytes or text do not have the expected shape
  kUnsupported,      // well-formed but unknown (an event tag, a format version)
  kCorrupt,          // a checksum or length does not verify
  kLimitExceeded,    // a hard limit (payload size, nesting, counts) was exceeded
  kIoError,          // the operating system refused a read, write, open or socket call
  kUnavailable,      // a peer did not answer or went away
  kTimeout,          // a deadline passed
  kInternal,         // an invariant of kvindex itself failed (a bug)
};

// Returns the lower-case name of `code`, e.g. "malformed".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // The ok status.
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Malformed(std::string m) { return {StatusCode::kMalformed, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status LimitExceeded(std::string m) { return {StatusCode::kLimitExceeded, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // The message alone, without the code name; empty for ok.
  const std::string& message() const { return message_; }
  // "ok", or "<code name>: <message>".
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>" (ok stays ok). Each layer adds the
  // input and position it knows, so the final one-line error says where and what.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value of type T, or the Status saying why there is none. A Result is never built from an ok
// Status (debug assert).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(Status status) : data_(std::in_place_index<1>, std::move(status)) {  // NOLINT: implicit
    assert(!std::get<1>(data_).ok());
  }

  bool ok() const { return data_.index() == 0; }
  // The failure, or an ok Status when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(data_); }

  // Accessors require ok() (debug assert).
  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace kvindex

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define KVINDEX_RETURN_IF_ERROR(expr)                   \
  do {                                                  \
    ::kvindex::Status kvindex_status_ = (expr);         \
    if (!kvindex_status_.ok()) return kvindex_status_;  \
  } while (0)

#define KVINDEX_CONCAT_INNER_(a, b) a##b
#define KVINDEX_CONCAT_(a, b) KVINDEX_CONCAT_INNER_(a, b)
// `KVINDEX_ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value or returns its Status.
#define KVINDEX_ASSIGN_OR_RETURN(lhs, expr) \
  KVINDEX_ASSIGN_OR_RETURN_IMPL_(KVINDEX_CONCAT_(kvindex_result_, __LINE__), lhs, expr)
#define KVINDEX_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // KVINDEX_CORE_STATUS_H_
