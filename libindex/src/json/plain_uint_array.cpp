// The text-level helpers of the JSON reader (plain_uint_array.h), the wide id scan and
// JsonTooDeepAtFast.
#include "plain_uint_array.h"

#include <atomic>
#include <string_view>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVINDEX_WIDE_ID_SCAN 1
#include <immintrin.h>
#endif

#include "kvindex/core/json_depth.h"
#include "kvindex/json/json_reader.h"

namespace kvindex {
namespace json_detail {

#ifdef KVINDEX_WIDE_ID_SCAN

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which its
// -Wmaybe-uninitialized reports once inlined (GCC PR 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

#define KVINDEX_WIDE_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,popcnt")))

constexpr uint64_t LowBits(unsigned n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

// One 64-byte block from `p` (at most `left` bytes of the array; `first`: the array's first
// element starts at p, else p is the byte after an element). Writes the elements that end in the
// block to `out`; returns how many and sets *advance to where the next block starts (the byte
// after the last of them), or returns -1.
//
// Masks per byte: D digits, C commas, W whitespace. An element starts where a digit follows a
// non-digit (S) and ends at the first non-digit after it (E; the array's end counts when its last
// byte is a digit). The elements that end in the block are read: before the last such end, every
// byte must be a digit, a comma or whitespace, the starts and commas must alternate (comma first
// after the first block) and no element may start with '0' followed by a digit or have more than
// 8 digits. Then each element's last 8 bytes (its digits, the bytes before them zeroed) are
// gathered into a 64-bit lane, 8 elements per register, and converted at once: pairs of digits
// (x10 + 1), pairs of those (x100 + 1), then the upper half x10000 + the lower.
KVINDEX_WIDE_TARGET long WideBlock(const char* p, size_t left, bool first, uint64_t* out,
                                   size_t* advance) {
  const __mmask64 range = LowBits(static_cast<unsigned>(left < 64 ? left : 64));
  const __m512i b = _mm512_maskz_loadu_epi8(range, p);
  const __mmask64 digits = _mm512_cmpge_epu8_mask(b, _mm512_set1_epi8('0')) &
                           _mm512_cmple_epu8_mask(b, _mm512_set1_epi8('9')) & range;
  const __mmask64 commas = _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(',')) & range;
  const __mmask64 spaces = (_mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(' ')) |
                            _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8('\n')) |
                            _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8('\r')) |
                            _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8('\t'))) &
                           range;
  const __mmask64 starts = digits & ~(digits << 1);
  __mmask64 ends = ~digits & (digits << 1) & range;
  // The array's last element ends at `left`; at 64 (beyond the mask) it is left to the next block.
  if (left < 64 && left > 0 && (digits >> (left - 1) & 1) != 0) ends |= uint64_t{1} << left;
  if (ends == 0) return -1;
  const unsigned last_end = 63 - static_cast<unsigned>(std::countl_zero(ends));
  const __mmask64 before = LowBits(last_end);  // the bytes before the last end
  if ((before & ~(digits | commas | spaces)) != 0) return -1;
  const __mmask64 read_starts = starts & before;
  const auto n = static_cast<unsigned>(std::popcount(ends));
  if (static_cast<unsigned>(std::popcount(read_starts)) != n) return -1;
  // Starts (1) and commas (2) in text order: S C S C ... S in the first block, C S C S ... S after.
  const __mmask64 marks = (read_starts | commas) & before;
  const auto marked = static_cast<unsigned>(std::popcount(marks));
  if (marked != (first ? 2 * n - 1 : 2 * n)) return -1;
  const __m512i kinds =
      _mm512_mask_blend_epi8(read_starts, _mm512_set1_epi8(2), _mm512_set1_epi8(1));
  const __m512i order = _mm512_maskz_compress_epi8(marks, kinds);
  const __m512i alternate = _mm512_set1_epi16(first ? 0x0201 : 0x0102);
  if ((_mm512_cmpeq_epi8_mask(order, alternate) & LowBits(marked)) != LowBits(marked)) return -1;
  if ((_mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8('0')) & read_starts & (digits >> 1)) != 0) {
    return -1;  // a leading zero
  }
  const __m512i iota = _mm512_set_epi8(
      63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
      40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
      17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i start_at = _mm512_maskz_compress_epi8(read_starts, iota);
  const __m512i end_at = _mm512_maskz_compress_epi8(ends, iota);
  const __m512i widths = _mm512_sub_epi8(end_at, start_at);
  if (_mm512_mask_cmpgt_epu8_mask(LowBits(n), widths, _mm512_set1_epi8(8)) != 0) return -1;
  const __m512i lane = _mm512_set_epi64(0x0707070707070707, 0x0606060606060606, 0x0505050505050505,
                                        0x0404040404040404, 0x0303030303030303, 0x0202020202020202,
                                        0x0101010101010101, 0);
  const __m512i back8 = _mm512_set1_epi64(static_cast<int64_t>(0xFFFEFDFCFBFAF9F8ULL));  // -8..-1
  const __m512i byte_no = _mm512_set1_epi64(0x0706050403020100);
  for (unsigned c = 0; c < n; c += 8) {
    const __m512i pick = _mm512_add_epi8(lane, _mm512_set1_epi8(static_cast<char>(c)));
    const __m512i end8 = _mm512_permutexvar_epi8(pick, end_at);
    const __m512i width8 = _mm512_permutexvar_epi8(pick, widths);
    // byte k of a lane: the element's byte end - 8 + k, kept when k >= 8 - width
    const __mmask64 keep =
        _mm512_cmpge_epu8_mask(_mm512_add_epi8(width8, byte_no), _mm512_set1_epi8(8));
    const __m512i gathered = _mm512_permutexvar_epi8(_mm512_add_epi8(end8, back8), b);
    const __m512i values = _mm512_maskz_sub_epi8(keep, gathered, _mm512_set1_epi8('0'));
    const __m512i pairs = _mm512_maddubs_epi16(values, _mm512_set1_epi16(0x010A));
    const __m512i quads = _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x00010064));
    const __m512i ids = _mm512_add_epi64(_mm512_mul_epu32(quads, _mm512_set1_epi64(10000)),
                                         _mm512_srli_epi64(quads, 32));
    const unsigned m = n - c < 8 ? n - c : 8;
    _mm512_mask_storeu_epi64(out + c, static_cast<__mmask8>(LowBits(m)), ids);
  }
  *advance = last_end;
  return n;
}

bool CpuHasWideScan() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
         __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("popcnt");
}

}  // namespace

bool WideIdScanAvailable() {
  static const bool available = CpuHasWideScan();
  return available;
}

long ScanPlainIdsWide(const char* first, const char* last, uint64_t max, uint64_t* out) {
  if (max < kWideIdScanMinMax || !WideIdScanAvailable() || first >= last) return -1;
  long count = 0;
  for (const char* p = first; p < last;) {
    size_t advance = 0;
    const long n = WideBlock(p, static_cast<size_t>(last - p), p == first, out + count, &advance);
    if (n < 0) return -1;
    count += n;
    p += advance;
  }
  return count;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // no wide scan on this target

bool WideIdScanAvailable() { return false; }
long ScanPlainIdsWide(const char*, const char*, uint64_t, uint64_t*) { return -1; }

#endif

namespace {
std::atomic<bool> wide_scan_enabled{true};
}  // namespace

bool WideIdScanEnabled() {
  return wide_scan_enabled.load(std::memory_order_relaxed) && WideIdScanAvailable();
}

void SetWideIdScan(bool enabled) { wide_scan_enabled.store(enabled, std::memory_order_relaxed); }

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

bool JsonWideIdScanAvailable() { return json_detail::WideIdScanAvailable(); }
void SetJsonWideIdScan(bool enabled) { json_detail::SetWideIdScan(enabled); }

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
