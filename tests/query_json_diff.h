// The differential check of the query body parser (ParseQueryRequest, over the JSON library)
// against an independent reference: the nlohmann_json DOM parser below, which only the tests use
// (tests/query_json_diff_test.cpp and the query_json fuzz target). Both must accept the same
// bodies with the same requests, and reject the others with the same code and message; only the
// byte offset of an "invalid JSON" message may differ, each parser naming where it stopped.
#ifndef KVINDEX_TESTS_QUERY_JSON_DIFF_H_
#define KVINDEX_TESTS_QUERY_JSON_DIFF_H_

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvindex/core/json_depth.h"
#include "kvindex/core/scope.h"
#include "kvindex/query/query_json.h"

namespace kvindex::test {

namespace reference {

using nlohmann::json;

inline Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

inline Result<json> ParseBody(std::string_view body) {
  if (body.size() > kMaxQueryBodyBytes) {
    return Status::LimitExceeded("request body of " + std::to_string(body.size()) +
                                 " bytes exceeds " + std::to_string(kMaxQueryBodyBytes));
  }
  if (const size_t at = JsonTooDeepAt(body); at != std::string_view::npos) {
    return Bad("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
               std::to_string(at));
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

inline bool Present(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// A string field, or an integer spelled in decimal (tenant_id, cache_salt).
inline Status GetStringOrInt(const json& j, const char* key, std::string& out) {
  if (!Present(j, key)) return Status::Ok();
  const json& v = j.at(key);
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_number_integer()) {
    out = v.is_number_unsigned() ? std::to_string(v.get<uint64_t>())
                                 : std::to_string(v.get<int64_t>());
  } else {
    return Bad(std::string(key) + ": expected a string or an integer");
  }
  return Status::Ok();
}

inline Status GetString(const json& j, const char* key, std::string& out) {
  if (!Present(j, key)) return Status::Ok();
  if (!j.at(key).is_string()) return Bad(std::string(key) + ": expected a string");
  out = j.at(key).get<std::string>();
  return Status::Ok();
}

inline Status GetTokens(const json& j, const char* key, std::vector<TokenId>& out) {
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
        (t.is_number_unsigned()
             ? t.get<uint64_t>() > std::numeric_limits<TokenId>::max()
             : t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<TokenId>::max())) {
      return Bad(std::string(key) + "[" + std::to_string(i) +
                 "]: expected a token id from 0 to 4294967295");
    }
    out.push_back(static_cast<TokenId>(t.get<uint64_t>()));
  }
  return Status::Ok();
}

// A hash as a JSON integer (negative values are two's complement, as SGLang sends them) or a
// string in decimal or 0x hex.
inline bool ParseHashValue(const json& v, uint64_t& out) {
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

inline Status GetHashes(const json& j, const char* key, std::vector<uint64_t>& out) {
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

inline Status GetInstances(const json& j, const char* key, std::vector<std::string>& out) {
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
inline Status ParseScope(const json& j, const char* model_key, QueryRequest& request) {
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
  const bool group = Present(j, "group"), group_idx = Present(j, "group_idx");
  if (group && group_idx) return Bad("group and group_idx name one field: give one of them");
  request.match.group = 0;
  if (group || group_idx) {
    const json& g = j.at(group ? "group" : "group_idx");
    if (!g.is_number_integer() || g.get<int64_t>() < 0 ||
        g.get<int64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Bad("group: expected a KV-cache group index from 0 to 4294967295");
    }
    request.match.group = static_cast<uint32_t>(g.get<int64_t>());
  }
  return Status::Ok();
}

inline Result<QueryRequest> ReferenceParseQueryRequest(std::string_view body) {
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

}  // namespace reference

inline bool SameRequest(const QueryRequest& a, const QueryRequest& b) {
  return a.kind == b.kind && a.match.tenant == b.match.tenant && a.match.model == b.match.model &&
         a.match.lora == b.match.lora && a.match.salt == b.match.salt &&
         a.match.block_size == b.match.block_size && a.match.group == b.match.group &&
         a.match.instances == b.match.instances && a.tokens == b.tokens &&
         a.engine_hashes == b.engine_hashes && a.prefix_hashes == b.prefix_hashes &&
         a.explain == b.explain;
}

inline bool SameError(const std::string& a, const std::string& b) {
  constexpr std::string_view kInvalid = "invalid JSON";
  if (a.rfind(kInvalid, 0) == 0 && b.rfind(kInvalid, 0) == 0) return true;
  return a == b;
}

// "" when ParseQueryRequest and the reference agree on `body` (both accept with equal requests,
// or both reject with the same code and message); else what differs.
inline std::string ParseDifference(std::string_view body) {
  const Result<QueryRequest> lib = ParseQueryRequest(body);
  const Result<QueryRequest> ref = reference::ReferenceParseQueryRequest(body);
  if (lib.ok() != ref.ok()) {
    return std::string("library ") + (lib.ok() ? "accepts" : "rejects: " + lib.status().message()) +
           ", reference " + (ref.ok() ? "accepts" : "rejects: " + ref.status().message());
  }
  if (!lib.ok()) {
    if (lib.status().code() != ref.status().code() ||
        !SameError(lib.status().message(), ref.status().message())) {
      return "errors differ: " + lib.status().message() + " | " + ref.status().message();
    }
    static QueryRequest reused_after_error;
    const Status again = ParseQueryRequest(body, reused_after_error);
    if (again.ok() || again.message() != lib.status().message()) {
      return "the reusing parse answers otherwise: " + again.message();
    }
    return "";
  }
  if (!SameRequest(*lib, *ref)) return "requests differ";
  // The reusing form, into one request kept across every body checked (whatever the previous one
  // left in it), must give the same request.
  static QueryRequest reused;
  if (const Status status = ParseQueryRequest(body, reused); !status.ok()) {
    return "the reusing parse rejects: " + status.message();
  }
  return SameRequest(reused, *lib) ? "" : "the reusing parse gives another request";
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_QUERY_JSON_DIFF_H_
