// The snapshot file's constants and its varint and frame encoding (docs/snapshot-format.md).
// Private to the snapshot layer.
#ifndef KVINDEX_SRC_SNAPSHOT_FORMAT_H_
#define KVINDEX_SRC_SNAPSHOT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kvindex::snapshot_internal {

// `\x89KVSNP\r\n`, then the version (u32 LE) and 4 zero bytes.
inline constexpr char kMagic[8] = {'\x89', 'K', 'V', 'S', 'N', 'P', '\r', '\n'};
inline constexpr size_t kHeaderBytes = 16;
// A frame: kind (1 byte), payload length (u32 LE), payload, XXH3-64 of kind and payload (u64 LE).
inline constexpr size_t kFrameHead = 5;
inline constexpr size_t kFrameTail = 8;
inline constexpr size_t kMaxFramePayload = size_t{16} << 20;
// The writer closes a block or engine frame once its payload passes this.
inline constexpr size_t kFrameTarget = size_t{4} << 20;

// Frame kinds, in the order they appear (a reader refuses a kind that goes back).
enum class Kind : uint8_t {
  kMeta = 'M',
  kSource = 'S',
  kHolders = 'H',
  kScopes = 'C',
  kTiers = 'T',
  kBlocks = 'B',
  kEngine = 'E',
  kOrder = 'L',
  kInstance = 'I',
  kEnd = 'Z',
};
inline int KindOrder(uint8_t k) {
  switch (static_cast<Kind>(k)) {
    case Kind::kMeta: return 0;
    case Kind::kSource: return 1;
    case Kind::kHolders: return 2;
    case Kind::kScopes: return 3;
    case Kind::kTiers: return 4;
    case Kind::kBlocks: return 5;
    case Kind::kEngine: return 6;
    case Kind::kOrder: return 7;
    case Kind::kInstance: return 8;
    case Kind::kEnd: return 9;
  }
  return -1;
}

inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline void PutU64(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 8);
}
inline void PutString(std::string& out, std::string_view s) {
  PutVarint(out, s.size());
  out.append(s);
}
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}
inline uint64_t LoadU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads a frame payload; every read checks the bounds and sets `bad` instead of overrunning.
class Cursor {
 public:
  explicit Cursor(std::string_view payload)
      : p_(reinterpret_cast<const unsigned char*>(payload.data())),
        end_(p_ + payload.size()) {}
  bool bad() const { return bad_; }
  bool done() const { return p_ == end_; }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) break;
      const unsigned char b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    bad_ = true;
    p_ = end_;
    return 0;
  }
  uint64_t U64() {
    if (end_ - p_ < 8) {
      bad_ = true;
      p_ = end_;
      return 0;
    }
    const uint64_t v = LoadU64(p_);
    p_ += 8;
    return v;
  }
  std::string_view String() {
    const uint64_t n = Varint();
    if (bad_ || n > static_cast<uint64_t>(end_ - p_)) {
      bad_ = true;
      p_ = end_;
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  uint8_t Byte() {
    if (p_ == end_) {
      bad_ = true;
      return 0;
    }
    return *p_++;
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
  bool bad_ = false;
};

}  // namespace kvindex::snapshot_internal

#endif  // KVINDEX_SRC_SNAPSHOT_FORMAT_H_
