// ParseQueryRequest and ParseCacheRequest: one pass of the JSON reader (json/json_reader.h) over
// the body collects every known field, the last occurrence of a key winning as in a JSON object;
// the checks then run in a fixed order (scope, kind, ids, instances, explain), so the first
// problem named is the same whatever the order of the keys. A syntax error anywhere in the body
// is reported before any field problem: the whole body is read first.
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "kvindex/core/json_depth.h"
#include "kvindex/core/scope.h"
#include "kvindex/json/json_reader.h"
#include "kvindex/query/query_json.h"

namespace kvindex {
namespace {

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

// What a field held, as far as the checks need it.
enum class Seen : uint8_t { kAbsent, kGood, kOther };

struct StringField {
  Seen seen = Seen::kAbsent;
  std::string value;
};

struct IntField {
  Seen seen = Seen::kAbsent;
  int64_t value = 0;  // an unsigned value above INT64_MAX wraps, as nlohmann's get<int64_t>()
};

struct IdsField {
  Seen seen = Seen::kAbsent;  // kGood: an array
  size_t count = 0;
  size_t first_bad = std::string_view::npos;
};

struct Fields {
  StringField model, model_name, lora_name, instance_id;
  IntField lora_id, block_size, group, group_idx;
  StringField tenant, salt;  // kGood: a string or an integer, in decimal
  IdsField tokens, block_hash, seq_hashes;
  std::vector<TokenId> token_ids;
  std::vector<uint64_t> block_hashes, seq_hash_values;
  Seen instances = Seen::kAbsent;  // kOther: not a string or an array of strings
  std::vector<std::string> instance_names;
  Seen explain = Seen::kAbsent;
  bool explain_value = false;

  // Back to "nothing seen", keeping every buffer's storage for the next body.
  void Clear() {
    for (StringField* f : {&model, &model_name, &lora_name, &instance_id, &tenant, &salt}) {
      f->seen = Seen::kAbsent;
      f->value.clear();
    }
    lora_id = {};
    block_size = {};
    group = {};
    group_idx = {};
    tokens = {};
    block_hash = {};
    seq_hashes = {};
    token_ids.clear();
    block_hashes.clear();
    seq_hash_values.clear();
    instances = Seen::kAbsent;
    instance_names.clear();
    explain = Seen::kAbsent;
    explain_value = false;
  }
};

// The fields of the body being read, one set per thread: its buffers serve the next body.
// Buffers grown past kKeptIds elements by a large body are released after it.
constexpr size_t kKeptIds = size_t{1} << 18;

Fields& ThreadFields() {
  thread_local Fields fields;
  fields.Clear();
  return fields;
}

void ReleaseLarge(Fields& f) {
  if (f.token_ids.capacity() > kKeptIds) std::vector<TokenId>().swap(f.token_ids);
  if (f.block_hashes.capacity() > kKeptIds) std::vector<uint64_t>().swap(f.block_hashes);
  if (f.seq_hash_values.capacity() > kKeptIds) std::vector<uint64_t>().swap(f.seq_hash_values);
}

bool IsInteger(const JsonNumber& n) {
  return n.kind == JsonNumber::Kind::kUnsigned || n.kind == JsonNumber::Kind::kSigned;
}

int64_t AsInt64(const JsonNumber& n) {
  return n.kind == JsonNumber::Kind::kUnsigned ? static_cast<int64_t>(n.u) : n.i;
}

// A hash as a JSON integer (a negative one is two's complement, as SGLang sends them) or a string
// in decimal or 0x hex.
bool HashFromString(std::string_view s, uint64_t& out) {
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* begin = s.data() + (hex ? 2 : 0);
  const char* end = s.data() + s.size();
  if (begin == end) return false;
  const auto [ptr, ec] = std::from_chars(begin, end, out, hex ? 16 : 10);
  return ec == std::errc() && ptr == end;
}

class HashElements final : public JsonElementVisitor {
 public:
  HashElements(IdsField& field, std::vector<uint64_t>& out) : field_(field), out_(out) {}
  bool Element(size_t index, JsonValue& value) override {
    ++field_.count;
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    uint64_t h = 0;
    bool good = false;
    if (kind == JsonKind::kNumber) {
      JsonNumber n;
      if (!value.Number(&n)) return false;
      good = IsInteger(n);
      h = n.kind == JsonNumber::Kind::kUnsigned ? n.u : static_cast<uint64_t>(n.i);
    } else if (kind == JsonKind::kString) {
      std::string_view s;
      if (!value.String(&s)) return false;
      good = HashFromString(s, h);
    } else if (!value.Skip()) {
      return false;
    }
    if (good) {
      out_.push_back(h);
    } else if (field_.first_bad == std::string_view::npos) {
      field_.first_bad = index;
    }
    return true;
  }

 private:
  IdsField& field_;
  std::vector<uint64_t>& out_;
};

class NameElements final : public JsonElementVisitor {
 public:
  NameElements(Seen& seen, std::vector<std::string>& out) : seen_(seen), out_(out) {}
  bool Element(size_t, JsonValue& value) override {
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    if (kind != JsonKind::kString) {
      seen_ = Seen::kOther;
      return value.Skip();
    }
    std::string_view s;
    if (!value.String(&s)) return false;
    out_.emplace_back(s);
    return true;
  }

 private:
  Seen& seen_;
  std::vector<std::string>& out_;
};

class BodyFields final : public JsonFieldVisitor {
 public:
  BodyFields(Fields& f, size_t body_size) : f_(f), body_size_(body_size) {}

  bool Field(std::string_view key, JsonValue& value) override {
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    if (kind == JsonKind::kNull) return value.Skip() && Reset(key);
    if (key == "model") return ReadString(value, kind, f_.model);
    if (key == "token_ids") return ReadTokens(value, kind);
    if (key == "block_hash") return ReadHashes(value, kind, f_.block_hash, f_.block_hashes);
    if (key == "seq_hashes") return ReadHashes(value, kind, f_.seq_hashes, f_.seq_hash_values);
    if (key == "lora_name") return ReadString(value, kind, f_.lora_name);
    if (key == "lora_id") return ReadInt(value, kind, f_.lora_id);
    if (key == "tenant_id") return ReadStringOrInt(value, kind, f_.tenant);
    if (key == "cache_salt") return ReadStringOrInt(value, kind, f_.salt);
    if (key == "block_size") return ReadInt(value, kind, f_.block_size);
    if (key == "group") return ReadInt(value, kind, f_.group);
    if (key == "group_idx") return ReadInt(value, kind, f_.group_idx);
    if (key == "instance_id") return ReadString(value, kind, f_.instance_id);
    if (key == "instances") return ReadInstances(value, kind);
    if (key == "model_name") return ReadString(value, kind, f_.model_name);
    if (key == "explain") {
      f_.explain = kind == JsonKind::kBool ? Seen::kGood : Seen::kOther;
      return kind == JsonKind::kBool ? value.Bool(&f_.explain_value) : value.Skip();
    }
    return value.Skip();
  }
  void Restart() override { f_.Clear(); }

 private:
  // A null value: the key counts as absent (the last occurrence wins).
  bool Reset(std::string_view key) {
    if (key == "model") f_.model = {};
    if (key == "model_name") f_.model_name = {};
    if (key == "lora_name") f_.lora_name = {};
    if (key == "instance_id") f_.instance_id = {};
    if (key == "lora_id") f_.lora_id = {};
    if (key == "block_size") f_.block_size = {};
    if (key == "group") f_.group = {};
    if (key == "group_idx") f_.group_idx = {};
    if (key == "tenant_id") f_.tenant = {};
    if (key == "cache_salt") f_.salt = {};
    if (key == "token_ids") f_.tokens = {};
    if (key == "block_hash") f_.block_hash = {};
    if (key == "seq_hashes") f_.seq_hashes = {};
    if (key == "instances") {
      f_.instances = Seen::kAbsent;
      f_.instance_names.clear();
    }
    if (key == "explain") f_.explain = Seen::kAbsent;
    return true;
  }
  static bool ReadString(JsonValue& value, JsonKind kind, StringField& out) {
    out.seen = kind == JsonKind::kString ? Seen::kGood : Seen::kOther;
    if (kind != JsonKind::kString) return value.Skip();
    std::string_view s;
    if (!value.String(&s)) return false;
    out.value.assign(s);
    return true;
  }
  static bool ReadInt(JsonValue& value, JsonKind kind, IntField& out) {
    out.seen = Seen::kOther;
    if (kind != JsonKind::kNumber) return value.Skip();
    JsonNumber n;
    if (!value.Number(&n)) return false;
    if (IsInteger(n)) {
      out.seen = Seen::kGood;
      out.value = AsInt64(n);
    }
    return true;
  }
  static bool ReadStringOrInt(JsonValue& value, JsonKind kind, StringField& out) {
    if (kind == JsonKind::kString) return ReadString(value, kind, out);
    out.seen = Seen::kOther;
    if (kind != JsonKind::kNumber) return value.Skip();
    JsonNumber n;
    if (!value.Number(&n)) return false;
    if (IsInteger(n)) {
      out.seen = Seen::kGood;
      out.value = n.kind == JsonNumber::Kind::kUnsigned ? std::to_string(n.u) : std::to_string(n.i);
    }
    return true;
  }
  bool ReadTokens(JsonValue& value, JsonKind kind) {
    f_.tokens = {};
    f_.token_ids.clear();
    f_.tokens.seen = kind == JsonKind::kArray ? Seen::kGood : Seen::kOther;
    if (kind != JsonKind::kArray) return value.Skip();
    // About one id per 4 bytes of a body of short ids: one allocation for the common query.
    f_.token_ids.reserve(body_size_ / 4);
    JsonUintArrayRules rules;
    rules.max = std::numeric_limits<TokenId>::max();
    rules.minus_zero_ok = true;
    JsonUintArrayScan scan;
    if (!value.UnsignedArray(rules, &f_.token_ids, &scan)) return false;
    f_.tokens.count = scan.count;
    f_.tokens.first_bad = scan.first_bad;
    return true;
  }
  static bool ReadHashes(JsonValue& value, JsonKind kind, IdsField& field,
                         std::vector<uint64_t>& out) {
    field = {};
    out.clear();
    field.seen = kind == JsonKind::kArray ? Seen::kGood : Seen::kOther;
    if (kind != JsonKind::kArray) return value.Skip();
    HashElements elements(field, out);
    return value.ForEachElement(elements);
  }
  bool ReadInstances(JsonValue& value, JsonKind kind) {
    f_.instance_names.clear();
    f_.instances = Seen::kGood;
    if (kind == JsonKind::kString) {
      std::string_view s;
      if (!value.String(&s)) return false;
      f_.instance_names.emplace_back(s);
      return true;
    }
    if (kind != JsonKind::kArray) {
      f_.instances = Seen::kOther;
      return value.Skip();
    }
    NameElements elements(f_.instances, f_.instance_names);
    return value.ForEachElement(elements);
  }

  Fields& f_;
  size_t body_size_;
};

// Reads the whole body into `fields`, or the error of a body that is too large, too deep, not
// JSON or not an object.
Status ReadBody(std::string_view body, Fields& fields) {
  if (body.size() > kMaxQueryBodyBytes) {
    return Status::LimitExceeded("request body of " + std::to_string(body.size()) +
                                 " bytes exceeds " + std::to_string(kMaxQueryBodyBytes));
  }
  if (const size_t at = JsonTooDeepAtFast(body); at != std::string_view::npos) {
    return Bad("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
               std::to_string(at));
  }
  // A UTF-8 byte order mark before the body is allowed (as RFC 8259 lets a parser do).
  size_t skipped = 0;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") {
    body.remove_prefix(3);
    skipped = 3;
  }
  // A NUL byte ends the body, as it ends nlohmann_json's input (the language the bodies have
  // always had): text after it is ignored, and a NUL inside a string leaves it unterminated.
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) body = body.substr(0, nul);
  // One reader per thread: its buffers serve the next request without allocating.
  thread_local JsonReader reader;
  BodyFields visitor(fields, body.size());
  // Most of a body is its token_ids: read from the text, the parser does not scan it.
  JsonArrayHint ids;
  ids.key = "token_ids";
  ids.max = std::numeric_limits<TokenId>::max();
  const JsonError error = reader.ReadObject(body, visitor, ids);
  switch (error.kind) {
    case JsonError::Kind::kNone:
      return Status::Ok();
    case JsonError::Kind::kNotObject:
      return Bad("request body must be a JSON object");
    default:
      if (error.offset == std::string_view::npos) return Bad("invalid JSON");
      return Bad("invalid JSON at byte " + std::to_string(error.offset + skipped));
  }
}

Status CheckString(const StringField& f, std::string_view key) {
  if (f.seen == Seen::kOther) return Bad(std::string(key) + ": expected a string");
  return Status::Ok();
}

// The scope fields every body shares: model (under `model_key`), LoRA, tenant, salt, block size.
Status ScopeFrom(const Fields& f, const StringField& model, std::string_view model_key,
                 QueryRequest& request) {
  if (model.seen == Seen::kAbsent) return Bad(std::string(model_key) + ": missing");
  KVINDEX_RETURN_IF_ERROR(CheckString(model, model_key));
  request.match.model.assign(model.value);
  KVINDEX_RETURN_IF_ERROR(CheckString(f.lora_name, "lora_name"));
  const std::string_view lora_name =
      f.lora_name.seen == Seen::kGood ? std::string_view(f.lora_name.value) : std::string_view();
  std::optional<int64_t> lora_id;
  if (f.lora_id.seen == Seen::kOther) return Bad("lora_id: expected an integer");
  if (f.lora_id.seen == Seen::kGood) lora_id = f.lora_id.value;
  if (!lora_name.empty() && lora_id && *lora_id >= 0) {
    return Bad("lora_id and lora_name are mutually exclusive");
  }
  request.match.lora = LoraNameFrom(lora_name, lora_id);
  if (f.tenant.seen == Seen::kOther) return Bad("tenant_id: expected a string or an integer");
  request.match.tenant.assign(TenantOrDefault(f.tenant.seen == Seen::kGood ? f.tenant.value : ""));
  if (f.salt.seen == Seen::kOther) return Bad("cache_salt: expected a string or an integer");
  request.match.salt.clear();
  if (f.salt.seen == Seen::kGood) request.match.salt.assign(f.salt.value);
  request.match.block_size.reset();
  if (f.block_size.seen != Seen::kAbsent) {
    if (f.block_size.seen == Seen::kOther || f.block_size.value <= 0 ||
        f.block_size.value > std::numeric_limits<uint32_t>::max()) {
      return Bad("block_size: expected a positive integer");
    }
    request.match.block_size = static_cast<uint32_t>(f.block_size.value);
  }
  request.match.group = 0;  // group 0 (full attention) unless the body names one
  if (f.group.seen != Seen::kAbsent && f.group_idx.seen != Seen::kAbsent) {
    return Bad("group and group_idx name one field: give one of them");
  }
  const IntField& group = f.group.seen != Seen::kAbsent ? f.group : f.group_idx;
  if (group.seen != Seen::kAbsent) {
    if (group.seen == Seen::kOther || group.value < 0 ||
        group.value > std::numeric_limits<uint32_t>::max()) {
      return Bad("group: expected a KV-cache group index from 0 to 4294967295");
    }
    request.match.group = static_cast<uint32_t>(group.value);
  }
  return Status::Ok();
}

Status TokensFrom(Fields& f, QueryRequest& request) {
  if (f.tokens.seen == Seen::kOther) return Bad("token_ids: expected an array of token ids");
  if (f.tokens.count > kMaxQueryTokens) {
    return Bad("token_ids: " + std::to_string(f.tokens.count) + " ids exceed the limit of " +
               std::to_string(kMaxQueryTokens));
  }
  if (f.tokens.first_bad != std::string_view::npos) {
    return Bad("token_ids[" + std::to_string(f.tokens.first_bad) +
               "]: expected a token id from 0 to 4294967295");
  }
  request.kind = QueryKind::kTokens;
  // A swap: the request's old buffer becomes the next body's (a request reused per thread and the
  // per-thread fields then trade two buffers and allocate nothing).
  request.tokens.swap(f.token_ids);
  return Status::Ok();
}

Status InstancesFrom(Fields& f, QueryRequest& request) {
  if (f.instances == Seen::kOther) return Bad("instances: expected an array of instance names");
  for (std::string& name : f.instance_names) request.match.instances.push_back(std::move(name));
  f.instance_names.clear();
  return Status::Ok();
}

// Fills `request` (reset first, its buffers reused) from the fields read.
Status QueryFrom(Fields& f, QueryRequest& request) {
  request.match.instances.clear();
  request.engine_hashes.clear();
  request.prefix_hashes.clear();
  request.explain = false;
  KVINDEX_RETURN_IF_ERROR(ScopeFrom(f, f.model, "model", request));
  const int kinds = (f.tokens.seen != Seen::kAbsent) + (f.block_hash.seen != Seen::kAbsent) +
                    (f.seq_hashes.seen != Seen::kAbsent);
  if (kinds != 1) return Bad("exactly one of token_ids, block_hash or seq_hashes is required");
  if (f.tokens.seen != Seen::kAbsent) {
    KVINDEX_RETURN_IF_ERROR(TokensFrom(f, request));
  } else {
    request.tokens.clear();
    const bool engine = f.block_hash.seen != Seen::kAbsent;
    const IdsField& field = engine ? f.block_hash : f.seq_hashes;
    const std::string_view key = engine ? "block_hash" : "seq_hashes";
    if (field.seen == Seen::kOther) return Bad(std::string(key) + ": expected an array of hashes");
    if (field.count > kMaxQueryTokens) return Bad(std::string(key) + ": too many hashes");
    if (field.first_bad != std::string_view::npos) {
      return Bad(std::string(key) + "[" + std::to_string(field.first_bad) +
                 "]: expected a 64-bit hash");
    }
    request.kind = engine ? QueryKind::kEngineHashes : QueryKind::kPrefixHashes;
    const std::vector<uint64_t>& hashes = engine ? f.block_hashes : f.seq_hash_values;
    if (engine) {
      request.engine_hashes.reserve(hashes.size());
      for (uint64_t h : hashes) request.engine_hashes.push_back(EngineHash{h});
    } else {
      request.prefix_hashes.reserve(hashes.size());
      for (uint64_t h : hashes) request.prefix_hashes.push_back(PrefixHash{h});
    }
  }
  KVINDEX_RETURN_IF_ERROR(CheckString(f.instance_id, "instance_id"));
  if (f.instance_id.seen == Seen::kGood && !f.instance_id.value.empty()) {
    request.match.instances.push_back(f.instance_id.value);
  }
  KVINDEX_RETURN_IF_ERROR(InstancesFrom(f, request));
  if (f.explain == Seen::kOther) return Bad("explain: expected true or false");
  request.explain = f.explain == Seen::kGood && f.explain_value;
  return Status::Ok();
}

Status CacheFrom(Fields& f, QueryRequest& request) {
  request.match.instances.clear();
  request.engine_hashes.clear();
  request.prefix_hashes.clear();
  request.explain = false;
  const bool named = f.model_name.seen != Seen::kAbsent;
  KVINDEX_RETURN_IF_ERROR(
      ScopeFrom(f, named ? f.model_name : f.model, named ? "model_name" : "model", request));
  if (f.tokens.seen == Seen::kAbsent) return Bad("token_ids: missing");
  KVINDEX_RETURN_IF_ERROR(TokensFrom(f, request));
  return InstancesFrom(f, request);
}

// Reads `body` into the thread's fields and fills `request` from them with `from`.
Status Parse(std::string_view body, QueryRequest& request,
             Status (*from)(Fields&, QueryRequest&)) {
  Fields& f = ThreadFields();
  Status status = ReadBody(body, f);
  if (status.ok()) status = from(f, request);
  ReleaseLarge(f);
  return status;
}

}  // namespace

Status ParseQueryRequest(std::string_view body, QueryRequest& request) {
  return Parse(body, request, QueryFrom);
}

Status ParseCacheRequest(std::string_view body, QueryRequest& request) {
  return Parse(body, request, CacheFrom);
}

Result<QueryRequest> ParseQueryRequest(std::string_view body) {
  QueryRequest request;
  KVINDEX_RETURN_IF_ERROR(ParseQueryRequest(body, request));
  return request;
}

Result<QueryRequest> ParseCacheRequest(std::string_view body) {
  QueryRequest request;
  KVINDEX_RETURN_IF_ERROR(ParseCacheRequest(body, request));
  return request;
}

}  // namespace kvindex
