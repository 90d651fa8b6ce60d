// TokenReader, the decoder's view of a payload (private to the codec layer): a pull reader over
// msgpack-cxx's visitor parse. Each read hands one value (a scalar, or a container's header with
// its element count) to msgpack-cxx's parser, whose visitor stops at the first token, so the
// decoder fills EventBatch straight from the bytes, without a msgpack object tree. SkipValue()
// runs one parse over the whole value, the depth limit in the visitor.
//
// Containers announce their element count to the visitor before msgpack-cxx stores anything;
// ReadArray/ReadMap reject counts that cannot fit in the remaining bytes (each element takes at
// least one byte), which stops "huge length" headers before any allocation. Reads that fail
// leave the position unchanged and return false; the caller builds the error message (it knows
// the field) from offset() and PeekType().
//
// What msgpack-cxx's parser costs per value (some 60 instructions) is several times what the
// decoder does with most values, so the hot cases are taken in place and everything else goes to
// msgpack-cxx: nil and positive fixints (one byte each), and in the two hot lists the integer
// encodings msgspec writes (token ids: fixint, uint8/16/32; hashes: uint64, int64). The parser
// context is one per thread (building one allocates its container stack).
//
// msgpack-cxx's parse throws only for ext sizes a 32-bit size_t cannot hold; the visitors here
// never throw, and DecodeEventBatchInto() still catches at the codec's boundary.
//
// Thread safety: a TokenReader belongs to one thread and borrows the bytes for its whole life;
// readers on one thread share that thread's parser context one call at a time.
#ifndef KVINDEX_SRC_CODEC_TOKEN_READER_H_
#define KVINDEX_SRC_CODEC_TOKEN_READER_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

// (unpack.hpp first: parse.hpp uses its loaders.)
#include <msgpack/null_visitor.hpp>
#include <msgpack/parse.hpp>
#include <msgpack/unpack.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"

#include "hash_value.h"

namespace kvindex::codec_internal {

enum class Type : uint8_t {
  kNil,
  kBool,
  kUint,
  kNegInt,
  kFloat,
  kStr,
  kBin,
  kArray,
  kMap,
  kExt,
  kInvalid,
  kEnd
};

inline const char* TypeName(Type t) {
  switch (t) {
    case Type::kNil:
      return "nil";
    case Type::kBool:
      return "bool";
    case Type::kUint:
      return "int";
    case Type::kNegInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kStr:
      return "str";
    case Type::kBin:
      return "bin";
    case Type::kArray:
      return "array";
    case Type::kMap:
      return "map";
    case Type::kExt:
      return "ext";
    case Type::kInvalid:
      return "reserved byte 0xc1";
    case Type::kEnd:
      return "end of input";
  }
  return "?";
}

// Why SkipValue() failed.
enum class SkipError : uint8_t { kNone, kTruncated, kTooDeep, kInvalid };

// The msgpack-cxx visitor behind TokenReader. One class with a mode (rather than one visitor per
// job) so that one parser context serves every read of a payload. The callbacks are forced
// inline: msgpack-cxx's parse loop is too large for the compiler to inline them on its own.
#define KVINDEX_VISIT [[gnu::always_inline]] inline
class TokenVisitor : public msgpack::null_visitor {
 public:
  enum class Mode : uint8_t { kToken, kSkip };

  // The last token (kToken mode).
  struct Token {
    Type type = Type::kEnd;
    bool negative = false;
    uint64_t bits = 0;  // ints (two's complement), container counts, str/bin/ext sizes
    double real = 0;
    const char* data = nullptr;  // str/bin/ext bytes (in the payload)
  };

  Mode mode = Mode::kToken;
  Token* token = nullptr;  // where kToken mode writes (the reader's kept token)
  Token scratch;           // where kSkip mode's scalars go
  // kSkip: the nesting level of the value's parent, the limit, and whether it was exceeded.
  int level = 0;
  int max_level = 0;
  bool too_deep = false;
  bool invalid = false;  // a reserved byte (0xc1) was met

  void init() {}

  KVINDEX_VISIT bool visit_nil() { return Scalar(Type::kNil, 0, false); }
  KVINDEX_VISIT bool visit_boolean(bool v) { return Scalar(Type::kBool, v ? 1 : 0, false); }
  KVINDEX_VISIT bool visit_positive_integer(uint64_t v) { return Scalar(Type::kUint, v, false); }
  // msgpack-cxx calls this for every signed encoding (0xd0..0xd3 and negative fixints), whatever
  // the sign of the value.
  KVINDEX_VISIT bool visit_negative_integer(int64_t v) {
    return Scalar(Type::kNegInt, static_cast<uint64_t>(v), v < 0);
  }
  KVINDEX_VISIT bool visit_float32(float v) { return visit_float64(v); }
  KVINDEX_VISIT bool visit_float64(double v) {
    token->real = v;
    return Scalar(Type::kFloat, 0, false);
  }
  KVINDEX_VISIT bool visit_str(const char* v, uint32_t size) { return Bytes(Type::kStr, v, size); }
  KVINDEX_VISIT bool visit_bin(const char* v, uint32_t size) { return Bytes(Type::kBin, v, size); }
  KVINDEX_VISIT bool visit_ext(const char* v, uint32_t size) { return Bytes(Type::kExt, v, size); }

  // kToken stops at the header (the reader consumes only it); kSkip counts levels.
  KVINDEX_VISIT bool start_array(uint32_t n) { return Container(Type::kArray, n); }
  KVINDEX_VISIT bool start_map(uint32_t n) { return Container(Type::kMap, n); }
  KVINDEX_VISIT bool end_array() { return End(); }
  KVINDEX_VISIT bool end_map() { return End(); }

  void parse_error(size_t /*parsed_offset*/, size_t /*error_offset*/) { invalid = true; }
  void insufficient_bytes(size_t /*parsed_offset*/, size_t /*error_offset*/) {}

 private:
  KVINDEX_VISIT bool Scalar(Type t, uint64_t bits, bool negative) {
    token->type = t;
    token->bits = bits;
    token->negative = negative;
    return true;
  }
  KVINDEX_VISIT bool Bytes(Type t, const char* v, uint32_t size) {
    token->type = t;
    token->bits = size;
    token->data = v;
    return true;
  }
  KVINDEX_VISIT bool Container(Type t, uint32_t n) {
    if (mode == Mode::kToken) {
      token->type = t;
      token->bits = n;
      return false;
    }
    if (++level > max_level) {
      too_deep = true;
      return false;
    }
    return true;
  }
  KVINDEX_VISIT bool End() {
    --level;
    return true;
  }
};
#undef KVINDEX_VISIT

// msgpack-cxx's parser context, holding the visitor (what msgpack::parse() builds per call).
class TokenParser : public msgpack::v3::detail::context<TokenParser> {
 public:
  TokenVisitor& visitor() { return visitor_; }

 private:
  TokenVisitor visitor_;
};

class TokenReader {
 public:
  TokenReader(const uint8_t* data, size_t size)
      : base_(data), p_(data), end_(data + size), parser_(ThreadParser()) {}

  size_t offset() const { return static_cast<size_t>(p_ - base_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ >= end_; }
  // The byte at the position, 0xc1 (never valid msgpack) at the end of the input.
  uint8_t PeekByte() const { return p_ < end_ ? *p_ : 0xc1; }
  const uint8_t* position() const { return p_; }
  void set_position(const uint8_t* p) { p_ = p; }

  // The type of the value at the position (kEnd at the end of the input). A value cut short by
  // the end of the input still tells its type, for the error message.
  Type PeekType() { return Peek().type; }

  // (Nil is the one-byte 0xc0 that Peek() takes in place; checking the byte spares the call.)
  bool TryNil() {
    if (p_ >= end_ || *p_ != 0xc0) return false;
    ++p_;
    return true;
  }

  // Reads an array header; false (position unchanged) when the value is not an array, is
  // truncated, or announces more elements than bytes remain.
  bool ReadArray(uint32_t& n) { return ReadContainer(Type::kArray, 1, n); }
  bool ReadMap(uint32_t& n) { return ReadContainer(Type::kMap, 2, n); }

  // The element count an array or map header at the position announces, whether or not it fits.
  // False when the value there is not a complete container header.
  bool PeekCount(uint32_t& n) {
    const TokenVisitor::Token& t = Peek();
    if (!tok_complete_ || (t.type != Type::kArray && t.type != Type::kMap)) return false;
    n = static_cast<uint32_t>(t.bits);
    return true;
  }

  // True when the value at the position is an array/map header announcing more elements than
  // the remaining bytes can hold (to tell "huge length" from "wrong type").
  bool ContainerTooLong() {
    const TokenVisitor::Token& t = Peek();
    if (t.type != Type::kArray && t.type != Type::kMap) return false;
    if (!tok_complete_) return true;
    const uint64_t per = t.type == Type::kMap ? 2 : 1;
    return t.bits * per > static_cast<size_t>(end_ - tok_end_);
  }

  bool ReadStr(std::string_view& s) {
    const TokenVisitor::Token& t = Peek();
    if (t.type != Type::kStr || !tok_complete_) return false;
    s = std::string_view(t.data, t.bits);
    p_ = tok_end_;
    return true;
  }

  bool ReadBin(std::span<const uint8_t>& bytes) {
    const TokenVisitor::Token& t = Peek();
    if (t.type != Type::kBin || !tok_complete_) return false;
    bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(t.data), t.bits);
    p_ = tok_end_;
    return true;
  }

  // Reads any msgpack integer as its 64-bit two's complement bit pattern; `negative` tells whether
  // the value is below zero. False when the value is not an integer or is truncated.
  bool ReadInt(uint64_t& bits, bool& negative) {
    if (p_ < end_ && *p_ < 0x80) {  // a positive fixint, as Peek() takes it in place
      bits = *p_;
      negative = false;
      ++p_;
      return true;
    }
    const TokenVisitor::Token& t = Peek();
    if ((t.type != Type::kUint && t.type != Type::kNegInt) || !tok_complete_) return false;
    bits = t.bits;
    negative = t.negative;
    p_ = tok_end_;
    return true;
  }

  bool ReadFloat(double& value) {
    const TokenVisitor::Token& t = Peek();
    if (t.type != Type::kFloat || !tok_complete_) return false;
    value = t.real;
    p_ = tok_end_;
    return true;
  }

  // True when the value at the position is a scalar cut short by the end of the input.
  bool TruncatedScalar() {
    const Type t = Peek().type;
    return !tok_complete_ && t != Type::kEnd && t != Type::kArray && t != Type::kMap &&
           t != Type::kInvalid;
  }

  // Skips one complete value (containers included). `depth` is the nesting of the value's parent;
  // a container deeper than `max_depth` fails with kTooDeep. On failure the position is
  // unchanged (the start of the value, for the error's byte offset).
  SkipError SkipValue(int depth, int max_depth) {
    TokenVisitor& v = parser_.visitor();
    v.mode = TokenVisitor::Mode::kSkip;
    v.level = depth;
    v.max_level = max_depth;
    v.too_deep = false;
    v.invalid = false;
    size_t end;
    const msgpack::parse_return ret = Execute(end);
    v.mode = TokenVisitor::Mode::kToken;
    if (ret == msgpack::PARSE_SUCCESS || ret == msgpack::PARSE_EXTRA_BYTES) {
      p_ = base_ + end;
      return SkipError::kNone;
    }
    if (v.too_deep) return SkipError::kTooDeep;
    if (v.invalid) return SkipError::kInvalid;
    return SkipError::kTruncated;
  }

  // Reads a whole array of unsigned 32-bit ints (token ids) into `out`. False, with the position
  // unchanged and `out` unspecified, when the value is anything else, announces more than `max`
  // elements or more than the bytes left, or is cut short: the caller then reads it item by item
  // for the error message. The array header and any uncommon item go through msgpack-cxx; the
  // items in the encodings msgspec writes token ids in (fixint, uint8/16/32) are read in place,
  // the decoder's hot loop (a parse per token id costs some 60 instructions, this about 8).
  bool ReadTokenIds(std::vector<TokenId>& out, size_t max) {
    const uint8_t* const start = p_;
    uint32_t n;
    if (!ReadArray(n) || n > max) return Restore(start);
    if (ReadTokenIdItems(n, out)) return true;
    return Restore(start);
  }

  // The items of a token id array whose header (announcing `n`, at most the bytes left) has
  // been read; as ReadTokenIds(), with the position unchanged on failure.
  bool ReadTokenIdItems(uint32_t n, std::vector<TokenId>& out) {
    const uint8_t* const start = p_;
    out.resize(n);
    TokenId* dst = out.data();
    const uint8_t* p = p_;
    const uint8_t* const end = end_;  // (a local: the stores through dst may alias the member)
    uint32_t i = 0;
    // While five bytes are left (the widest encoding of a token id) no item needs its own bounds
    // check. The common encodings are the fall-through path and the loop's only taken branch is
    // its back edge: laid out the other way round (as a bounds check per item made the compiler
    // do) a 32-block event took twice as long for the same instructions.
    for (; i < n && end - p >= 5; ++i) {
      const uint8_t b = *p;
      if (b < 0x80) [[likely]] {
        dst[i] = b;
        p += 1;
      } else if (b == 0xce) [[likely]] {
        dst[i] = BigEndian<uint32_t>(p + 1);
        p += 5;
      } else if (b == 0xcd) [[likely]] {
        dst[i] = BigEndian<uint16_t>(p + 1);
        p += 3;
      } else if (b == 0xcc) {
        dst[i] = p[1];
        p += 2;
      } else {
        break;  // another encoding: the general reader below
      }
    }
    for (; i < n; ++i) {
      const uint8_t b = p < end ? *p : 0xc1;
      const size_t left = static_cast<size_t>(end - p);
      if (b < 0x80) {
        dst[i] = b;
        p += 1;
      } else if (b == 0xce && left >= 5) {
        dst[i] = BigEndian<uint32_t>(p + 1);
        p += 5;
      } else if (b == 0xcd && left >= 3) {
        dst[i] = BigEndian<uint16_t>(p + 1);
        p += 3;
      } else if (b == 0xcc && left >= 2) {
        dst[i] = p[1];
        p += 2;
      } else {
        p_ = p;
        uint64_t bits;
        bool negative;
        if (!ReadInt(bits, negative) || negative || bits > UINT32_MAX) return Restore(start);
        dst[i] = static_cast<TokenId>(bits);
        p = p_;
      }
    }
    p_ = p;
    return true;
  }

  // Reads a whole array of hashes (ints of any sign, bin or str) into `out`; false as
  // ReadTokenIds(). `negative` is set when a hash is below zero. uint64 and int64 items (vLLM's and
  // SGLang's hashes) are read in place; every other item goes through msgpack-cxx.
  bool ReadHashes(std::vector<EngineHash>& out, bool& negative) {
    const uint8_t* const start = p_;
    uint32_t n;
    if (!ReadArray(n)) return false;
    if (ReadHashItems(n, out, negative)) return true;
    return Restore(start);
  }

  // The items of a hash array whose header (announcing `n`, at most the bytes left) has been
  // read; as ReadHashes(), with the position unchanged on failure.
  bool ReadHashItems(uint32_t n, std::vector<EngineHash>& out, bool& negative) {
    const uint8_t* const start = p_;
    out.clear();
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* p = p_;
      if (end_ - p >= 9 && (*p == 0xcf || *p == 0xd3)) {  // uint64, int64
        const uint64_t v = BigEndian<uint64_t>(p + 1);
        negative |= *p == 0xd3 && static_cast<int64_t>(v) < 0;
        out.push_back(EngineHash{v});
        p_ = p + 9;
        continue;
      }
      const TokenVisitor::Token& t = Peek();
      if (!tok_complete_) return Restore(start);
      switch (t.type) {
        case Type::kUint:
        case Type::kNegInt:
          negative |= t.negative;
          out.push_back(EngineHash{t.bits});
          break;
        case Type::kBin:
          out.push_back(EngineHash{NormaliseHashBytes(
              std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(t.data), t.bits))});
          break;
        case Type::kStr:
          out.push_back(EngineHash{NormaliseHashString(std::string_view(t.data, t.bits))});
          break;
        default:
          return Restore(start);
      }
      p_ = tok_end_;
    }
    return true;
  }

 private:
  // The big-endian unsigned int of sizeof(T) bytes at `p` (the in-place reads above): one load
  // and one byte swap.
  template <typename T>
  static T BigEndian(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::endian::native == std::endian::little) {
      if constexpr (sizeof(T) == 2) v = __builtin_bswap16(v);
      if constexpr (sizeof(T) == 4) v = __builtin_bswap32(v);
      if constexpr (sizeof(T) == 8) v = __builtin_bswap64(v);
    }
    return v;
  }

  // One msgpack-cxx parse from the position; `end` is where the parse stopped: past the value on
  // success, on the last byte read when the visitor stopped it.
  msgpack::parse_return Execute(size_t& end) {
    end = offset();
    if (p_ >= end_) return msgpack::PARSE_CONTINUE;
    parser_.init();
    TokenVisitor& v = parser_.visitor();
    v.token = v.mode == TokenVisitor::Mode::kToken ? &tok_ : &v.scratch;
    return parser_.execute(reinterpret_cast<const char*>(base_), static_cast<size_t>(end_ - base_),
                           end);
  }

  // One parser context per thread, reused by every payload it decodes: msgpack-cxx's context
  // allocates its container stack when built, which would otherwise cost an allocation per
  // payload. Readers on one thread never parse at the same time (each call runs to its end and
  // the visitor is pointed at the calling reader's token first).
  static TokenParser& ThreadParser() {
    static thread_local TokenParser parser;
    return parser;
  }

  bool Restore(const uint8_t* start) {
    p_ = start;
    return false;
  }

  // The token at the position, parsed once and kept until the position moves.
  const TokenVisitor::Token& Peek() {
    if (tok_at_ == p_) return tok_;
    tok_at_ = p_;
    // The two one-byte tokens every event is full of (nil optionals, small ints) are taken in
    // place: handing a single byte to msgpack-cxx's parser costs some 60 instructions.
    if (p_ < end_ && (*p_ < 0x80 || *p_ == 0xc0)) {
      tok_complete_ = true;
      tok_end_ = p_ + 1;
      tok_.type = *p_ == 0xc0 ? Type::kNil : Type::kUint;
      tok_.negative = false;
      tok_.bits = *p_ == 0xc0 ? 0 : *p_;
      return tok_;
    }
    TokenVisitor& v = parser_.visitor();
    v.invalid = false;
    size_t end;
    const msgpack::parse_return ret = Execute(end);
    tok_complete_ = true;
    switch (ret) {
      case msgpack::PARSE_SUCCESS:
      case msgpack::PARSE_EXTRA_BYTES:
        tok_end_ = base_ + end;
        break;
      case msgpack::PARSE_STOP_VISITOR:  // a container header; `end` is its last byte
        tok_end_ = base_ + end + 1;
        break;
      default:
        tok_complete_ = false;
        tok_end_ = p_;
        tok_ = TokenVisitor::Token{};
        tok_.type = p_ >= end_ ? Type::kEnd : v.invalid ? Type::kInvalid : LeadType(*p_);
        if (tok_.type == Type::kArray || tok_.type == Type::kMap) {
          tok_.bits = UINT32_MAX;  // the count itself is cut short
        }
        break;
    }
    return tok_;
  }

  bool ReadContainer(Type type, uint64_t per, uint32_t& n) {
    const TokenVisitor::Token& t = Peek();
    if (t.type != type || !tok_complete_) return false;
    if (t.bits * per > static_cast<size_t>(end_ - tok_end_)) return false;
    n = static_cast<uint32_t>(t.bits);
    p_ = tok_end_;
    return true;
  }

  // The type a value cut short by the end of the input starts as (msgpack-cxx reports only that
  // bytes are missing); used to name it in the error message.
  static Type LeadType(uint8_t b) {
    if (b <= 0x7f || (b >= 0xcc && b <= 0xcf)) return Type::kUint;
    if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3)) return Type::kNegInt;
    if (b <= 0x8f || b == 0xde || b == 0xdf) return Type::kMap;
    if (b <= 0x9f || b == 0xdc || b == 0xdd) return Type::kArray;
    if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb)) return Type::kStr;
    if (b >= 0xc4 && b <= 0xc6) return Type::kBin;
    if (b == 0xca || b == 0xcb) return Type::kFloat;
    return Type::kExt;  // c7..c9, d4..d8 (nil, bool and 0xc1 are never cut short)
  }

  const uint8_t* base_;
  const uint8_t* p_;
  const uint8_t* end_;
  TokenParser& parser_;
  TokenVisitor::Token tok_;
  const uint8_t* tok_at_ = nullptr;  // where the kept token starts
  const uint8_t* tok_end_ = nullptr;
  bool tok_complete_ = false;
};

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_TOKEN_READER_H_
