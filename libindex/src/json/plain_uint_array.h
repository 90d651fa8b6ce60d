// ScanPlainUintArray: the common array of unsigned ids read straight from its text, for the JSON
// reader (json_reader.cpp) only. The parser still decides what any other text is.
#ifndef KVINDEX_JSON_PLAIN_UINT_ARRAY_H_
#define KVINDEX_JSON_PLAIN_UINT_ARRAY_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvindex::json_detail {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The plain id at `p` (the padding keeps 8 bytes readable past `end`): its width in bytes and
// *value, or 0 when `p` does not start one (no digit, a leading zero, more than 19 digits, or a
// value above `max`). From one 8-byte load: a byte is a digit when neither b + 0x46 nor b - 0x30
// sets its top bit, and no carry or borrow crosses from a digit byte into the next, so the lowest
// flagged byte is the first non-digit (no flag: eight or more digits). Up to seven are moved to
// the top bytes and converted in three multiplies instead of a loop per digit.
inline size_t ReadPlainId(const char* p, const char* end, uint64_t max, uint64_t* value) {
  uint64_t w = 0;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native != std::endian::little) w = __builtin_bswap64(w);
  const uint64_t flags =
      ((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) & 0x8080808080808080ULL;
  size_t width = static_cast<size_t>(std::countr_zero(flags)) / 8;
  uint64_t v = 0;
  if (width - 1 < 7) [[likely]] {
    v = (w & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - width));
    v = (v * 2561) >> 8;
    v = ((v & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
    v = ((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
  } else if (width == 0) {
    return 0;
  } else {  // eight or more digits: digit by digit, at most 19
    width = 0;
    while (p + width < end && width <= 19 && static_cast<unsigned char>(p[width] - '0') <= 9) {
      v = v * 10 + static_cast<uint64_t>(p[width] - '0');
      ++width;
    }
    if (width > 19) return 0;
  }
  if (p + width > end || (width > 1 && *p == '0') || v > max) return 0;
  *value = v;
  return width;
}

// One stretch of a long array, read beside the others (ScanPlainUintArrayInLanes): from `p` (an
// element) to `stop`, the ',' after its last element, or the array's ']' for the last stretch.
template <typename T>
struct PlainIdLane {
  const char* p;
  const char* stop;
  T* out;
};

// One element of a lane: 0 when the lane goes on, 1 when its last element was read, -1 when the
// text is not a plain array there. kSpaced: the array's separator is ", " (as Python's json.dumps
// writes it), expected by a branch instead of a load on the lane's chain; any other separator
// still reads, by the general path.
template <typename T, bool kSpaced>
inline int StepPlainIdLane(PlainIdLane<T>& lane, const char* end, uint64_t max) {
  uint64_t value = 0;
  const size_t width = ReadPlainId(lane.p, end, max, &value);
  if (width == 0) return -1;
  *lane.out++ = static_cast<T>(value);
  const char* p = lane.p + width;  // at most `stop`: digits are neither ',' nor ']'
  if constexpr (kSpaced) {
    if (p[0] == ',' && p[1] == ' ' && p != lane.stop) [[likely]] {  // p[1]: p < stop
      p += 2;
      if (static_cast<unsigned char>(*p) <= ' ') [[unlikely]] {
        while (p < lane.stop && IsJsonSpace(*p)) ++p;
      }
      lane.p = p;
      return 0;
    }
  }
  if (*p != ',' || p == lane.stop) [[unlikely]] {
    while (p < lane.stop && IsJsonSpace(*p)) ++p;
    if (p == lane.stop) return 1;  // the stop's own byte was checked when it was chosen
    if (*p != ',') return -1;
  }
  ++p;
  if (static_cast<unsigned char>(*p) <= ' ') {
    while (p < lane.stop && IsJsonSpace(*p)) ++p;
  }
  lane.p = p;
  return 0;
}

// Arrays shorter than this are read element by element: the four-lane set-up costs more than it
// saves on a few elements.
inline constexpr size_t kPlainIdLaneMinBytes = 256;
inline constexpr size_t kKeepScratchIds = 1 << 16;  // a thread keeps at most this many ids' room

// A long array in four stretches read side by side. Read one after the other, each element's
// position waits on the previous element's width (a load, the flag arithmetic and a bit count);
// four independent stretches let the processor overlap them (about 0.86x the time at 2,048 ids:
// the loop is bound by its own instructions more than by that chain). The stretches end at
// commas after the quarter points of the text up to the first ']'. Appends the elements to `ids`
// and returns that ']', or nullptr when the text is not a plain array of four stretches (the
// caller then reads it element by element, which decides what it is).
template <typename T>
const char* ScanPlainUintArrayInLanes(const char* open, const char* end, uint64_t max,
                                      std::vector<T>& ids, size_t* count) {
  constexpr size_t kLanes = 4;
  const char* first = open + 1;
  while (first < end && IsJsonSpace(*first)) ++first;
  const auto* close = static_cast<const char*>(std::memchr(first, ']', end - first));
  // (a short array followed by a long document is read element by element too)
  if (close == nullptr || static_cast<size_t>(close - first) < kPlainIdLaneMinBytes) return nullptr;
  const char* starts[kLanes];
  const char* stops[kLanes];
  starts[0] = first;
  const size_t quarter = static_cast<size_t>(close - first) / kLanes;
  for (size_t k = 1; k < kLanes; ++k) {
    const char* from = std::max(first + k * quarter, starts[k - 1]);
    const auto* comma = static_cast<const char*>(std::memchr(from, ',', close - from));
    if (comma == nullptr) return nullptr;
    stops[k - 1] = comma;
    starts[k] = comma + 1;
    while (starts[k] < close && IsJsonSpace(*starts[k])) ++starts[k];
  }
  stops[kLanes - 1] = close;
  // Each lane's elements into its own part of one buffer (an element takes at least 2 bytes of
  // text: a digit and a separator), then into `ids` in order.
  static thread_local std::vector<T> scratch;
  const size_t bound = static_cast<size_t>(close - first) / 2 + kLanes;
  if (scratch.size() < bound) scratch.resize(bound);
  const auto release = [](const char* result) {  // an outsized body's room is not kept
    if (scratch.size() > kKeepScratchIds) std::vector<T>().swap(scratch);
    return result;
  };
  PlainIdLane<T> lanes[kLanes];
  T* base[kLanes];
  T* at = scratch.data();
  for (size_t k = 0; k < kLanes; ++k) {
    lanes[k] = {starts[k], stops[k], at};
    base[k] = at;
    at += static_cast<size_t>(stops[k] - starts[k]) / 2 + 1;
  }
  int state[kLanes] = {};
  const auto run = [&]<bool kSpaced>() {
    // the lanes in locals, which stay in registers while they run side by side
    PlainIdLane<T> l0 = lanes[0], l1 = lanes[1], l2 = lanes[2], l3 = lanes[3];
    for (;;) {
      state[0] = StepPlainIdLane<T, kSpaced>(l0, end, max);
      state[1] = StepPlainIdLane<T, kSpaced>(l1, end, max);
      state[2] = StepPlainIdLane<T, kSpaced>(l2, end, max);
      state[3] = StepPlainIdLane<T, kSpaced>(l3, end, max);
      if ((state[0] | state[1] | state[2] | state[3]) != 0) break;
    }
    lanes[0] = l0;
    lanes[1] = l1;
    lanes[2] = l2;
    lanes[3] = l3;
  };
  // The separator after the first stretch stands for the array's: ", " or another.
  if (stops[0][1] == ' ') {
    run.template operator()<true>();
  } else {
    run.template operator()<false>();
  }
  size_t total = 0;
  for (size_t k = 0; k < kLanes; ++k) {
    while (state[k] == 0) state[k] = StepPlainIdLane<T, false>(lanes[k], end, max);
    if (state[k] < 0) return release(nullptr);
    total += static_cast<size_t>(lanes[k].out - base[k]);
  }
  ids.reserve(ids.size() + total);
  for (size_t k = 0; k < kLanes; ++k) ids.insert(ids.end(), base[k], lanes[k].out);
  *count = total;
  return release(close);
}

// The wide scan: a long array read 64 bytes at a time with AVX-512 (VBMI2) instructions, where the
// processor has them (WideIdScanAvailable; plain_uint_array.cpp). Reads the elements of
// [first, last), which must start with an element's first digit and end right after the last
// element's last digit: ids of 1 to 8 digits without a leading zero, each pair separated by one
// ',' and any JSON whitespace. Writes them to `out` (room for (last - first) / 2 + 1 values) and
// returns how many, or -1 when the text is anything else (the caller then reads it another way,
// which decides what it is) or `max` is below kWideIdScanMinMax (it takes every id of 8 digits).
inline constexpr uint64_t kWideIdScanMinMax = 99'999'999;
long ScanPlainIdsWide(const char* first, const char* last, uint64_t max, uint64_t* out);
// Whether this processor runs ScanPlainIdsWide, and whether the reader uses it (on by default
// where it runs; tests turn it off to check the other paths against it).
bool WideIdScanAvailable();
bool WideIdScanEnabled();
void SetWideIdScan(bool enabled);

// Appends the elements of the long plain array whose '[' is at `open` to `ids` through the wide
// scan and returns its ']', or nullptr (ids unchanged) when the scan does not take it.
inline const char* ScanPlainUintArrayWide(const char* open, const char* end, uint64_t max,
                                          std::vector<uint64_t>& ids, size_t* count) {
  const char* first = open + 1;
  while (first < end && IsJsonSpace(*first)) ++first;
  const auto* close = static_cast<const char*>(std::memchr(first, ']', end - first));
  if (close == nullptr) return nullptr;
  const char* last = close;
  while (last > first && IsJsonSpace(last[-1])) --last;
  // Into a per-thread buffer that only grows (sizing `ids` to the bound would zero all of it on
  // every array), then appended.
  static thread_local std::vector<uint64_t> scratch;
  const size_t bound = static_cast<size_t>(last - first) / 2 + 1;
  if (scratch.size() < bound) scratch.resize(bound);
  const long n = ScanPlainIdsWide(first, last, max, scratch.data());
  if (n >= 0) ids.insert(ids.end(), scratch.data(), scratch.data() + n);
  if (scratch.size() > kKeepScratchIds) std::vector<uint64_t>().swap(scratch);
  if (n < 0) return nullptr;
  *count = static_cast<size_t>(n);
  return close;
}

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
  if (static_cast<size_t>(end - p) > kPlainIdLaneMinBytes) {  // the array may be long enough
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (max >= kWideIdScanMinMax && WideIdScanEnabled()) {
        if (const char* close = ScanPlainUintArrayWide(p, end, max, ids, count)) return close;
      }
    }
    if (const char* close = ScanPlainUintArrayInLanes(p, end, max, ids, count)) return close;
    ids.resize(first);
  }
  ++p;  // '['
  while (p < end && IsJsonSpace(*p)) ++p;
  if (p < end && *p == ']') {
    *count = 0;
    return p;
  }
  while (p < end) {
    uint64_t value = 0;
    const size_t width = ReadPlainId(p, end, max, &value);
    if (width == 0) return nullptr;
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
