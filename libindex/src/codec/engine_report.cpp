#include "kvindex/codec/engine_report.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "kvindex/core/address.h"
#include "kvindex/core/json_depth.h"

namespace kvindex {
namespace {

using nlohmann::json;

// Parses without exceptions: a discarded value is bad JSON.
Result<json> ParseBody(std::string_view body, std::string_view what) {
  if (body.size() > kMaxEngineReportBytes) {
    return Status::LimitExceeded(std::string(what) + ": answer larger than " +
                                 std::to_string(kMaxEngineReportBytes) + " bytes");
  }
  if (JsonTooDeepAt(body) != std::string_view::npos) {
    return Status::Malformed(std::string(what) + ": answer nested deeper than " +
                             std::to_string(kMaxJsonDepth) + " levels");
  }
  json value = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Status::Malformed(std::string(what) + ": answer is not JSON");
  return value;
}

// A member that is absent or null reads as `fallback`; anything but a string is an error.
Result<std::string> StringField(const json& object, const char* key, std::string_view fallback,
                                std::string_view what) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string(fallback);
  if (!it->is_string()) {
    return Status::Malformed(std::string(what) + ": '" + key + "' is not a string");
  }
  return it->get_ref<const std::string&>();
}

// A positive integer at most `max`; absent or null reads as 0.
Result<uint32_t> CountField(const json& object, const char* key, uint32_t max,
                            std::string_view what) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return uint32_t{0};
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v >= 1 && v <= max) return static_cast<uint32_t>(v);
  }
  return Status::Malformed(std::string(what) + ": '" + key + "' is not an integer from 1 to " +
                           std::to_string(max));
}

}  // namespace

namespace {

// SGLang's PUB socket binds an endpoint holding a wildcard (`*`, `::`, `0.0.0.0`; its
// ZmqEventPublisher tests the text) and connects to any other: then kvindex binds.
bool SglangPublisherConnects(std::string_view endpoint) {
  return endpoint.rfind("tcp://", 0) == 0 && endpoint.find('*') == std::string_view::npos &&
         endpoint.find("::") == std::string_view::npos &&
         endpoint.find("0.0.0.0") == std::string_view::npos;
}

// The `--kv-events-config` value of the server arguments: a string holding JSON, or an object.
// nullopt when absent, null or empty.
Result<std::optional<json>> EventsConfig(const json& root, const std::string& what) {
  const auto it = root.find("kv_events_config");
  if (it == root.end() || it->is_null() ||
      (it->is_string() && it->get_ref<const std::string&>().empty())) {
    return std::optional<json>();
  }
  json config;
  if (it->is_string()) {
    KVINDEX_ASSIGN_OR_RETURN(
        config, ParseBody(it->get_ref<const std::string&>(), what + ": kv_events_config"));
  } else {
    config = *it;
  }
  if (!config.is_object()) {
    return Status::Malformed(what + ": kv_events_config is not a JSON object");
  }
  return std::optional<json>(std::move(config));
}

// The publisher kind: "zmq" is read, "null" (the default) publishes nothing.
Status CheckPublisher(const json& object, const std::string& where) {
  KVINDEX_ASSIGN_OR_RETURN(const std::string publisher,
                           StringField(object, "publisher", "null", where));
  if (publisher == "null") {
    return Status::NotFound(where + ": publisher is 'null' (the engine publishes no events)");
  }
  if (publisher != "zmq") {
    return Status::Unsupported(where + ": publisher '" + publisher + "' (kvindex reads zmq)");
  }
  return Status::Ok();
}

// The structured `kv_events` descriptor of newer SGLang servers: publisher, endpoint_host,
// endpoint_port_base (rank r on base + r), topic, block_size, dp_size.
Status ReadDescriptor(const json& d, const std::string& what, EnginePublisher& pub,
                      EngineReport& report) {
  const std::string where = what + ": kv_events";
  if (!d.is_object()) return Status::Malformed(where + " is not a JSON object");
  KVINDEX_RETURN_IF_ERROR(CheckPublisher(d, where));
  KVINDEX_ASSIGN_OR_RETURN(std::string host, StringField(d, "endpoint_host", "", where));
  KVINDEX_ASSIGN_OR_RETURN(const uint32_t port, CountField(d, "endpoint_port_base", 65535, where));
  if (host.empty() || port == 0) {
    return Status::NotFound(where + ": no endpoint_host and endpoint_port_base");
  }
  // An IPv6 host comes bracketed; a bare one is bracketed here.
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  pub.endpoint = "tcp://" + host + ":" + std::to_string(port);
  KVINDEX_ASSIGN_OR_RETURN(pub.topic, StringField(d, "topic", "", where));
  KVINDEX_ASSIGN_OR_RETURN(
      report.block_size, CountField(d, "block_size", std::numeric_limits<uint32_t>::max(), where));
  KVINDEX_ASSIGN_OR_RETURN(report.dp_size, CountField(d, "dp_size", 4096, where));
  return Status::Ok();
}

}  // namespace

Result<EngineReport> ParseSglangServerInfo(std::string_view body) {
  const std::string what = "GET /server_info";
  KVINDEX_ASSIGN_OR_RETURN(const json root, ParseBody(body, what));
  if (!root.is_object()) return Status::Malformed(what + ": answer is not a JSON object");
  const auto descriptor = root.find("kv_events");
  const bool described = descriptor != root.end() && !descriptor->is_null();
  auto config = EventsConfig(root, what);
  // With the descriptor, the configuration only adds the replay endpoint: one it cannot give is
  // not an error.
  if (!config.ok() && !described) return config.status();
  if (!described && !config->has_value()) {
    return Status::NotFound(what +
                            ": the engine reports no kv_events_config (start it with "
                            "--kv-events-config)");
  }
  EngineReport report;
  report.format = "sglang";
  EnginePublisher pub;
  if (described) {
    KVINDEX_RETURN_IF_ERROR(ReadDescriptor(*descriptor, what, pub, report));
    if (config.ok() && config->has_value()) {
      const json& c = **config;
      if (const auto it = c.find("replay_endpoint"); it != c.end() && it->is_string()) {
        pub.replay_endpoint = it->get<std::string>();
      }
    }
  } else {
    const json& c = **config;
    const std::string where = what + ": kv_events_config";
    KVINDEX_RETURN_IF_ERROR(CheckPublisher(c, where));
    KVINDEX_ASSIGN_OR_RETURN(pub.endpoint, StringField(c, "endpoint", "tcp://*:5557", where));
    KVINDEX_ASSIGN_OR_RETURN(pub.replay_endpoint, StringField(c, "replay_endpoint", "", where));
    KVINDEX_ASSIGN_OR_RETURN(pub.topic, StringField(c, "topic", "", where));
  }
  pub.publisher_connects = SglangPublisherConnects(pub.endpoint);
  report.publishers.push_back(std::move(pub));
  if (report.block_size == 0) {
    KVINDEX_ASSIGN_OR_RETURN(
        report.block_size,
        CountField(root, "page_size", std::numeric_limits<uint32_t>::max(), what));
  }
  if (report.dp_size == 0) {
    KVINDEX_ASSIGN_OR_RETURN(report.dp_size, CountField(root, "dp_size", 4096, what));
  }
  KVINDEX_ASSIGN_OR_RETURN(report.model, StringField(root, "served_model_name", "", what));
  if (report.model.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(report.model, StringField(root, "model_path", "", what));
  }
  return report;
}

Result<EngineReport> ParseVllmEventSources(std::string_view body) {
  const std::string what = "GET /kv_event_sources";
  KVINDEX_ASSIGN_OR_RETURN(const json root, ParseBody(body, what));
  if (!root.is_array()) return Status::Malformed(what + ": answer is not a JSON array");
  if (root.empty()) {
    return Status::NotFound(what + ": the engine reports no event source (start it with "
                                   "--kv-events-config)");
  }
  if (root.size() > 4096) return Status::LimitExceeded(what + ": more than 4096 sources");
  EngineReport report;
  report.format = "vllm";
  for (size_t i = 0; i < root.size(); ++i) {
    const json& entry = root[i];
    const std::string where = what + ": source " + std::to_string(i);
    if (!entry.is_object()) return Status::Malformed(where + " is not a JSON object");
    EnginePublisher pub;
    KVINDEX_ASSIGN_OR_RETURN(pub.endpoint, StringField(entry, "endpoint", "", where));
    if (pub.endpoint.empty()) return Status::NotFound(where + ": no 'endpoint'");
    KVINDEX_ASSIGN_OR_RETURN(pub.replay_endpoint, StringField(entry, "replay_endpoint", "", where));
    KVINDEX_ASSIGN_OR_RETURN(pub.topic, StringField(entry, "topic", "", where));
    if (const auto it = entry.find("data_parallel_rank"); it != entry.end() && !it->is_null()) {
      if (!it->is_number_unsigned() || it->get<uint64_t>() > 1'000'000) {
        return Status::Malformed(where + ": 'data_parallel_rank' is not a non-negative integer");
      }
      pub.dp_rank = static_cast<DpRank>(it->get<uint64_t>());
    }
    report.publishers.push_back(std::move(pub));
  }
  return report;
}

Result<std::string> ParseServedModel(std::string_view body) {
  const std::string what = "GET /v1/models";
  KVINDEX_ASSIGN_OR_RETURN(const json root, ParseBody(body, what));
  const json* data = nullptr;
  if (root.is_object()) {
    if (const auto it = root.find("data"); it != root.end() && it->is_array()) data = &*it;
  }
  if (data == nullptr) return Status::Malformed(what + ": answer has no 'data' list");
  if (data->empty() || !(*data)[0].is_object()) {
    return Status::NotFound(what + ": the engine lists no model");
  }
  KVINDEX_ASSIGN_OR_RETURN(std::string id, StringField((*data)[0], "id", "", what));
  if (id.empty()) return Status::NotFound(what + ": the first model has no 'id'");
  return id;
}

namespace {

// A reported endpoint as kvindex connects to it: a wildcard or missing host is the engine's.
Result<std::string> Reachable(const std::string& endpoint, const std::string& engine_host,
                              std::string_view what) {
  auto address = ParseNetAddress(endpoint);
  if (!address.ok() || address->scheme != "tcp" || !address->port || !address->path.empty()) {
    return Status::Unsupported(std::string(what) + " '" + endpoint +
                               "' is not tcp://HOST:PORT (kvindex connects over TCP)");
  }
  if (*address->port == 0) {
    return Status::Unavailable(std::string(what) + " '" + endpoint + "' has port 0 (not bound yet)");
  }
  const std::string& host = address->host;
  if (host.empty() || host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]") {
    address->host = engine_host;
  }
  return address->ToString();
}

Result<std::vector<SourceConfig>> Resolve(const EngineSourceSpec& spec, const EngineReport& report) {
  const SourceConfig& given = spec.config;
  const std::string where = "source '" + given.name + "' (" + given.endpoint + ")";
  if (report.publishers.empty()) return Status::NotFound(where + ": the engine reports no publisher");
  SourceConfig base = given;
  base.format = report.format;
  if (base.model.empty()) base.model = report.model;
  if (base.model.empty()) {
    return Status::NotFound(where + ": the engine reports no model; give model=M");
  }
  if (base.block_size == 0) base.block_size = report.block_size;
  std::vector<SourceConfig> out;
  auto fill = [&](const EnginePublisher& pub, SourceConfig& config) -> Status {
    KVINDEX_ASSIGN_OR_RETURN(config.endpoint, Reachable(pub.endpoint, spec.engine_host,
                                                        where + ": endpoint"));
    if (given.replay_endpoint.empty() && !pub.replay_endpoint.empty()) {
      KVINDEX_ASSIGN_OR_RETURN(config.replay_endpoint,
                               Reachable(pub.replay_endpoint, spec.engine_host,
                                         where + ": replay endpoint"));
    }
    if (given.topic.empty()) config.topic = pub.topic;
    return Status::Ok();
  };
  if (report.format == "sglang") {
    // One publisher reported; the DP ranks bind port + r (the replay port + r), or connect there
    // when the endpoint names a host: then kvindex binds port + r.
    SourceConfig config = base;
    KVINDEX_RETURN_IF_ERROR(fill(report.publishers.front(), config));
    config.bind = report.publishers.front().publisher_connects;
    if (!spec.dp_size_given) config.dp_size = report.dp_size == 0 ? 1 : report.dp_size;
    auto expanded = ExpandDp(config);
    if (!expanded.ok()) return expanded.status().WithContext(where);
    return expanded;
  }
  // Each rank reported with its own (bound) endpoint.
  if (spec.dp_size_given && given.dp_size != report.publishers.size()) {
    return Status::NotFound(where + ": dp-size=" + std::to_string(given.dp_size) +
                            " but the engine reports " + std::to_string(report.publishers.size()) +
                            " rank(s)");
  }
  for (size_t i = 0; i < report.publishers.size(); ++i) {
    const EnginePublisher& pub = report.publishers[i];
    SourceConfig config = base;
    config.dp_size = 1;
    KVINDEX_RETURN_IF_ERROR(fill(pub, config));
    if (!given.replay_endpoint.empty()) {
      KVINDEX_ASSIGN_OR_RETURN(config.replay_endpoint,
                               OffsetEndpointPort(given.replay_endpoint, static_cast<uint32_t>(i)));
    }
    const DpRank rank = pub.dp_rank.value_or(static_cast<DpRank>(i));
    config.dp_rank = given.dp_rank ? *given.dp_rank + rank : rank;
    out.push_back(std::move(config));
  }
  return out;
}

}  // namespace

Result<std::vector<SourceConfig>> ResolveEngineSource(const EngineSourceSpec& spec,
                                                      const EngineReport& report) {
  auto out = Resolve(spec, report);
  // The port layout (ExpandDp, OffsetEndpointPort) calls a bad port a usage error; here the
  // engine reported it.
  if (!out.ok() && out.status().code() == StatusCode::kInvalidArgument) {
    return Status::Unsupported(out.status().message());
  }
  return out;
}

}  // namespace kvindex
