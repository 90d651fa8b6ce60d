// The text-level helpers of the JSON reader (plain_uint_array.h) and JsonTooDeepAtFast.
#include "plain_uint_array.h"

#include <string_view>

#include "kvindex/core/json_depth.h"
#include "kvindex/json/json_reader.h"

namespace kvindex {
namespace json_detail {

bool CutPlainUintArray(std::string& copy, size_t size, std::string_view key, uint64_t max,
                       std::vector<uint64_t>& ids, size_t* at, size_t* removed) {
  const std::string_view text(copy.data(), size);
  size_t p = 0;
  for (;; ++p) {  // `"key"`, then ':' and '[' with only whitespace between
    p = text.find(key, p);
    if (p == std::string_view::npos) return false;
    size_t i = p + key.size();
    if (p == 0 || text[p - 1] != '"' || i >= size || text[i] != '"') continue;
    ++i;
    while (i < size && IsJsonSpace(text[i])) ++i;
    if (i >= size || text[i] != ':') continue;
    ++i;
    while (i < size && IsJsonSpace(text[i])) ++i;
    if (i < size && text[i] == '[') {
      p = i;
      break;
    }
  }
  size_t count = 0;
  const char* close = ScanPlainUintArray(copy.data() + p, copy.data() + size, max, ids, &count);
  if (close == nullptr) return false;
  const auto q = static_cast<size_t>(close - copy.data());
  std::memmove(copy.data() + p + 1, close, size - q);  // "]" and what follows
  *removed = q - p - 1;
  std::memset(copy.data() + size - *removed, 0, *removed);  // the padding after the shorter text
  *at = p;
  return true;
}

}  // namespace json_detail

namespace {
// '{' (0x7B) and '[' (0x5B) differ only in bit 0x20, and no other byte ORed with 0x20 gives 0x7B:
// one compare finds both.
constexpr bool IsOpener(char c) { return (static_cast<unsigned char>(c) | 0x20) == 0x7B; }
}  // namespace

size_t JsonTooDeepAtFast(std::string_view text) {
  // Byte-wide counts per 128-byte block (at most 128 each): the compiler turns the inner loop
  // into vector compares and adds, a fraction of an instruction per byte.
  size_t openers = 0;
  size_t i = 0;
  for (; i + 128 <= text.size() && openers <= kMaxJsonDepth; i += 128) {
    uint8_t block = 0;
    for (size_t k = 0; k < 128; ++k) block = static_cast<uint8_t>(block + IsOpener(text[i + k]));
    openers += block;
  }
  for (; i < text.size(); ++i) openers += static_cast<size_t>(IsOpener(text[i]));
  if (openers <= kMaxJsonDepth) return std::string_view::npos;
  return JsonTooDeepAt(text);
}

}  // namespace kvindex
