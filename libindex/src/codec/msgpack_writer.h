// A small msgpack writer (private to libindex) that makes the same choices as msgspec, the encoder
// of vLLM and SGLang: the narrowest integer form (non-negative values always unsigned), float64
// for floats, str8 for 32..255-byte strings, array16/map16 from 16 elements.
//
// Thread safety: one Writer per thread; it appends to a borrowed vector.
#ifndef KVINDEX_SRC_MSGPACK_WRITER_H_
#define KVINDEX_SRC_MSGPACK_WRITER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace kvindex::msgpack_writer {

class Writer {
 public:
  // Writes from the current end of `out`; call Finish() to trim `out` to what was written.
  explicit Writer(std::vector<std::byte>& out) : out_(out), used_(out.size()) { Bind(); }

  void Nil() { Put1(0xc0); }
  void Bool(bool v) { Put1(v ? 0xc3 : 0xc2); }

  void Uint(uint64_t v) {
    Ensure(9);
    uint8_t* p = cur_;  // a local cursor: stores through uint8_t* could alias the members
    if (v < 0x80) {
      *p++ = static_cast<uint8_t>(v);
    } else if (v <= 0xff) {
      *p++ = 0xcc;
      *p++ = static_cast<uint8_t>(v);
    } else if (v <= 0xffff) {
      *p++ = 0xcd;
      p = Be(p, v, 2);
    } else if (v <= 0xffffffffu) {
      *p++ = 0xce;
      p = Be(p, v, 4);
    } else {
      *p++ = 0xcf;
      p = Be(p, v, 8);
    }
    cur_ = p;
  }

  void Int(int64_t v) {
    if (v >= 0) {
      Uint(static_cast<uint64_t>(v));
      return;
    }
    Ensure(9);
    uint8_t* p = cur_;
    const uint64_t bits = static_cast<uint64_t>(v);
    if (v >= -32) {
      *p++ = static_cast<uint8_t>(bits);
    } else if (v >= -128) {
      *p++ = 0xd0;
      p = Be(p, bits, 1);
    } else if (v >= -32768) {
      *p++ = 0xd1;
      p = Be(p, bits, 2);
    } else if (v >= INT32_MIN) {
      *p++ = 0xd2;
      p = Be(p, bits, 4);
    } else {
      *p++ = 0xd3;
      p = Be(p, bits, 8);
    }
    cur_ = p;
  }

  void Float64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    Ensure(9);
    uint8_t* p = cur_;
    *p++ = 0xcb;
    cur_ = Be(p, bits, 8);
  }

  void Str(std::string_view s) {
    const size_t n = s.size();
    if (n < 32) {
      Head(static_cast<uint8_t>(0xa0 | n), 0, 0, n);
    } else if (n <= 0xff) {
      Head(0xd9, n, 1, n);
    } else if (n <= 0xffff) {
      Head(0xda, n, 2, n);
    } else {
      Head(0xdb, n, 4, n);
    }
    Raw(s.data(), n);
  }

  void Bin(std::span<const uint8_t> b) {
    const size_t n = b.size();
    if (n <= 0xff) {
      Head(0xc4, n, 1, n);
    } else if (n <= 0xffff) {
      Head(0xc5, n, 2, n);
    } else {
      Head(0xc6, n, 4, n);
    }
    Raw(b.data(), n);
  }

  void Array(size_t n) { Container(n, 0x90, 0xdc); }
  void Map(size_t n) { Container(n, 0x80, 0xde); }

  // Makes room for `extra` more bytes up front (one allocation for a whole payload).
  void Reserve(size_t extra) { Ensure(extra); }

  // Trims the vector to the bytes written.
  void Finish() { out_.resize(static_cast<size_t>(cur_ - Base())); }

 private:
  uint8_t* Base() { return reinterpret_cast<uint8_t*>(out_.data()); }
  void Bind() {
    cur_ = Base() + used_;
    lim_ = Base() + out_.size();
  }
  void Ensure(size_t n) {
    if (static_cast<size_t>(lim_ - cur_) >= n) return;
    used_ = static_cast<size_t>(cur_ - Base());
    out_.resize(std::max(out_.size() * 2, used_ + n + 64));
    Bind();
  }
  void Put1(uint8_t b) {
    Ensure(1);
    *cur_++ = b;
  }
  // A type byte, then `bytes` bytes of `len` big-endian; room for `payload` more bytes.
  void Head(uint8_t type, size_t len, int bytes, size_t payload) {
    Ensure(5 + payload);
    uint8_t* p = cur_;
    *p++ = type;
    cur_ = Be(p, len, bytes);
  }
  void Container(size_t n, uint8_t fix, uint8_t wide16) {
    if (n < 16) {
      Put1(static_cast<uint8_t>(fix | n));
    } else if (n <= 0xffff) {
      Head(wide16, n, 2, 0);
    } else {
      Head(static_cast<uint8_t>(wide16 + 1), n, 4, 0);
    }
  }
  static uint8_t* Be(uint8_t* p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) *p++ = static_cast<uint8_t>(v >> (8 * i));
    return p;
  }
  void Raw(const void* data, size_t n) {  // room ensured by Head()
    if (n != 0) std::memcpy(cur_, data, n);
    cur_ += n;
  }

  std::vector<std::byte>& out_;
  size_t used_;
  uint8_t* cur_ = nullptr;
  uint8_t* lim_ = nullptr;
};

}  // namespace kvindex::msgpack_writer

#endif  // KVINDEX_SRC_MSGPACK_WRITER_H_
