// A small bounds-checked msgpack reader (private to libindex): reads one value at a time from a
// byte span without building an object tree, so the event decoder can fill EventBatch directly.
//
// Every read checks the remaining length first; nothing reads past `end`. Reads that fail leave
// the position unchanged and return false; the caller builds the error message (it knows the
// field) from offset() and TypeName(). Containers announce their element count; ReadArray/ReadMap
// reject counts that cannot fit in the remaining bytes (each element takes at least one byte),
// which stops "huge length" headers before any allocation.
//
// Thread safety: one Reader per thread; it borrows the bytes.
#ifndef KVINDEX_SRC_MSGPACK_READER_H_
#define KVINDEX_SRC_MSGPACK_READER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace kvindex::msgpack_reader {

enum class Type : uint8_t { kNil, kBool, kUint, kNegInt, kFloat, kStr, kBin, kArray, kMap, kExt,
                            kInvalid, kEnd };

inline const char* TypeName(Type t) {
  switch (t) {
    case Type::kNil: return "nil";
    case Type::kBool: return "bool";
    case Type::kUint: return "int";
    case Type::kNegInt: return "int";
    case Type::kFloat: return "float";
    case Type::kStr: return "str";
    case Type::kBin: return "bin";
    case Type::kArray: return "array";
    case Type::kMap: return "map";
    case Type::kExt: return "ext";
    case Type::kInvalid: return "reserved byte 0xc1";
    case Type::kEnd: return "end of input";
  }
  return "?";
}

// Why SkipValue() failed.
enum class SkipError : uint8_t { kNone, kTruncated, kTooDeep, kInvalid };

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : base_(data), p_(data), end_(data + size) {}

  size_t offset() const { return static_cast<size_t>(p_ - base_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ >= end_; }
  const uint8_t* position() const { return p_; }
  void set_position(const uint8_t* p) { p_ = p; }

  Type PeekType() const {
    if (p_ >= end_) return Type::kEnd;
    const uint8_t b = *p_;
    if (b <= 0x7f) return Type::kUint;
    if (b <= 0x8f) return Type::kMap;
    if (b <= 0x9f) return Type::kArray;
    if (b <= 0xbf) return Type::kStr;
    if (b >= 0xe0) return Type::kNegInt;
    switch (b) {
      case 0xc0: return Type::kNil;
      case 0xc1: return Type::kInvalid;
      case 0xc2: case 0xc3: return Type::kBool;
      case 0xc4: case 0xc5: case 0xc6: return Type::kBin;
      case 0xc7: case 0xc8: case 0xc9: return Type::kExt;
      case 0xca: case 0xcb: return Type::kFloat;
      case 0xcc: case 0xcd: case 0xce: case 0xcf: return Type::kUint;
      case 0xd0: case 0xd1: case 0xd2: case 0xd3: return Type::kNegInt;  // signed, any sign
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return Type::kExt;
      case 0xd9: case 0xda: case 0xdb: return Type::kStr;
      case 0xdc: case 0xdd: return Type::kArray;
      default: return Type::kMap;  // 0xde, 0xdf
    }
  }

  bool TryNil() {
    if (p_ < end_ && *p_ == 0xc0) {
      ++p_;
      return true;
    }
    return false;
  }

  // Reads an array header; false (position unchanged) when the value is not an array, is
  // truncated, or announces more elements than bytes remain.
  bool ReadArray(uint32_t& n) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    size_t head;
    if ((b & 0xf0) == 0x90) {
      n = b & 0x0f;
      head = 1;
    } else if (b == 0xdc) {
      if (remaining() < 3) return false;
      n = Be16(p_ + 1);
      head = 3;
    } else if (b == 0xdd) {
      if (remaining() < 5) return false;
      n = Be32(p_ + 1);
      head = 5;
    } else {
      return false;
    }
    if (n > remaining() - head) return false;
    p_ += head;
    return true;
  }

  bool ReadMap(uint32_t& n) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    size_t head;
    if ((b & 0xf0) == 0x80) {
      n = b & 0x0f;
      head = 1;
    } else if (b == 0xde) {
      if (remaining() < 3) return false;
      n = Be16(p_ + 1);
      head = 3;
    } else if (b == 0xdf) {
      if (remaining() < 5) return false;
      n = Be32(p_ + 1);
      head = 5;
    } else {
      return false;
    }
    if (uint64_t{n} * 2 > remaining() - head) return false;
    p_ += head;
    return true;
  }

  // True when the value at the position is an array/map header announcing more elements than
  // the remaining bytes can hold (to tell "huge length" from "wrong type").
  bool ContainerTooLong() const {
    Reader copy = *this;
    uint32_t n;
    if (PeekType() == Type::kArray) return !copy.ReadArray(n);
    if (PeekType() == Type::kMap) return !copy.ReadMap(n);
    return false;
  }

  bool ReadStr(std::string_view& s) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    size_t head, len;
    if ((b & 0xe0) == 0xa0) {
      len = b & 0x1f;
      head = 1;
    } else if (b == 0xd9) {
      if (remaining() < 2) return false;
      len = p_[1];
      head = 2;
    } else if (b == 0xda) {
      if (remaining() < 3) return false;
      len = Be16(p_ + 1);
      head = 3;
    } else if (b == 0xdb) {
      if (remaining() < 5) return false;
      len = Be32(p_ + 1);
      head = 5;
    } else {
      return false;
    }
    if (len > remaining() - head) return false;
    s = std::string_view(reinterpret_cast<const char*>(p_ + head), len);
    p_ += head + len;
    return true;
  }

  bool ReadBin(std::span<const uint8_t>& bytes) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    size_t head, len;
    if (b == 0xc4) {
      if (remaining() < 2) return false;
      len = p_[1];
      head = 2;
    } else if (b == 0xc5) {
      if (remaining() < 3) return false;
      len = Be16(p_ + 1);
      head = 3;
    } else if (b == 0xc6) {
      if (remaining() < 5) return false;
      len = Be32(p_ + 1);
      head = 5;
    } else {
      return false;
    }
    if (len > remaining() - head) return false;
    bytes = std::span<const uint8_t>(p_ + head, len);
    p_ += head + len;
    return true;
  }

  // Reads any msgpack integer as its 64-bit two's complement bit pattern; `negative` tells whether
  // the value is below zero. False when the value is not an integer or is truncated.
  bool ReadInt(uint64_t& bits, bool& negative) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    if (b <= 0x7f) {
      bits = b;
      negative = false;
      ++p_;
      return true;
    }
    if (b >= 0xe0) {
      bits = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(b)));
      negative = true;
      ++p_;
      return true;
    }
    switch (b) {
      case 0xcc: return Fixed(2, [&] { bits = p_[1]; negative = false; });
      case 0xcd: return Fixed(3, [&] { bits = Be16(p_ + 1); negative = false; });
      case 0xce: return Fixed(5, [&] { bits = Be32(p_ + 1); negative = false; });
      case 0xcf: return Fixed(9, [&] { bits = Be64(p_ + 1); negative = false; });
      case 0xd0: return Fixed(2, [&] {
        const int64_t v = static_cast<int8_t>(p_[1]);
        bits = static_cast<uint64_t>(v);
        negative = v < 0;
      });
      case 0xd1: return Fixed(3, [&] {
        const int64_t v = static_cast<int16_t>(Be16(p_ + 1));
        bits = static_cast<uint64_t>(v);
        negative = v < 0;
      });
      case 0xd2: return Fixed(5, [&] {
        const int64_t v = static_cast<int32_t>(Be32(p_ + 1));
        bits = static_cast<uint64_t>(v);
        negative = v < 0;
      });
      case 0xd3: return Fixed(9, [&] {
        bits = Be64(p_ + 1);
        negative = static_cast<int64_t>(bits) < 0;
      });
      default: return false;
    }
  }

  bool ReadFloat(double& value) {
    if (p_ >= end_) return false;
    if (*p_ == 0xcb) {
      if (remaining() < 9) return false;
      const uint64_t bits = Be64(p_ + 1);
      std::memcpy(&value, &bits, 8);
      p_ += 9;
      return true;
    }
    if (*p_ == 0xca) {
      if (remaining() < 5) return false;
      const uint32_t bits = Be32(p_ + 1);
      float f;
      std::memcpy(&f, &bits, 4);
      value = f;
      p_ += 5;
      return true;
    }
    return false;
  }

  // Skips one complete value (containers included). `depth` is the nesting of the value's parent;
  // a container deeper than `max_depth` fails with kTooDeep. On failure the position is where the
  // problem was found (for the error's byte offset).
  SkipError SkipValue(int depth, int max_depth) {
    uint64_t stack[64];
    int top = 0;
    stack[0] = 1;
    while (true) {
      while (top >= 0 && stack[top] == 0) --top;
      if (top < 0) return SkipError::kNone;
      --stack[top];
      if (p_ >= end_) return SkipError::kTruncated;
      const uint8_t b = *p_;
      uint32_t n = 0;
      bool is_container = false;
      uint64_t count = 0;
      if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {
        if (!ReadArray(n)) return SkipError::kTruncated;
        is_container = true;
        count = n;
      } else if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) {
        if (!ReadMap(n)) return SkipError::kTruncated;
        is_container = true;
        count = uint64_t{n} * 2;
      } else {
        const size_t size = ScalarSize();
        if (size == 0) return b == 0xc1 ? SkipError::kInvalid : SkipError::kTruncated;
        p_ += size;
      }
      if (is_container) {
        if (depth + top + 1 > max_depth) return SkipError::kTooDeep;
        stack[++top] = count;
      }
    }
  }

 private:
  template <typename F>
  bool Fixed(size_t size, F&& f) {
    if (remaining() < size) return false;
    f();
    p_ += size;
    return true;
  }

  // The size in bytes of the scalar at the position, or 0 when it is truncated or invalid.
  size_t ScalarSize() const {
    const uint8_t b = *p_;
    const size_t rem = remaining();
    size_t size = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      size = 1;
    } else if ((b & 0xe0) == 0xa0) {
      size = 1 + (b & 0x1f);
    } else {
      switch (b) {
        case 0xcc: case 0xd0: size = 2; break;
        case 0xcd: case 0xd1: size = 3; break;
        case 0xce: case 0xd2: case 0xca: size = 5; break;
        case 0xcf: case 0xd3: case 0xcb: size = 9; break;
        case 0xd4: size = 3; break;
        case 0xd5: size = 4; break;
        case 0xd6: size = 6; break;
        case 0xd7: size = 10; break;
        case 0xd8: size = 18; break;
        case 0xc4: case 0xd9:
          if (rem < 2) return 0;
          size = 2 + size_t{p_[1]};
          break;
        case 0xc5: case 0xda:
          if (rem < 3) return 0;
          size = 3 + size_t{Be16(p_ + 1)};
          break;
        case 0xc6: case 0xdb:
          if (rem < 5) return 0;
          size = 5 + size_t{Be32(p_ + 1)};
          break;
        case 0xc7:
          if (rem < 3) return 0;
          size = 3 + size_t{p_[1]};
          break;
        case 0xc8:
          if (rem < 4) return 0;
          size = 4 + size_t{Be16(p_ + 1)};
          break;
        case 0xc9:
          if (rem < 6) return 0;
          size = 6 + size_t{Be32(p_ + 1)};
          break;
        default: return 0;  // 0xc1
      }
    }
    return size <= rem ? size : 0;
  }

 public:
  static uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
  static uint32_t Be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  }
  static uint64_t Be64(const uint8_t* p) {
    return (uint64_t{Be32(p)} << 32) | Be32(p + 4);
  }

 private:
  const uint8_t* base_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace kvindex::msgpack_reader

#endif  // KVINDEX_SRC_MSGPACK_READER_H_
