#include "cli_validators.h"

#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <system_error>

#include "kvindex/core/address.h"
#include "kvindex/core/utf8.h"
#include "kvindex/sim/block_cache.h"

namespace kvindex::cli {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "11, 12" has always worked: the blanks around a list item are not part of it.
void TrimBlanks(std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first != 0) text.erase(0, first == std::string::npos ? text.size() : first);
  const size_t last = text.find_last_not_of(" \t");
  if (last + 1 < text.size()) text.erase(last + 1);
}

// `text` as a whole parsed by from_chars in `base`; false for empty text, junk or overflow.
template <typename T>
bool ParseWhole(std::string_view text, T& value, int base = 10) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

CLI::Option* CommaList(CLI::Option* option) {
  return option->delimiter(',')->allow_extra_args(false);
}

CLI::Validator Decimal() {
  return CLI::Validator(
      [](std::string& text) {
        TrimBlanks(text);
        const size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
        size_t zeros = sign;
        while (zeros + 1 < text.size() && text[zeros] == '0' && IsDigit(text[zeros + 1])) ++zeros;
        if (zeros > sign) text.erase(sign, zeros - sign);
        return std::string();
      },
      std::string());
}

CLI::Validator Capacity(bool allow_none) {
  return CLI::Validator(
      [allow_none](std::string& item) {
        if (item == "inf") {
          item = std::to_string(sim::kInfiniteCapacity);
          return std::string();
        }
        if (allow_none && (item == "none" || item.empty())) {
          item = "0";
          return std::string();
        }
        uint64_t value = 0;
        if (!ParseWhole(item, value) || value == 0)
          return "'" + item + "' is not a positive integer";
        item = std::to_string(value);
        return std::string();
      },
      allow_none ? "N|inf|none" : "N|inf");
}

CLI::Validator Hash() {
  return CLI::Validator(
      [](std::string& item) {
        TrimBlanks(item);
        uint64_t value = 0;
        bool ok = false;
        if (item.size() > 2 && item[0] == '0' && (item[1] == 'x' || item[1] == 'X')) {
          ok = ParseWhole(std::string_view(item).substr(2), value, 16);
        } else if (!item.empty() && item[0] == '-') {
          int64_t negative = 0;
          ok = ParseWhole(item, negative);
          value = static_cast<uint64_t>(negative);  // two's complement (SGLang)
        } else {
          ok = ParseWhole(item, value);
        }
        if (!ok) return "'" + item + "' is not a number";
        item = std::to_string(value);
        return std::string();
      },
      "HASH");
}

CLI::Validator ZeroOrAtLeast(uint64_t min, std::string why) {
  const std::string message = "must be 0 (off) or at least " + std::to_string(min) +
                              (why.empty() ? std::string() : " (" + why + ")");
  return CLI::Validator(
      [min, message](std::string& text) {
        // Read as the option's own conversion reads it, so the check sees the value it stores.
        uint64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) {
          return "'" + text + "' is not a non-negative integer";
        }
        return value == 0 || value >= min ? std::string() : message;
      },
      "0|N>=" + std::to_string(min));
}

namespace {

// `text` as a finite number spelled in full (blanks around it allowed), or nullopt.
std::optional<double> FiniteDecimal(const std::string& text) {
  std::string item = text;
  TrimBlanks(item);
  if (item.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(item.c_str(), &end);
  if (end != item.c_str() + item.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// A finite number spelled in full (blanks around it allowed), compared with 0.
CLI::Validator FiniteNumber(bool zero_ok, const char* description, const char* what) {
  return CLI::Validator(
      [zero_ok, what](std::string& text) {
        const std::optional<double> value = FiniteDecimal(text);
        if (!value || *value < 0 || (!zero_ok && *value == 0)) {
          return "'" + ToValidUtf8(text) + "' is not " + what;
        }
        return std::string();
      },
      description);
}

}  // namespace

CLI::Validator Positive() { return FiniteNumber(false, "POSITIVE", "a positive number"); }
CLI::Validator NonNegative() { return FiniteNumber(true, "NONNEGATIVE", "a non-negative number"); }

CLI::Validator Seconds(bool zero_ok) {
  const std::string what = std::string(zero_ok ? "a non-negative" : "a positive") +
                           " number of seconds (at most 1e9)";
  return CLI::Validator(
      [zero_ok, what](std::string& text) {
        const std::optional<double> value = FiniteDecimal(text);
        if (!value || *value < 0 || (!zero_ok && *value == 0) || *value > kMaxSeconds) {
          return "'" + ToValidUtf8(text) + "' is not " + what;
        }
        return std::string();
      },
      "SECONDS");
}

CLI::Validator RealIn(double min, double max, bool zero_ok) {
  std::ostringstream range;
  range << "a number in [" << min << ", " << max << "]" << (zero_ok ? " or 0" : "");
  const std::string what = range.str();
  return CLI::Validator(
      [min, max, zero_ok, what](std::string& text) {
        const std::optional<double> value = FiniteDecimal(text);
        if (!value || !((zero_ok && *value == 0) || (*value >= min && *value <= max))) {
          return "'" + ToValidUtf8(text) + "' is not " + what;
        }
        return std::string();
      },
      "NUMBER");
}

CLI::Validator InputFile() {
  return CLI::Validator(
      [](std::string& path) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return std::string();
        if (S_ISDIR(st.st_mode)) return ToValidUtf8(path) + ": is a directory";
        if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
          return ToValidUtf8(path) + ": not a regular file";
        }
        return std::string();
      },
      std::string());
}

CLI::Validator WarmFromInput() {
  return CLI::Validator(
      [](std::string& text) {
        if (text.rfind("http://", 0) == 0) {
          const Result<NetAddress> a = ParseNetAddress(text);
          if (!a.ok()) return ToValidUtf8(text) + ": " + a.status().message();
          if (a->host.empty() || !a->port || *a->port == 0) {
            return ToValidUtf8(text) + ": needs http://HOST:PORT";
          }
          return std::string();
        }
        struct stat st {};
        if (::stat(text.c_str(), &st) != 0) return ToValidUtf8(text) + ": no such file";
        std::string checked = text;
        return InputFile()(checked);
      },
      std::string());
}

CLI::Validator Utf8() {
  return CLI::Validator(
      [](std::string& text) {
        if (IsValidUtf8(text)) return std::string();
        return "'" + ToValidUtf8(text) + "' is not valid UTF-8";
      },
      std::string());
}

}  // namespace kvindex::cli
