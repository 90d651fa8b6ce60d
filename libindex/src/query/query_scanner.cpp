// The direct scanner behind ParseQueryRequest (the DOM fallback is query_request_dom.cpp).
//
// ParseQueryRequest scans the common shape of a /query or /query_by_hash body in one pass without
// building a DOM: an object whose keys and string values are plain printable ASCII (no escapes),
// whose numbers are integers, and whose known keys each appear once with a valid value. It
// answers only when the whole body is such a valid request; anything else (bad JSON, escapes,
// non-ASCII, floats, duplicate keys, a mistyped or out-of-range field, a BOM, ...) goes to
// ParseQueryRequestWithDom, which then gives the answer or the exact error. So both accept the
// same language with the same requests and messages (tests/query_json_diff_test.cpp, the
// query_json fuzz target).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "kvindex/core/scope.h"
#include "kvindex/query/query_json.h"

namespace kvindex {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  void Ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool AtEnd() const { return p_ == end_; }
  bool Peek(char c) const { return p_ != end_ && *p_ == c; }
  bool Eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool EatWord(std::string_view w) {
    if (static_cast<size_t>(end_ - p_) < w.size() || std::string_view(p_, w.size()) != w) {
      return false;
    }
    p_ += w.size();
    return true;
  }
  // A string of printable ASCII without escapes.
  bool String(std::string_view& out) {
    if (!Eat('"')) return false;
    const char* begin = p_;
    while (p_ != end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = std::string_view(begin, static_cast<size_t>(p_ - begin));
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
      ++p_;
    }
    return false;
  }
  // A JSON integer (no fraction or exponent) that fits u64 (magnitude; `negative` for '-').
  bool Integer(uint64_t& magnitude, bool& negative) {
    negative = Eat('-');
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0') {
      ++p_;
      magnitude = 0;
    } else {
      uint64_t v = 0;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        const auto d = static_cast<uint64_t>(*p_ - '0');
        if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
        v = v * 10 + d;
        ++p_;
      }
      magnitude = v;
    }
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E' || (*p_ >= '0' && *p_ <= '9'))) {
      return false;
    }
    if (negative && magnitude > (uint64_t{1} << 63)) return false;  // nlohmann: a float
    return true;
  }
  // `[ id (, id)* ]` or `[]` of token ids (non-negative integers up to u32), appended to `out`:
  // the hot loop of a /query body. Written on local pointers only (the cursor, and the output
  // through a raw write pointer into `out` grown by doubling), so the compiler keeps them in
  // registers: with a lambda capturing the cursor and push_back(), it stored and reloaded the
  // cursor at every digit (2.5 ns per byte of body).
  static const char* SkipWs(const char* p, const char* end) {
    while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
    return p;
  }
  // The number of leading decimal digits of the 8 bytes at `p` when it is 1 to 7, with their value
  // in `value`; 0 when all 8 are digits (a long number: the caller's digit loop reads it). No
  // branch per digit: token ids have 1 to 6 digits in no predictable order, and the per-digit
  // loop's exit mispredicted about once per token.
  static size_t SwarDigits(const char* p, uint64_t& value) {
    uint64_t chunk;
    std::memcpy(&chunk, p, sizeof(chunk));
    if constexpr (std::endian::native != std::endian::little) return 0;
    const uint64_t t = chunk ^ 0x3030303030303030ULL;  // digits become bytes 0..9
    // High bit of a byte set when it is not a digit (t >= 10). Carries only move towards later
    // bytes and start at non-digits, so the first non-digit is found exactly.
    const uint64_t non_digit = ((t + 0x7676767676767676ULL) | t) & 0x8080808080808080ULL;
    if (non_digit == 0) return 0;
    const size_t digits = static_cast<size_t>(std::countr_zero(non_digit)) / 8;
    if (digits == 0) return 0;
    // Right-align the digits as 8 ASCII-coded places (zeros in front) and convert them at once.
    uint64_t v = (t << (8 * (8 - digits))) & 0x0F0F0F0F0F0F0F0FULL;
    v = (v * 2561) >> 8;
    v = ((v & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
    value = ((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
    return digits;
  }
  bool TokenIds(std::vector<TokenId>& out) {
    const char* p = p_;
    const char* const end = end_;
    if (p == end || *p != '[') return false;
    p = SkipWs(p + 1, end);
    if (p != end && *p == ']') {
      p_ = p + 1;
      return true;
    }
    size_t used = out.size();
    out.resize(std::max<size_t>(used + 256, out.capacity()));
    TokenId* w = out.data() + used;
    TokenId* w_end = out.data() + out.size();
    bool ok = false;
    for (;;) {
      p = SkipWs(p, end);
      if (p == end) break;
      auto d = static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0';
      if (d > 9) break;
      uint64_t v = d;
      size_t digits = 0;
      if (end - p >= 8 && (digits = SwarDigits(p, v)) != 0) {
        // 1 to 7 digits read at once: the common token id.
        if (d == 0 && digits > 1) break;  // a leading zero
        p += digits;
      } else if (const char* const first = p++; d == 0) {
        if (p != end && static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0' <= 9) break;
      } else {
        bool long_number = false;
        while (p != end && (d = static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0') <= 9) {
          if (p - first >= 10) {  // > 10 digits: above u32
            long_number = true;
            break;
          }
          v = v * 10 + d;
          ++p;
        }
        if (long_number || v > std::numeric_limits<uint32_t>::max()) break;
      }
      if (p != end && (*p == '.' || *p == 'e' || *p == 'E')) break;
      if (w == w_end) {
        used = static_cast<size_t>(w - out.data());
        out.resize(out.size() * 2);
        w = out.data() + used;
        w_end = out.data() + out.size();
      }
      *w++ = static_cast<TokenId>(v);
      p = SkipWs(p, end);
      if (p == end) break;
      if (*p == ',') {
        ++p;
        continue;
      }
      if (*p == ']') {
        p_ = p + 1;
        ok = true;
      }
      break;
    }
    out.resize(static_cast<size_t>(w - out.data()));
    return ok;
  }
  bool Null() { return EatWord("null"); }
  // Any value of the subset (an unknown key's), nested up to 64 deep.
  bool Skip(int depth = 0) {
    if (depth > 64 || p_ == end_) return false;
    std::string_view s;
    uint64_t m = 0;
    bool neg = false;
    switch (*p_) {
      case '"':
        return String(s);
      case 't':
        return EatWord("true");
      case 'f':
        return EatWord("false");
      case 'n':
        return Null();
      case '[': {
        ++p_;
        Ws();
        if (Eat(']')) return true;
        do {
          Ws();
          if (!Skip(depth + 1)) return false;
          Ws();
        } while (Eat(','));
        return Eat(']');
      }
      case '{': {
        ++p_;
        Ws();
        if (Eat('}')) return true;
        do {
          Ws();
          if (!String(s)) return false;
          Ws();
          if (!Eat(':')) return false;
          Ws();
          if (!Skip(depth + 1)) return false;
          Ws();
        } while (Eat(','));
        return Eat('}');
      }
      default:
        return Integer(m, neg);
    }
  }
  // `[ item (, item)* ]` or `[]`, calling `item()` at each element (whitespace skipped around).
  template <typename F>
  bool Array(F&& item) {
    if (!Eat('[')) return false;
    Ws();
    if (Eat(']')) return true;
    do {
      Ws();
      if (!item()) return false;
      Ws();
    } while (Eat(','));
    return Eat(']');
  }

 private:
  const char* p_;
  const char* end_;
};

// A string, or an integer rendered in decimal as nlohmann's path does (tenant_id, cache_salt).
bool ScanStringOrInt(Scanner& s, std::string& out) {
  std::string_view v;
  if (s.Peek('"')) {
    if (!s.String(v)) return false;
    out.assign(v);
    return true;
  }
  uint64_t m = 0;
  bool neg = false;
  if (!s.Integer(m, neg)) return false;
  out = neg ? std::to_string(static_cast<int64_t>(0 - m)) : std::to_string(m);
  return true;
}

bool ScanHash(Scanner& s, uint64_t& out) {
  if (s.Peek('"')) {
    std::string_view v;
    if (!s.String(v)) return false;
    const bool hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    const char* begin = v.data() + (hex ? 2 : 0);
    const char* end = v.data() + v.size();
    if (begin == end) return false;
    const auto [ptr, ec] = std::from_chars(begin, end, out, hex ? 16 : 10);
    return ec == std::errc() && ptr == end;
  }
  uint64_t m = 0;
  bool neg = false;
  if (!s.Integer(m, neg)) return false;
  out = neg ? 0 - m : m;
  return true;
}

enum Key : uint32_t {
  kModel = 1u << 0,
  kLoraName = 1u << 1,
  kLoraId = 1u << 2,
  kTenant = 1u << 3,
  kSalt = 1u << 4,
  kBlockSize = 1u << 5,
  kTokenIds = 1u << 6,
  kBlockHash = 1u << 7,
  kSeqHashes = 1u << 8,
  kInstanceId = 1u << 9,
  kInstances = 1u << 10,
  kExplain = 1u << 11,
};

uint32_t KeyOf(std::string_view k) {
  static constexpr std::pair<std::string_view, Key> kKeys[] = {
      {"model", kModel},          {"token_ids", kTokenIds},
      {"lora_name", kLoraName},   {"lora_id", kLoraId},
      {"tenant_id", kTenant},     {"cache_salt", kSalt},
      {"block_size", kBlockSize}, {"block_hash", kBlockHash},
      {"seq_hashes", kSeqHashes}, {"instance_id", kInstanceId},
      {"instances", kInstances},  {"explain", kExplain},
  };
  for (const auto& [name, key] : kKeys) {
    if (k == name) return key;
  }
  return 0;
}

// The values that are checked, or moved into the request, once the whole object is read.
struct ScannedFields {
  std::string lora_name;
  std::optional<int64_t> lora_id;
  std::string tenant;
  std::string instance_id;
  std::vector<uint64_t> hashes;
};

// Scans the non-null value of the known key `key` into `request` or `fields`; false when it is
// not of the common shape (then the DOM path decides). `body_size` sizes the token buffer.
bool ScanKnownValue(Scanner& s, uint32_t key, size_t body_size, QueryRequest& request,
                    ScannedFields& fields) {
  std::string_view v;
  uint64_t m = 0;
  bool neg = false;
  switch (key) {
    case kModel:
      if (!s.String(v)) return false;
      request.match.model.assign(v);
      break;
    case kLoraName:
      if (!s.String(v)) return false;
      fields.lora_name.assign(v);
      break;
    case kInstanceId:
      if (!s.String(v)) return false;
      fields.instance_id.assign(v);
      break;
    case kLoraId:
      if (!s.Integer(m, neg) || (!neg && m > uint64_t{std::numeric_limits<int64_t>::max()})) {
        return false;
      }
      fields.lora_id = static_cast<int64_t>(neg ? 0 - m : m);
      break;
    case kTenant:
      if (!ScanStringOrInt(s, fields.tenant)) return false;
      break;
    case kSalt:
      if (!ScanStringOrInt(s, request.match.salt)) return false;
      break;
    case kBlockSize:
      if (!s.Integer(m, neg) || neg || m == 0 || m > std::numeric_limits<uint32_t>::max()) {
        return false;
      }
      request.match.block_size = static_cast<uint32_t>(m);
      break;
    case kTokenIds:
      request.tokens.reserve(body_size / 4);
      if (!s.TokenIds(request.tokens)) return false;
      if (request.tokens.size() > kMaxQueryTokens) return false;
      break;
    case kBlockHash:
    case kSeqHashes:
      if (!s.Array([&] {
            uint64_t h = 0;
            if (!ScanHash(s, h)) return false;
            fields.hashes.push_back(h);
            return true;
          })) {
        return false;
      }
      if (fields.hashes.size() > kMaxQueryTokens) return false;
      break;
    case kInstances:
      if (s.Peek('"')) {
        if (!s.String(v)) return false;
        request.match.instances.emplace_back(v);
      } else if (!s.Array([&] {
                   std::string_view n;
                   if (!s.String(n)) return false;
                   request.match.instances.emplace_back(n);
                   return true;
                 })) {
        return false;
      }
      break;
    case kExplain:
      if (s.EatWord("true")) {
        request.explain = true;
      } else if (!s.EatWord("false")) {
        return false;
      }
      break;
    default:
      return false;
  }
  return true;
}

// The whole body as a valid request, or nullopt (then the DOM path decides).
std::optional<QueryRequest> ScanQueryRequest(std::string_view body) {
  Scanner s(body);
  QueryRequest request;
  uint32_t seen = 0;     // keys met (null included): a duplicate falls back
  uint32_t present = 0;  // keys with a non-null value
  ScannedFields fields;
  s.Ws();
  if (!s.Eat('{')) return std::nullopt;
  s.Ws();
  if (!s.Eat('}')) {
    do {
      s.Ws();
      std::string_view name;
      if (!s.String(name)) return std::nullopt;
      s.Ws();
      if (!s.Eat(':')) return std::nullopt;
      s.Ws();
      const uint32_t key = KeyOf(name);
      if (key == 0) {
        if (!s.Skip()) return std::nullopt;
      } else {
        if ((seen & key) != 0) return std::nullopt;
        seen |= key;
        if (s.Null()) {
          s.Ws();
          continue;
        }
        present |= key;
        if (!ScanKnownValue(s, key, body.size(), request, fields)) return std::nullopt;
      }
      s.Ws();
    } while (s.Eat(','));
    if (!s.Eat('}')) return std::nullopt;
  }
  s.Ws();
  if (!s.AtEnd()) return std::nullopt;

  if ((present & kModel) == 0) return std::nullopt;
  if (!fields.lora_name.empty() && fields.lora_id && *fields.lora_id >= 0) return std::nullopt;
  const uint32_t kinds = present & (kTokenIds | kBlockHash | kSeqHashes);
  if (kinds != kTokenIds && kinds != kBlockHash && kinds != kSeqHashes) return std::nullopt;
  request.match.lora = LoraNameFrom(fields.lora_name, fields.lora_id);
  request.match.tenant = std::string(TenantOrDefault(fields.tenant));
  if (kinds == kBlockHash) {
    request.kind = QueryKind::kEngineHashes;
    request.engine_hashes.reserve(fields.hashes.size());
    for (uint64_t h : fields.hashes) request.engine_hashes.push_back(EngineHash{h});
  } else if (kinds == kSeqHashes) {
    request.kind = QueryKind::kPrefixHashes;
    request.prefix_hashes.reserve(fields.hashes.size());
    for (uint64_t h : fields.hashes) request.prefix_hashes.push_back(PrefixHash{h});
  }
  if (!fields.instance_id.empty()) {
    request.match.instances.insert(request.match.instances.begin(), fields.instance_id);
  }
  return request;
}

}  // namespace

Result<QueryRequest> ParseQueryRequest(std::string_view body) {
  if (body.size() <= kMaxQueryBodyBytes) {
    if (std::optional<QueryRequest> fast = ScanQueryRequest(body)) return std::move(*fast);
  }
  return ParseQueryRequestWithDom(body);
}

}  // namespace kvindex
