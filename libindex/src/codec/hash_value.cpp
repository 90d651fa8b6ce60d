#include "hash_value.h"

#include <xxhash.h>

namespace kvindex::codec_internal {

bool ParseHashString(std::string_view s, uint64_t& value) {
  auto hex_digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    if (s.size() - 2 > 16) return false;
    uint64_t v = 0;
    for (size_t i = 2; i < s.size(); ++i) {
      const int d = hex_digit(s[i]);
      if (d < 0) return false;
      v = (v << 4) | static_cast<uint64_t>(d);
    }
    value = v;
    return true;
  }
  const bool negative = !s.empty() && s[0] == '-';
  const std::string_view digits = negative ? s.substr(1) : s;
  if (digits.empty() || digits.size() > 20) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (negative) {
    if (v > (uint64_t{1} << 63)) return false;
    value = ~v + 1;  // two's complement of -v
  } else {
    value = v;
  }
  return true;
}

uint64_t NormaliseHashString(std::string_view s) {
  uint64_t v;
  if (ParseHashString(s, v)) return v;
  return XXH3_64bits(s.data(), s.size());
}

std::string EmbedsId(std::span<const uint8_t> digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kEmbedsPrefix);
  for (uint8_t b : digest) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

bool IsEmbedsKey(const MultimodalKey& key) {
  if (key.offset != 0 || key.id.size() <= kEmbedsPrefix.size() ||
      key.id.compare(0, kEmbedsPrefix.size(), kEmbedsPrefix) != 0) {
    return false;
  }
  const size_t digits = key.id.size() - kEmbedsPrefix.size();
  if (digits % 2 != 0) return false;
  for (size_t i = kEmbedsPrefix.size(); i < key.id.size(); ++i) {
    const char c = key.id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kvindex::codec_internal
