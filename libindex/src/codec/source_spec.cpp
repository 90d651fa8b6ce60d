#include "kvindex/codec/source_spec.h"

#include <cctype>
#include <charconv>

#include <nlohmann/json.hpp>

#include "kvindex/core/address.h"
#include "kvindex/core/json_depth.h"
#include "kvindex/core/scope.h"

namespace kvindex {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

template <typename T>
bool ParseUnsigned(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseSigned(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// vLLM/SGLang/Mooncake/auto and the publishers that speak their formats (sglang-eagle, trtllm,
// lmcache), case-insensitive ("vLLM", "Mooncake" in conductor configs).
std::optional<std::string> NormaliseFormat(std::string_view format) {
  const std::string lower = Lower(format);
  for (const char* known :
       {"vllm", "sglang", "mooncake", "auto", "sglang-eagle", "trtllm", "lmcache"}) {
    if (lower == known) return lower;
  }
  return std::nullopt;
}

std::vector<std::string> SplitServes(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t plus = value.find('+', start);
    const std::string_view part =
        value.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    if (!part.empty()) out.emplace_back(part);
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  return out;
}

Status CheckSource(const SourceConfig& config) {
  if (config.name.empty()) return Status::InvalidArgument("empty instance name");
  if (config.endpoint.empty()) return Status::InvalidArgument("no endpoint");
  if (config.serves.size() > 1) {
    for (const std::string& s : config.serves) {
      if (s == "*") return Status::InvalidArgument("serves: '*' cannot be combined with names");
    }
  }
  if (config.dp_size == 0) return Status::InvalidArgument("dp-size must be at least 1");
  return Status::Ok();
}

}  // namespace

// Expands dp_size into one source per rank on port + r.
Result<std::vector<SourceConfig>> ExpandDp(const SourceConfig& config) {
  KVINDEX_RETURN_IF_ERROR(CheckSource(config));
  if (config.dp_size == 1) return std::vector<SourceConfig>{config};
  std::vector<SourceConfig> out;
  const DpRank first = config.dp_rank.value_or(0);
  for (uint32_t r = 0; r < config.dp_size; ++r) {
    SourceConfig rank = config;
    rank.dp_size = 1;
    rank.dp_rank = first + static_cast<DpRank>(r);
    KVINDEX_ASSIGN_OR_RETURN(rank.endpoint, OffsetEndpointPort(config.endpoint, r));
    if (!config.replay_endpoint.empty()) {
      KVINDEX_ASSIGN_OR_RETURN(rank.replay_endpoint, OffsetEndpointPort(config.replay_endpoint, r));
    }
    out.push_back(std::move(rank));
  }
  return out;
}

Result<std::string> OffsetEndpointPort(std::string_view endpoint, uint32_t offset) {
  auto address = ParseNetAddress(endpoint);
  // An ipc:// or inproc:// endpoint has no port: rank r > 0 takes the suffix `_dp<r>`, as the
  // publishers name theirs (TensorRT-LLM, vLLM).
  if (address.ok() && (address->scheme == "ipc" || address->scheme == "inproc") &&
      !address->path.empty()) {
    return offset == 0 ? std::string(endpoint)
                       : std::string(endpoint) + "_dp" + std::to_string(offset);
  }
  // A scheme and a port, nothing after it: what a ZeroMQ tcp:// endpoint is.
  if (!address.ok() || address->scheme.empty() || !address->port || !address->path.empty()) {
    return Status::InvalidArgument("endpoint '" + std::string(endpoint) +
                                   "' has no numeric port to offset (dp-size needs tcp://host:port "
                                   "or ipc://PATH)");
  }
  const uint32_t port = *address->port;
  if (port + offset > 65535) {
    return Status::InvalidArgument("endpoint '" + std::string(endpoint) + "' + " +
                                   std::to_string(offset) + " exceeds port 65535");
  }
  address->port = static_cast<uint16_t>(port + offset);
  return address->ToString();
}

namespace {

// The grammar of one `--source` value, before dp-size expands it.
Result<EngineSourceSpec> ParseSpecFields(std::string_view spec, const std::string& context) {
  auto fail = [&](std::string what) { return Status::InvalidArgument(context + ": " + what); };
  const size_t equals = spec.find('=');
  const size_t at = spec.find('@');
  if (equals == std::string_view::npos || at == std::string_view::npos || at < equals) {
    return fail("expected NAME=FORMAT@ENDPOINT[,key=value...]");
  }
  EngineSourceSpec out;
  SourceConfig& config = out.config;
  config.name = std::string(spec.substr(0, equals));
  if (config.name.empty()) return fail("empty instance name");
  const auto format = NormaliseFormat(spec.substr(equals + 1, at - equals - 1));
  if (!format) {
    return fail("unknown format '" + std::string(spec.substr(equals + 1, at - equals - 1)) +
                "' (vllm, sglang, mooncake, auto, sglang-eagle, trtllm or lmcache)");
  }
  config.format = *format;
  const std::string_view rest = spec.substr(at + 1);
  const size_t comma = rest.find(',');
  config.endpoint = std::string(rest.substr(0, comma));
  if (config.endpoint.empty()) return fail("empty endpoint");

  std::string_view keys = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  while (!keys.empty()) {
    const size_t next = keys.find(',');
    const std::string_view item = keys.substr(0, next);
    keys = next == std::string_view::npos ? std::string_view() : keys.substr(next + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    const bool has_value = eq != std::string_view::npos;
    auto need_value = [&]() -> Status {
      if (!has_value || value.empty()) return fail("key '" + key + "' needs a value");
      return Status::Ok();
    };
    if (key == "bind") {
      if (has_value && value != "true" && value != "1") return fail("bind takes no value");
      config.bind = true;
    } else if (key == "replay") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      config.replay_endpoint = std::string(value);
    } else if (key == "model") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      config.model = std::string(value);
    } else if (key == "block-size") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      if (!ParseUnsigned(value, config.block_size) || config.block_size == 0) {
        return fail("block-size must be a positive integer, got '" + std::string(value) + "'");
      }
    } else if (key == "dp-rank") {
      int64_t rank = 0;
      KVINDEX_RETURN_IF_ERROR(need_value());
      if (!ParseSigned(value, rank) || rank < 0 || rank > 1'000'000) {
        return fail("dp-rank must be a non-negative integer, got '" + std::string(value) + "'");
      }
      config.dp_rank = static_cast<DpRank>(rank);
    } else if (key == "dp-size") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      if (!ParseUnsigned(value, config.dp_size) || config.dp_size == 0 || config.dp_size > 4096) {
        return fail("dp-size must be an integer from 1 to 4096, got '" + std::string(value) + "'");
      }
      out.dp_size_given = true;
    } else if (key == "tenant") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      config.tenant = std::string(value);
    } else if (key == "lora") {
      config.lora = std::string(value);
    } else if (key == "salt") {
      config.salt = std::string(value);
    } else if (key == "topic") {
      config.topic = std::string(value);
    } else if (key == "serves") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      config.serves = SplitServes(value);
    } else if (key == "hash") {
      if (value != "standard") return fail("hash must be 'standard', got '" + std::string(value) + "'");
      config.hash_standard = true;
    } else if (key == "hash-seed") {
      KVINDEX_RETURN_IF_ERROR(need_value());
      if (!ParseUnsigned(value, config.hash_seed)) {
        return fail("hash-seed must be an unsigned integer, got '" + std::string(value) + "'");
      }
    } else {
      return fail("unknown key '" + key + "'");
    }
  }
  return out;
}

}  // namespace

bool IsEngineSourceSpec(std::string_view spec) {
  const size_t equals = spec.find('=');
  const size_t at = spec.find('@');
  if (equals == std::string_view::npos || at == std::string_view::npos || at < equals) return false;
  return Lower(spec.substr(equals + 1, at - equals - 1)) == "auto" &&
         Lower(spec.substr(at + 1, 7)) == "http://";
}

Result<std::vector<SourceConfig>> ParseSourceSpec(std::string_view spec) {
  const std::string context = "--source '" + std::string(spec) + "'";
  if (IsEngineSourceSpec(spec)) {
    return Status::InvalidArgument(context +
                                   ": an engine's HTTP address is asked for its endpoints when "
                                   "subscribe or record starts, not here");
  }
  KVINDEX_ASSIGN_OR_RETURN(EngineSourceSpec fields, ParseSpecFields(spec, context));
  auto expanded = ExpandDp(fields.config);
  if (!expanded.ok()) return expanded.status().WithContext(context);
  return expanded;
}

Result<EngineSourceSpec> ParseEngineSourceSpec(std::string_view spec) {
  const std::string context = "--source '" + std::string(spec) + "'";
  if (!IsEngineSourceSpec(spec)) {
    return Status::InvalidArgument(context + ": expected NAME=auto@http://HOST:PORT[,key=value...]");
  }
  KVINDEX_ASSIGN_OR_RETURN(EngineSourceSpec out, ParseSpecFields(spec, context));
  auto address = ParseNetAddress(out.config.endpoint);
  if (!address.ok() || address->host.empty() || !address->port || *address->port == 0 ||
      !(address->path.empty() || address->path == "/")) {
    return Status::InvalidArgument(context + ": the engine's address must be http://HOST:PORT");
  }
  if (out.config.bind) return Status::InvalidArgument(context + ": bind does not apply to auto@");
  if (!out.config.serves.empty()) {
    return Status::InvalidArgument(context + ": serves does not apply to auto@ (an engine, not a store)");
  }
  out.engine_host = address->host;
  out.engine_port = *address->port;
  return out;
}

namespace {

// Reads an optional string-or-integer field (tenant ids are sometimes numbers).
Status GetText(const json& object, const char* key, std::string& out, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    out = it->get<std::string>();
  } else if (it->is_number_integer()) {
    out = std::to_string(it->get<int64_t>());
  } else {
    return Status::Malformed(where + ": '" + key + "' must be a string");
  }
  return Status::Ok();
}

template <typename T>
Status GetUnsigned(const json& object, const char* key, T& out, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::Ok();
  if (it->is_number_unsigned() ||
      (it->is_number_integer() && it->get<int64_t>() >= 0)) {
    const uint64_t v = it->get<uint64_t>();
    if (v > std::numeric_limits<T>::max()) {
      return Status::InvalidArgument(where + ": '" + key + "' is too large");
    }
    out = static_cast<T>(v);
    return Status::Ok();
  }
  if (it->is_string() && ParseUnsigned(it->get_ref<const std::string&>(), out)) return Status::Ok();
  return Status::Malformed(where + ": '" + key + "' must be a non-negative integer");
}

Status GetBool(const json& object, const char* key, bool& out, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return Status::Malformed(where + ": '" + key + "' must be true or false");
  out = it->get<bool>();
  return Status::Ok();
}

Status GetServes(const json& object, std::vector<std::string>& out, const std::string& where) {
  const auto it = object.find("serves");
  if (it == object.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    out = SplitServes(it->get<std::string>());
    return Status::Ok();
  }
  if (!it->is_array()) return Status::Malformed(where + ": 'serves' must be a list of instances");
  out.clear();
  for (const auto& v : *it) {
    if (!v.is_string()) return Status::Malformed(where + ": 'serves' must be a list of instances");
    out.push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Result<json> ParseJson(std::string_view text, std::string_view source_name) {
  if (const size_t at = JsonTooDeepAt(text); at != std::string_view::npos) {
    return Status::Malformed(std::string(source_name) + ": byte " + std::to_string(at) +
                             ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  // nlohmann reports the position only through its exception; it never escapes this function.
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return Status::Malformed(std::string(source_name) + ": byte " + std::to_string(e.byte) +
                             ": invalid JSON");
  } catch (const json::exception& e) {
    return Status::Malformed(std::string(source_name) + ": invalid JSON: " + e.what());
  }
}

}  // namespace

Result<SourcesConfig> ParseSourcesConfig(std::string_view text, std::string_view source_name) {
  KVINDEX_ASSIGN_OR_RETURN(const json root, ParseJson(text, source_name));
  const std::string file(source_name);
  if (!root.is_object()) return Status::Malformed(file + ": expected a JSON object");
  SourcesConfig out;
  if (const auto port = root.find("http_server_port"); port != root.end() && !port->is_null()) {
    uint32_t value = 0;
    KVINDEX_RETURN_IF_ERROR(GetUnsigned(root, "http_server_port", value, file));
    if (value == 0 || value > 65535) {
      return Status::InvalidArgument(file + ": http_server_port must be 1..65535");
    }
    out.http_port = static_cast<uint16_t>(value);
  }
  const auto instances = root.find("kvevent_instance");
  if (instances == root.end()) return Status::Malformed(file + ": no 'kvevent_instance' map");
  if (!instances->is_object()) return Status::Malformed(file + ": 'kvevent_instance' must be a map");
  for (const auto& [key, entry] : instances->items()) {
    const std::string where = file + ": kvevent_instance '" + key + "'";
    if (!entry.is_object()) return Status::Malformed(where + ": expected an object");
    SourceConfig config;
    std::string instance_id;
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "instance_id", instance_id, where));
    config.name = instance_id.empty() ? key : instance_id;
    std::string type = "auto";
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "type", type, where));
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "format", type, where));
    const auto format = NormaliseFormat(type);
    if (!format) {
      return Status::InvalidArgument(where + ": unknown type '" + type +
                                     "' (vLLM, SGLang, Mooncake or auto)");
    }
    config.format = *format;
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "endpoint", config.endpoint, where));
    if (config.endpoint.empty()) {
      // The README's form: "ip" and "port". Written as NetAddress writes it, so that an IPv6 ip
      // gets the brackets that ParseNetAddress (and dp_size's port offset) read back.
      std::string ip;
      uint16_t port = 0;
      KVINDEX_RETURN_IF_ERROR(GetText(entry, "ip", ip, where));
      KVINDEX_RETURN_IF_ERROR(GetUnsigned(entry, "port", port, where));
      if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
      if (!ip.empty() && port != 0) config.endpoint = NetAddress{"tcp", ip, port, ""}.ToString();
    }
    if (config.endpoint.empty()) return Status::InvalidArgument(where + ": no 'endpoint' (or 'ip' and 'port')");
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "replay_endpoint", config.replay_endpoint, where));
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "modelname", config.model, where));
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "model", config.model, where));
    std::string lora_name;
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "lora_name", lora_name, where));
    std::optional<int64_t> lora_id;
    if (const auto it = entry.find("lora_id"); it != entry.end() && !it->is_null()) {
      if (!it->is_number_integer()) return Status::Malformed(where + ": 'lora_id' must be an integer");
      lora_id = it->get<int64_t>();
    }
    config.lora = LoraNameFrom(lora_name, lora_id);
    std::string tenant;
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "tenant_id", tenant, where));
    config.tenant = std::string(TenantOrDefault(tenant));
    KVINDEX_RETURN_IF_ERROR(GetUnsigned(entry, "block_size", config.block_size, where));
    if (const auto it = entry.find("dp_rank"); it != entry.end() && !it->is_null()) {
      uint32_t rank = 0;
      KVINDEX_RETURN_IF_ERROR(GetUnsigned(entry, "dp_rank", rank, where));
      config.dp_rank = static_cast<DpRank>(rank);
    }
    KVINDEX_RETURN_IF_ERROR(GetUnsigned(entry, "dp_size", config.dp_size, where));
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "additionalsalt", config.salt, where));
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "topic", config.topic, where));
    KVINDEX_RETURN_IF_ERROR(GetBool(entry, "bind", config.bind, where));
    KVINDEX_RETURN_IF_ERROR(GetServes(entry, config.serves, where));
    std::string hash;
    KVINDEX_RETURN_IF_ERROR(GetText(entry, "hash", hash, where));
    if (!hash.empty() && hash != "standard") {
      return Status::InvalidArgument(where + ": hash must be 'standard'");
    }
    config.hash_standard = hash == "standard";
    KVINDEX_RETURN_IF_ERROR(GetUnsigned(entry, "hash_seed", config.hash_seed, where));
    auto expanded = ExpandDp(config);
    if (!expanded.ok()) return expanded.status().WithContext(where);
    for (auto& source : *expanded) out.sources.push_back(std::move(source));
  }
  if (out.sources.empty()) return Status::InvalidArgument(file + ": 'kvevent_instance' is empty");
  return out;
}

std::string SourceConfigToJson(const SourceConfig& c) {
  json j = json::object();
  j["name"] = c.name;
  j["format"] = c.format;
  if (!c.endpoint.empty()) j["endpoint"] = c.endpoint;
  if (!c.replay_endpoint.empty()) j["replay"] = c.replay_endpoint;
  if (!c.model.empty()) j["model"] = c.model;
  if (c.block_size != 0) j["block_size"] = c.block_size;
  if (c.dp_rank) j["dp_rank"] = *c.dp_rank;
  j["tenant"] = c.tenant;
  if (!c.lora.empty()) j["lora"] = c.lora;
  if (!c.salt.empty()) j["salt"] = c.salt;
  if (!c.topic.empty()) j["topic"] = c.topic;
  if (!c.serves.empty()) j["serves"] = c.serves;
  if (c.bind) j["bind"] = true;
  if (c.hash_standard) j["hash"] = "standard";
  if (c.hash_seed != kDefaultHashSeed) j["hash_seed"] = c.hash_seed;
  // Names are kept byte for byte; written out, invalid UTF-8 becomes U+FFFD (core/utf8.h).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<SourceConfig> SourceConfigFromJson(std::string_view text) {
  KVINDEX_ASSIGN_OR_RETURN(const json j, ParseJson(text, "source definition"));
  const std::string where = "source definition";
  if (!j.is_object()) return Status::Malformed(where + ": expected a JSON object");
  SourceConfig c;
  KVINDEX_RETURN_IF_ERROR(GetText(j, "name", c.name, where));
  if (c.name.empty()) return Status::Malformed(where + ": no 'name'");
  KVINDEX_RETURN_IF_ERROR(GetText(j, "format", c.format, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "endpoint", c.endpoint, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "replay", c.replay_endpoint, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "model", c.model, where));
  KVINDEX_RETURN_IF_ERROR(GetUnsigned(j, "block_size", c.block_size, where));
  if (const auto it = j.find("dp_rank"); it != j.end() && !it->is_null()) {
    uint32_t rank = 0;
    KVINDEX_RETURN_IF_ERROR(GetUnsigned(j, "dp_rank", rank, where));
    c.dp_rank = static_cast<DpRank>(rank);
  }
  KVINDEX_RETURN_IF_ERROR(GetText(j, "tenant", c.tenant, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "lora", c.lora, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "salt", c.salt, where));
  KVINDEX_RETURN_IF_ERROR(GetText(j, "topic", c.topic, where));
  KVINDEX_RETURN_IF_ERROR(GetServes(j, c.serves, where));
  KVINDEX_RETURN_IF_ERROR(GetBool(j, "bind", c.bind, where));
  std::string hash;
  KVINDEX_RETURN_IF_ERROR(GetText(j, "hash", hash, where));
  c.hash_standard = hash == "standard";
  KVINDEX_RETURN_IF_ERROR(GetUnsigned(j, "hash_seed", c.hash_seed, where));
  return c;
}

}  // namespace kvindex
