// ScanPlainUintArray: the common array of unsigned ids read straight from its text, for the JSON
// reader (json_reader.cpp) only. The parser still decides what any other text is.
#ifndef KVINDEX_JSON_PLAIN_UINT_ARRAY_H_
#define KVINDEX_JSON_PLAIN_UINT_ARRAY_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kvindex::json_detail {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The common array of ids read straight from its text: `p` stands on the '[' of an array the
// parser has not read; the document ends at `end`, which has at least kJsonPadding readable bytes
// after it. Succeeds only when every element is a plain non-negative integer (no sign, fraction,
// exponent or leading zero) of at most 19 digits and at most `max`, separated by ',' and JSON
// whitespace: then appends them to `ids`, sets `*count` and returns the closing ']'. Anything else
// returns nullptr, leaving the array to the parser's own per-element path, which decides what it
// is (a bad id, a bad number, not JSON). The text accepted here is valid JSON as it stands, so
// the parser only has to step over it.
template <typename T>
const char* ScanPlainUintArray(const char* p, const char* end, uint64_t max, std::vector<T>& ids,
                               size_t* count) {
  const size_t first = ids.size();
  ++p;  // '['
  while (p < end && IsJsonSpace(*p)) ++p;
  if (p < end && *p == ']') {
    *count = 0;
    return p;
  }
  while (p < end) {
    // The digits at p, from one 8-byte load (the padding keeps 8 bytes readable): a byte is a
    // digit when neither b + 0x46 nor b - 0x30 sets its top bit, and no carry or borrow crosses
    // from a digit byte into the next, so the lowest flagged byte is the first non-digit (no
    // flag: eight or more digits). Up to seven are moved to the top bytes and converted in three
    // multiplies instead of a loop per digit.
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native != std::endian::little) w = __builtin_bswap64(w);
    const uint64_t flags =
        ((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) & 0x8080808080808080ULL;
    size_t width = static_cast<size_t>(std::countr_zero(flags)) / 8;
    uint64_t value = 0;
    if (width - 1 < 7) [[likely]] {
      uint64_t v = (w & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - width));
      v = (v * 2561) >> 8;
      v = ((v & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
      value = ((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
    } else if (width == 0) {
      return nullptr;
    } else {  // eight or more digits: digit by digit, at most 19
      width = 0;
      while (p + width < end && width <= 19 && static_cast<unsigned char>(p[width] - '0') <= 9) {
        value = value * 10 + static_cast<uint64_t>(p[width] - '0');
        ++width;
      }
      if (width > 19) return nullptr;
    }
    if (p + width > end || (width > 1 && *p == '0') || value > max) return nullptr;
    ids.push_back(static_cast<T>(value));
    p += width;
    if (*p == ',') [[likely]] {  // *p is readable: p <= end, and the padding follows
      ++p;
      if (static_cast<unsigned char>(*p) <= ' ') {
        while (p < end && IsJsonSpace(*p)) ++p;
      }
      continue;
    }
    while (p < end && IsJsonSpace(*p)) ++p;
    if (p == end) return nullptr;
    if (*p == ']') {
      *count = ids.size() - first;
      return p;
    }
    if (*p != ',') return nullptr;
    ++p;
    while (p < end && IsJsonSpace(*p)) ++p;
  }
  return nullptr;
}

// Finds the first `"key"` followed (JSON whitespace aside) by ':' and '[' in the first `size`
// bytes of `copy` (which has kJsonPadding zeroed bytes after them); when that array is all plain
// ids (ScanPlainUintArray) appends them to `ids`, removes the elements from `copy` so that "[]"
// stands at `*at`, zeroes the bytes freed at the end and sets `*removed`. False (nothing changed
// but `ids`) otherwise. Whether the text is JSON is left to the parser.
bool CutPlainUintArray(std::string& copy, size_t size, std::string_view key, uint64_t max,
                       std::vector<uint64_t>& ids, size_t* at, size_t* removed);

}  // namespace kvindex::json_detail

#endif  // KVINDEX_JSON_PLAIN_UINT_ARRAY_H_
