// A small msgpack writer (private to libindex) that makes the same choices as msgspec, the encoder
// of vLLM and SGLang: the narrowest integer form (non-negative values always unsigned), float64
// for floats, str8 for 32..255-byte strings, array16/map16 from 16 elements.
//
// Thread safety: one Writer per thread; it appends to a borrowed vector.
#ifndef KVINDEX_SRC_MSGPACK_WRITER_H_
#define KVINDEX_SRC_MSGPACK_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace kvindex::msgpack_writer {

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}

  void Nil() { Put(0xc0); }
  void Bool(bool v) { Put(v ? 0xc3 : 0xc2); }

  void Uint(uint64_t v) {
    if (v < 0x80) {
      Put(static_cast<uint8_t>(v));
    } else if (v <= 0xff) {
      Put(0xcc);
      Put(static_cast<uint8_t>(v));
    } else if (v <= 0xffff) {
      Put(0xcd);
      Be(v, 2);
    } else if (v <= 0xffffffffu) {
      Put(0xce);
      Be(v, 4);
    } else {
      Put(0xcf);
      Be(v, 8);
    }
  }

  void Int(int64_t v) {
    if (v >= 0) {
      Uint(static_cast<uint64_t>(v));
    } else if (v >= -32) {
      Put(static_cast<uint8_t>(static_cast<int8_t>(v)));
    } else if (v >= -128) {
      Put(0xd0);
      Be(static_cast<uint64_t>(v), 1);
    } else if (v >= -32768) {
      Put(0xd1);
      Be(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN) {
      Put(0xd2);
      Be(static_cast<uint64_t>(v), 4);
    } else {
      Put(0xd3);
      Be(static_cast<uint64_t>(v), 8);
    }
  }

  void Float64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    Put(0xcb);
    Be(bits, 8);
  }

  void Str(std::string_view s) {
    const size_t n = s.size();
    if (n < 32) {
      Put(static_cast<uint8_t>(0xa0 | n));
    } else if (n <= 0xff) {
      Put(0xd9);
      Put(static_cast<uint8_t>(n));
    } else if (n <= 0xffff) {
      Put(0xda);
      Be(n, 2);
    } else {
      Put(0xdb);
      Be(n, 4);
    }
    Raw(s.data(), n);
  }

  void Bin(std::span<const uint8_t> b) {
    const size_t n = b.size();
    if (n <= 0xff) {
      Put(0xc4);
      Put(static_cast<uint8_t>(n));
    } else if (n <= 0xffff) {
      Put(0xc5);
      Be(n, 2);
    } else {
      Put(0xc6);
      Be(n, 4);
    }
    Raw(b.data(), n);
  }

  void Array(size_t n) {
    if (n < 16) {
      Put(static_cast<uint8_t>(0x90 | n));
    } else if (n <= 0xffff) {
      Put(0xdc);
      Be(n, 2);
    } else {
      Put(0xdd);
      Be(n, 4);
    }
  }

  void Map(size_t n) {
    if (n < 16) {
      Put(static_cast<uint8_t>(0x80 | n));
    } else if (n <= 0xffff) {
      Put(0xde);
      Be(n, 2);
    } else {
      Put(0xdf);
      Be(n, 4);
    }
  }

  void Reserve(size_t extra) { out_.reserve(out_.size() + extra); }

 private:
  void Put(uint8_t b) { out_.push_back(static_cast<std::byte>(b)); }
  void Be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) Put(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Raw(const void* data, size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), p, p + n);
  }

  std::vector<std::byte>& out_;
};

}  // namespace kvindex::msgpack_writer

#endif  // KVINDEX_SRC_MSGPACK_WRITER_H_
