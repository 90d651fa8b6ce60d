#include "kvindex/core/utf8.h"

#include <cstdint>

namespace kvindex {
namespace {

// The length of the well-formed sequence at text[i], or 0 when it is ill-formed; `*bad` is then
// the length of the maximal ill-formed subpart to replace (at least 1). The ranges are the
// Unicode Standard's table of well-formed byte sequences: the second byte's range depends on the
// lead byte (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4: 80..8F), the others are 80..BF.
size_t SequenceAt(std::string_view text, size_t i, size_t* bad) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    *bad = 1;  // 80..C1 and F5..FF never start a sequence
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    if (i + k >= text.size() || byte(i + k) < low || byte(i + k) > high) {
      *bad = k;  // the lead and the continuation bytes that were still possible
      return 0;
    }
    low = 0x80;
    high = 0xBF;
  }
  return length;
}

}  // namespace

size_t InvalidUtf8At(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t length = SequenceAt(text, i, &bad);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string ToValidUtf8(std::string_view text) {
  const size_t first = InvalidUtf8At(text);
  if (first == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, first));
  out.reserve(text.size() + 8);
  size_t i = first;
  while (i < text.size()) {
    size_t bad = 0;
    const size_t length = SequenceAt(text, i, &bad);
    if (length != 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

bool MakeValidUtf8(std::string& text) {
  if (IsValidUtf8(text)) return false;
  text = ToValidUtf8(text);
  return true;
}

}  // namespace kvindex
