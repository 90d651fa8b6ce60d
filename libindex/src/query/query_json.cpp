#include "kvindex/query/query_json.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <cstdint>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "kvindex/core/scope.h"

namespace kvindex {
namespace {

using nlohmann::json;

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

Result<json> ParseBody(std::string_view body) {
  if (body.size() > kMaxQueryBodyBytes) {
    return Status::LimitExceeded("request body of " + std::to_string(body.size()) +
                                 " bytes exceeds " + std::to_string(kMaxQueryBodyBytes));
  }
  try {
    json parsed = json::parse(body.begin(), body.end());
    if (!parsed.is_object()) return Bad("request body must be a JSON object");
    return parsed;
  } catch (const json::parse_error& e) {
    return Bad("invalid JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception&) {
    return Bad("invalid JSON");
  }
}

bool Present(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// A string field, or an integer spelled in decimal (tenant_id, cache_salt).
Status GetStringOrInt(const json& j, const char* key, std::string& out) {
  if (!Present(j, key)) return Status::Ok();
  const json& v = j.at(key);
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_number_integer()) {
    out = v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
  } else {
    return Bad(std::string(key) + ": expected a string or an integer");
  }
  return Status::Ok();
}

Status GetString(const json& j, const char* key, std::string& out) {
  if (!Present(j, key)) return Status::Ok();
  if (!j.at(key).is_string()) return Bad(std::string(key) + ": expected a string");
  out = j.at(key).get<std::string>();
  return Status::Ok();
}

Status GetTokens(const json& j, const char* key, std::vector<TokenId>& out) {
  const json& v = j.at(key);
  if (!v.is_array()) return Bad(std::string(key) + ": expected an array of token ids");
  if (v.size() > kMaxQueryTokens) {
    return Bad(std::string(key) + ": " + std::to_string(v.size()) + " ids exceed the limit of " +
               std::to_string(kMaxQueryTokens));
  }
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& t = v[i];
    if (!t.is_number_integer() ||
        (t.is_number_unsigned() ? t.get<uint64_t>() > std::numeric_limits<TokenId>::max()
                                : t.get<int64_t>() < 0 ||
                                      t.get<int64_t>() > std::numeric_limits<TokenId>::max())) {
      return Bad(std::string(key) + "[" + std::to_string(i) +
                 "]: expected a token id from 0 to 4294967295");
    }
    out.push_back(static_cast<TokenId>(t.get<uint64_t>()));
  }
  return Status::Ok();
}

// A hash as a JSON integer (negative values are two's complement, as SGLang sends them) or a
// string in decimal or 0x hex.
bool ParseHashValue(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* begin = s.data() + (hex ? 2 : 0);
  const char* end = s.data() + s.size();
  if (begin == end) return false;
  const auto [ptr, ec] = std::from_chars(begin, end, out, hex ? 16 : 10);
  return ec == std::errc() && ptr == end;
}

Status GetHashes(const json& j, const char* key, std::vector<uint64_t>& out) {
  const json& v = j.at(key);
  if (!v.is_array()) return Bad(std::string(key) + ": expected an array of hashes");
  if (v.size() > kMaxQueryTokens) return Bad(std::string(key) + ": too many hashes");
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t h = 0;
    if (!ParseHashValue(v[i], h)) {
      return Bad(std::string(key) + "[" + std::to_string(i) + "]: expected a 64-bit hash");
    }
    out.push_back(h);
  }
  return Status::Ok();
}

Status GetInstances(const json& j, const char* key, std::vector<std::string>& out) {
  if (!Present(j, key)) return Status::Ok();
  const json& v = j.at(key);
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
    return Status::Ok();
  }
  if (!v.is_array()) return Bad(std::string(key) + ": expected an array of instance names");
  for (const json& name : v) {
    if (!name.is_string()) return Bad(std::string(key) + ": expected an array of instance names");
    out.push_back(name.get<std::string>());
  }
  return Status::Ok();
}

// The scope fields every body shares: model (under `model_key`), LoRA, tenant, salt, block size.
Status ParseScope(const json& j, const char* model_key, QueryRequest& request) {
  if (!Present(j, model_key)) return Bad(std::string(model_key) + ": missing");
  KVINDEX_RETURN_IF_ERROR(GetString(j, model_key, request.match.model));
  std::string lora_name;
  KVINDEX_RETURN_IF_ERROR(GetString(j, "lora_name", lora_name));
  std::optional<int64_t> lora_id;
  if (Present(j, "lora_id")) {
    if (!j.at("lora_id").is_number_integer()) return Bad("lora_id: expected an integer");
    lora_id = j.at("lora_id").get<int64_t>();
  }
  if (!lora_name.empty() && lora_id && *lora_id >= 0) {
    return Bad("lora_id and lora_name are mutually exclusive");
  }
  request.match.lora = LoraNameFrom(lora_name, lora_id);
  std::string tenant;
  KVINDEX_RETURN_IF_ERROR(GetStringOrInt(j, "tenant_id", tenant));
  request.match.tenant = std::string(TenantOrDefault(tenant));
  KVINDEX_RETURN_IF_ERROR(GetStringOrInt(j, "cache_salt", request.match.salt));
  if (Present(j, "block_size")) {
    const json& bs = j.at("block_size");
    if (!bs.is_number_integer() || bs.get<int64_t>() <= 0 ||
        bs.get<int64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Bad("block_size: expected a positive integer");
    }
    request.match.block_size = static_cast<uint32_t>(bs.get<int64_t>());
  }
  return Status::Ok();
}

json AnswerFor(const InstanceMatch& m) {
  json answer = {{"longest_matched", m.longest_matched},
                 {"GPU", m.gpu},
                 {"CPU", m.cpu},
                 {"DISK", m.disk}};
  for (const auto& [tier, tokens] : m.other_tiers) answer[tier] = tokens;
  json dp = json::object();
  for (const DpTokens& d : m.dp) dp[std::to_string(d.rank)] = d.tokens;
  answer["DP"] = std::move(dp);
  return answer;
}

}  // namespace

Result<QueryRequest> ParseQueryRequestWithDom(std::string_view body) {
  KVINDEX_ASSIGN_OR_RETURN(const json j, ParseBody(body));
  QueryRequest request;
  KVINDEX_RETURN_IF_ERROR(ParseScope(j, "model", request));
  const int kinds = Present(j, "token_ids") + Present(j, "block_hash") + Present(j, "seq_hashes");
  if (kinds != 1) return Bad("exactly one of token_ids, block_hash or seq_hashes is required");
  if (Present(j, "token_ids")) {
    request.kind = QueryKind::kTokens;
    KVINDEX_RETURN_IF_ERROR(GetTokens(j, "token_ids", request.tokens));
  } else {
    std::vector<uint64_t> hashes;
    const bool engine = Present(j, "block_hash");
    KVINDEX_RETURN_IF_ERROR(GetHashes(j, engine ? "block_hash" : "seq_hashes", hashes));
    request.kind = engine ? QueryKind::kEngineHashes : QueryKind::kPrefixHashes;
    for (uint64_t h : hashes) {
      if (engine) {
        request.engine_hashes.push_back(EngineHash{h});
      } else {
        request.prefix_hashes.push_back(PrefixHash{h});
      }
    }
  }
  std::string instance_id;
  KVINDEX_RETURN_IF_ERROR(GetString(j, "instance_id", instance_id));
  if (!instance_id.empty()) request.match.instances.push_back(instance_id);
  KVINDEX_RETURN_IF_ERROR(GetInstances(j, "instances", request.match.instances));
  if (Present(j, "explain")) {
    if (!j.at("explain").is_boolean()) return Bad("explain: expected true or false");
    request.explain = j.at("explain").get<bool>();
  }
  return request;
}

Result<QueryRequest> ParseCacheRequest(std::string_view body) {
  KVINDEX_ASSIGN_OR_RETURN(const json j, ParseBody(body));
  QueryRequest request;
  KVINDEX_RETURN_IF_ERROR(ParseScope(j, Present(j, "model_name") ? "model_name" : "model", request));
  if (!Present(j, "token_ids")) return Bad("token_ids: missing");
  KVINDEX_RETURN_IF_ERROR(GetTokens(j, "token_ids", request.tokens));
  KVINDEX_RETURN_IF_ERROR(GetInstances(j, "instances", request.match.instances));
  return request;
}

Result<PrefixMatch> MatchRequest(const PrefixIndex& index, const QueryRequest& request) {
  switch (request.kind) {
    case QueryKind::kTokens: return index.MatchTokens(request.match, request.tokens);
    case QueryKind::kEngineHashes: return index.MatchEngineHashes(request.match, request.engine_hashes);
    case QueryKind::kPrefixHashes: return index.MatchPrefixHashes(request.match, request.prefix_hashes);
  }
  return Status::Internal("unknown query kind");
}

std::string RenderQueryAnswerWithDom(const PrefixMatch& match, std::string_view tenant,
                                     bool conductor_compat) {
  json instances = json::object();
  for (const InstanceMatch& m : match.instances) instances[std::string(m.instance)] = AnswerFor(m);
  json by_tenant = json::object();
  if (!match.instances.empty()) by_tenant[std::string(tenant)] = std::move(instances);
  if (conductor_compat) return by_tenant.dump();
  return json{{"data", std::move(by_tenant)}}.dump();
}

std::string RenderCacheAnswer(const PrefixMatch& match) {
  json hits = json::object();
  for (const InstanceMatch& m : match.instances) hits[std::string(m.instance)] = m.longest_matched;
  return json{{"HitStatus", std::move(hits)}}.dump();
}

// ------------------------------------------------------------------ the direct scanner
// ParseQueryRequest scans the common shape of a /query or /query_by_hash body in one pass without
// building a DOM: an object whose keys and string values are plain printable ASCII (no escapes),
// whose numbers are integers, and whose known keys each appear once with a valid value. It
// answers only when the whole body is such a valid request; anything else (bad JSON, escapes,
// non-ASCII, floats, duplicate keys, a mistyped or out-of-range field, a BOM, ...) goes to
// ParseQueryRequestWithDom, which then gives the answer or the exact error. So both accept the
// same language with the same requests and messages (tests/query_json_diff_test.cpp, the
// query_json fuzz target).
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

// The whole body as a valid request, or nullopt (then the DOM path decides).
std::optional<QueryRequest> ScanQueryRequest(std::string_view body) {
  Scanner s(body);
  QueryRequest request;
  uint32_t seen = 0;     // keys met (null included): a duplicate falls back
  uint32_t present = 0;  // keys with a non-null value
  std::string lora_name;
  std::optional<int64_t> lora_id;
  std::string tenant;
  std::string instance_id;
  std::vector<uint64_t> hashes;
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
        std::string_view v;
        uint64_t m = 0;
        bool neg = false;
        switch (key) {
          case kModel:
            if (!s.String(v)) return std::nullopt;
            request.match.model.assign(v);
            break;
          case kLoraName:
            if (!s.String(v)) return std::nullopt;
            lora_name.assign(v);
            break;
          case kInstanceId:
            if (!s.String(v)) return std::nullopt;
            instance_id.assign(v);
            break;
          case kLoraId:
            if (!s.Integer(m, neg) || (!neg && m > uint64_t{std::numeric_limits<int64_t>::max()})) {
              return std::nullopt;
            }
            lora_id = static_cast<int64_t>(neg ? 0 - m : m);
            break;
          case kTenant:
            if (!ScanStringOrInt(s, tenant)) return std::nullopt;
            break;
          case kSalt:
            if (!ScanStringOrInt(s, request.match.salt)) return std::nullopt;
            break;
          case kBlockSize:
            if (!s.Integer(m, neg) || neg || m == 0 || m > std::numeric_limits<uint32_t>::max()) {
              return std::nullopt;
            }
            request.match.block_size = static_cast<uint32_t>(m);
            break;
          case kTokenIds:
            request.tokens.reserve(body.size() / 4);
            if (!s.TokenIds(request.tokens)) return std::nullopt;
            if (request.tokens.size() > kMaxQueryTokens) return std::nullopt;
            break;
          case kBlockHash:
          case kSeqHashes:
            if (!s.Array([&] {
                  uint64_t h = 0;
                  if (!ScanHash(s, h)) return false;
                  hashes.push_back(h);
                  return true;
                })) {
              return std::nullopt;
            }
            if (hashes.size() > kMaxQueryTokens) return std::nullopt;
            break;
          case kInstances:
            if (s.Peek('"')) {
              if (!s.String(v)) return std::nullopt;
              request.match.instances.emplace_back(v);
            } else if (!s.Array([&] {
                         std::string_view n;
                         if (!s.String(n)) return false;
                         request.match.instances.emplace_back(n);
                         return true;
                       })) {
              return std::nullopt;
            }
            break;
          case kExplain:
            if (s.EatWord("true")) {
              request.explain = true;
            } else if (!s.EatWord("false")) {
              return std::nullopt;
            }
            break;
          default:
            return std::nullopt;
        }
      }
      s.Ws();
    } while (s.Eat(','));
    if (!s.Eat('}')) return std::nullopt;
  }
  s.Ws();
  if (!s.AtEnd()) return std::nullopt;

  if ((present & kModel) == 0) return std::nullopt;
  if (!lora_name.empty() && lora_id && *lora_id >= 0) return std::nullopt;
  const uint32_t kinds = present & (kTokenIds | kBlockHash | kSeqHashes);
  if (kinds != kTokenIds && kinds != kBlockHash && kinds != kSeqHashes) return std::nullopt;
  request.match.lora = LoraNameFrom(lora_name, lora_id);
  request.match.tenant = std::string(TenantOrDefault(tenant));
  if (kinds == kBlockHash) {
    request.kind = QueryKind::kEngineHashes;
    request.engine_hashes.reserve(hashes.size());
    for (uint64_t h : hashes) request.engine_hashes.push_back(EngineHash{h});
  } else if (kinds == kSeqHashes) {
    request.kind = QueryKind::kPrefixHashes;
    request.prefix_hashes.reserve(hashes.size());
    for (uint64_t h : hashes) request.prefix_hashes.push_back(PrefixHash{h});
  }
  if (!instance_id.empty()) {
    request.match.instances.insert(request.match.instances.begin(), instance_id);
  }
  return request;
}

// ------------------------------------------------------------------ the direct renderer
// Writes the answer nlohmann's dump() would (keys in byte order, no spaces) for the common case:
// names of printable ASCII without '"' or '\\', distinct instance names and DP ranks, no tier
// beyond GPU/CPU/DISK. Anything else returns false (RenderQueryAnswerWithDom answers).
bool PlainName(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

// Appends to a buffer sized beforehand: a raw write pointer (no capacity check or strlen per
// piece, which were most of the renderer's time).
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  template <size_t N>
  void Lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void Str(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Ch(char c) { *p_++ = c; }
  template <typename Int>
  void Num(Int v) {
    p_ = std::to_chars(p_, p_ + 21, v).ptr;  // 20 digits and a sign at most
  }
  char* pos() const { return p_; }

 private:
  char* p_;
};

bool RenderDirect(const PrefixMatch& match, std::string_view tenant, bool conductor_compat,
                  std::string& out) {
  if (!PlainName(tenant)) return false;
  std::vector<const InstanceMatch*> sorted;
  sorted.reserve(match.instances.size());
  // Worst case of every piece: names, 5 numbers of 20 digits and the keys per instance, a
  // rank (10 digits) and a number per DP entry.
  size_t bound = 32 + tenant.size();
  for (const InstanceMatch& m : match.instances) {
    if (!m.other_tiers.empty() || !PlainName(m.instance)) return false;
    sorted.push_back(&m);
    bound += m.instance.size() + 160 + m.dp.size() * 40;
  }
  const auto by_name = [](const InstanceMatch* a, const InstanceMatch* b) {
    return a->instance < b->instance;
  };
  if (!std::is_sorted(sorted.begin(), sorted.end(), by_name)) {  // the index answers in name order
    std::sort(sorted.begin(), sorted.end(), by_name);
  }
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1]->instance == sorted[i]->instance) return false;
  }
  out.resize(bound);
  Writer w(out.data());
  if (!conductor_compat) w.Lit("{\"data\":");
  w.Ch('{');
  if (!sorted.empty()) {
    w.Ch('"');
    w.Str(tenant);
    w.Lit("\":{");
    std::vector<std::pair<std::string, uint64_t>> dp;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const InstanceMatch& m = *sorted[i];
      if (i > 0) w.Ch(',');
      w.Ch('"');
      w.Str(m.instance);
      w.Lit("\":{\"CPU\":");
      w.Num(m.cpu);
      w.Lit(",\"DISK\":");
      w.Num(m.disk);
      w.Lit(",\"DP\":{");
      if (m.dp.size() == 1) {
        w.Ch('"');
        w.Num(m.dp[0].rank);
        w.Lit("\":");
        w.Num(m.dp[0].tokens);
      } else if (m.dp.size() > 1) {
        // Keys in byte order, as nlohmann's dump() ("10" before "2").
        dp.clear();
        for (const DpTokens& d : m.dp) dp.emplace_back(std::to_string(d.rank), d.tokens);
        std::sort(dp.begin(), dp.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        for (size_t r = 0; r < dp.size(); ++r) {
          if (r > 0) {
            if (dp[r - 1].first == dp[r].first) return false;
            w.Ch(',');
          }
          w.Ch('"');
          w.Str(dp[r].first);
          w.Lit("\":");
          w.Num(dp[r].second);
        }
      }
      w.Lit("},\"GPU\":");
      w.Num(m.gpu);
      w.Lit(",\"longest_matched\":");
      w.Num(m.longest_matched);
      w.Ch('}');
    }
    w.Ch('}');
  }
  w.Ch('}');
  if (!conductor_compat) w.Ch('}');
  out.resize(static_cast<size_t>(w.pos() - out.data()));
  return true;
}

}  // namespace

Result<QueryRequest> ParseQueryRequest(std::string_view body) {
  if (body.size() <= kMaxQueryBodyBytes) {
    if (std::optional<QueryRequest> fast = ScanQueryRequest(body)) return std::move(*fast);
  }
  return ParseQueryRequestWithDom(body);
}

std::string RenderQueryAnswer(const PrefixMatch& match, std::string_view tenant,
                              bool conductor_compat) {
  std::string out;
  if (RenderDirect(match, tenant, conductor_compat, out)) return out;
  return RenderQueryAnswerWithDom(match, tenant, conductor_compat);
}

}  // namespace kvindex
