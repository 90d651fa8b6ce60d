// Small helpers shared by the fuzz targets: how a target reports a violated property (print what
// and the input, then abort, so that the ctest driver and libFuzzer both stop on it) and the
// "one clear line" check every error message must pass. Plain functions, any thread.
#ifndef KVINDEX_TESTS_FUZZ_FUZZ_CHECK_H_
#define KVINDEX_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kvindex::fuzz {

// Prints "<target>: <what>: <detail>" and the input (escaped), then aborts.
[[noreturn]] inline void Violation(const char* target, std::string_view what,
                                   std::string_view detail, std::string_view input) {
  std::fprintf(stderr, "%s: %.*s: %.*s\ninput (%zu bytes): ", target, static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data(), input.size());
  for (unsigned char c : input) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      std::fputc(c, stderr);
    } else {
      std::fprintf(stderr, "\\x%02x", c);
    }
  }
  std::fputc('\n', stderr);
  std::abort();
}

// True when `text` has no control character (an input that a message may quote verbatim and
// still be one line).
inline bool HasNoControl(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// True when `message` is a usable error: non-empty and a single line.
inline bool IsOneLine(std::string_view message) {
  return !message.empty() && message.find('\n') == std::string_view::npos &&
         message.find('\r') == std::string_view::npos;
}

}  // namespace kvindex::fuzz

#endif  // KVINDEX_TESTS_FUZZ_FUZZ_CHECK_H_
