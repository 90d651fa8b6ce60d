// Writer, what the event encoders write msgpack through: msgpack-cxx's packer over PayloadBuffer,
// a growable view of the caller's output vector. msgpack::packer makes the choices msgspec (the
// encoder of vLLM and SGLang) makes: the narrowest integer form (non-negative values always
// unsigned), str8 for 32..255-byte strings, bin8/16/32 by length, array16/map16 from 16
// elements. The one exception is floats: msgpack::packer writes a whole-number double as an int,
// while msgspec always writes float64, so Float64() writes the 9 bytes itself.
//
// Thread safety: one Writer per thread; it appends to a borrowed vector for its whole life.
#ifndef KVINDEX_SRC_CODEC_EVENT_PACKER_H_
#define KVINDEX_SRC_CODEC_EVENT_PACKER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include <msgpack/pack.hpp>

namespace kvindex::codec_internal {

// The output stream msgpack::packer writes to (any type with write(const char*, size_t)): bytes
// go straight into the caller's vector, which grows geometrically and is trimmed by Finish().
class PayloadBuffer {
 public:
  // Writes from the current end of `out`.
  explicit PayloadBuffer(std::vector<std::byte>& out) : out_(out), used_(out.size()) { Bind(); }

  // msgpack::packer's sink. Inline, so the packer's fixed-size writes become plain stores.
  void write(const char* data, size_t n) {
    Ensure(n);
    if (n != 0) std::memcpy(cur_, data, n);
    cur_ += n;
  }

  // Makes room for `extra` more bytes up front (one allocation for a whole payload).
  void Ensure(size_t extra) {
    if (static_cast<size_t>(lim_ - cur_) < extra) Grow(extra);
  }

  // Trims the vector to the bytes written.
  void Finish() { out_.resize(static_cast<size_t>(cur_ - Base())); }

 private:
  char* Base() { return reinterpret_cast<char*>(out_.data()); }
  // Out of line, so that the callers flattened for speed (event_writer.h) keep only the check.
  [[gnu::noinline]] void Grow(size_t extra) {
    used_ = static_cast<size_t>(cur_ - Base());
    out_.resize(std::max(out_.size() * 2, used_ + extra + 64));
    Bind();
  }
  void Bind() {
    cur_ = Base() + used_;
    lim_ = Base() + out_.size();
  }

  std::vector<std::byte>& out_;
  size_t used_;
  char* cur_ = nullptr;
  char* lim_ = nullptr;
};

class Writer {
 public:
  // Writes from the current end of `out`; call Finish() to trim `out` to what was written.
  explicit Writer(std::vector<std::byte>& out) : buf_(out), pk_(buf_) {}

  void Nil() { pk_.pack_nil(); }
  void Bool(bool v) {
    if (v) {
      pk_.pack_true();
    } else {
      pk_.pack_false();
    }
  }
  void Uint(uint64_t v) { pk_.pack_uint64(v); }
  void Int(int64_t v) { pk_.pack_int64(v); }
  void Float64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    char b[9];
    b[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    buf_.write(b, 9);
  }
  void Str(std::string_view s) {
    const auto n = static_cast<uint32_t>(s.size());
    pk_.pack_str(n);
    pk_.pack_str_body(s.data(), n);
  }
  void Bin(std::span<const uint8_t> b) {
    const auto n = static_cast<uint32_t>(b.size());
    pk_.pack_bin(n);
    pk_.pack_bin_body(reinterpret_cast<const char*>(b.data()), n);
  }
  void Array(size_t n) { pk_.pack_array(static_cast<uint32_t>(n)); }
  void Map(size_t n) { pk_.pack_map(static_cast<uint32_t>(n)); }

  // Makes room for `extra` more bytes up front.
  void Reserve(size_t extra) { buf_.Ensure(extra); }
  // Trims the vector to the bytes written.
  void Finish() { buf_.Finish(); }

 private:
  PayloadBuffer buf_;
  msgpack::packer<PayloadBuffer> pk_;
};

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_EVENT_PACKER_H_
