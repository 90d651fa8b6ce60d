#include "kvindex/core/log.h"

#include <cctype>
#include <cstdio>
#include <string>

namespace kvindex {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kWarn};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "error") return LogLevel::kError;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "trace") return LogLevel::kTrace;
  return std::nullopt;
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kTrace: return "trace";
  }
  return "unknown";
}

void SetLogLevel(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line = "kvindex: ";
  line += LogLevelName(level);
  line += ": ";
  line += message;
  line += '\n';
  // One fwrite per line keeps lines from different threads whole.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

bool LogRateLimiter::Allow(uint64_t* suppressed) {
  const int64_t now = NowNs();
  int64_t next = next_ns_.load(std::memory_order_relaxed);
  if (now >= next && next_ns_.compare_exchange_strong(next, now + interval_ns_)) {
    const uint64_t count = suppressed_.exchange(0);
    if (suppressed != nullptr) *suppressed = count;
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace kvindex
