// Diagnostics for the tools and the transport layer (zmq/, http/). The core library (vocabulary,
// index, codec, files, simulation) never logs: it returns Status and counts.
//
// Messages go to stderr as one line each: "kvindex: <level>: <message>". LogEvery() rate-limits a
// recurring message (a bad publisher must not flood the log).
//
// Thread safety: every function may be called from any thread.
#ifndef KVINDEX_CORE_LOG_H_
#define KVINDEX_CORE_LOG_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvindex {

enum class LogLevel : uint8_t { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

// Parses "error", "warn", "info", "debug" or "trace" (case-insensitive).
std::optional<LogLevel> ParseLogLevel(std::string_view name);
std::string_view LogLevelName(LogLevel level);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
inline bool LogEnabled(LogLevel level) { return level <= GetLogLevel(); }

// Writes one line at `level` if enabled.
void Log(LogLevel level, std::string_view message);

// A rate limiter for one recurring message: Allow() is true at most once per `interval`, and
// counts what it suppressed (reported with the next allowed message by the caller).
class LogRateLimiter {
 public:
  explicit LogRateLimiter(std::chrono::milliseconds interval = std::chrono::seconds(1))
      : interval_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count()) {}
  // True if the caller may log now; `suppressed` receives how many calls were refused since.
  bool Allow(uint64_t* suppressed);

 private:
  int64_t interval_ns_;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace kvindex

#endif  // KVINDEX_CORE_LOG_H_
