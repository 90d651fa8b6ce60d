#include "kvindex/query/query_service.h"

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/address.h"
#include "kvindex/core/clock.h"
#include "kvindex/core/json_depth.h"
#include "kvindex/core/utf8.h"
#include "kvindex/query/match_explain.h"
#include "kvindex/query/query_json.h"

#include "metrics_text.h"

namespace kvindex {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4";

// Every answer is written this way: names reach the JSON through Utf8() (core/utf8.h's policy),
// and the replacing error handler keeps dump() from ever throwing.
std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A name from outside (a source, an instance, a tier, an endpoint) as valid UTF-8.
std::string Utf8(std::string_view text) { return ToValidUtf8(text); }

std::string ErrorBody(const std::string& message) {
  return DumpJson(Json{{"error", Utf8(message)}});
}

// Status code for a failed parse or query.
int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kLimitExceeded:
      return 413;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnsupported:
      return 501;
    case StatusCode::kInvalidArgument:
    case StatusCode::kMalformed:
      return 400;
    default:
      return 500;
  }
}

// "tcp://host:port" -> "host"; "" when the endpoint has no host part.
std::string EndpointHost(const std::string& endpoint) {
  Result<NetAddress> address = ParseNetAddress(endpoint);
  return address.ok() ? std::move(address->host) : std::string();
}

// A source's trust (docs/http-api.md "Trust states"): state, reason, and when degraded the lost
// batches and since when; transitions by reason.
Json TrustJson(const SourceTrust& t) {
  Json j = {{"state", std::string(TrustStateName(t.state()))},
            {"reason", std::string(TrustReasonName(t.reason()))}};
  if (t.state() == TrustState::kDegraded) {
    j["lost_batches"] = t.lost_batches();
    j["since"] = Rfc3339Utc(t.since_ns());
  }
  Json transitions = Json::object();
  for (size_t i = 0; i < kTrustReasonCount; ++i) {
    const auto reason = static_cast<TrustReason>(i);
    if (reason != TrustReason::kStart)
      transitions[std::string(TrustReasonName(reason))] = t.transitions(reason);
  }
  j["transitions"] = std::move(transitions);
  return j;
}

Json SourceJson(const ServedSource& s) {
  Json counters = Json::object();
  AddSourceCounters(counters, s.counters, s.transport);
  Json j = {{"name", Utf8(s.name)},
            {"instance", Utf8(s.config.name)},
            {"endpoint", Utf8(s.config.endpoint)},
            {"replay_endpoint", Utf8(s.config.replay_endpoint)},
            {"format", Utf8(s.config.format)},
            {"model", Utf8(s.config.model)},
            {"tenant", Utf8(s.config.tenant)},
            {"lora_name", Utf8(s.config.lora)},
            {"block_size", s.config.block_size},
            {"state", Utf8(s.state)},
            {"trust", TrustJson(s.counters.trust)},
            {"counters", counters}};
  j["dp_rank"] = s.config.dp_rank ? Json(*s.config.dp_rank) : Json(nullptr);
  return j;
}

// Drops a reused request's id buffer after a body of more than kKeptRequestIds ids, so one huge
// query does not keep megabytes per thread.
constexpr size_t kKeptRequestIds = size_t{1} << 18;

struct ReleaseLargeOnExit {
  QueryRequest& request;
  ~ReleaseLargeOnExit() {
    if (request.tokens.capacity() > kKeptRequestIds) std::vector<TokenId>().swap(request.tokens);
    if (request.engine_hashes.capacity() > kKeptRequestIds) {
      std::vector<EngineHash>().swap(request.engine_hashes);
    }
    if (request.prefix_hashes.capacity() > kKeptRequestIds) {
      std::vector<PrefixHash>().swap(request.prefix_hashes);
    }
  }
};

}  // namespace

QueryService::QueryService(const PrefixIndex& index, ServerBackend& backend,
                           QueryServiceOptions options)
    : index_(index), backend_(backend), options_(options) {}

std::string QueryService::TransportErrorBody(int status) {
  const std::string message = status == 413 ? "request body exceeds the limit of " +
                                                  std::to_string(kMaxQueryBodyBytes) + " bytes"
                                            : "HTTP error " + std::to_string(status);
  return ErrorBody(message);
}

ServiceAnswer QueryService::Handle(std::string_view method, std::string_view path,
                                   std::string_view body) {
  ServiceAnswer answer;
  Handle(method, path, body, answer);
  return answer;
}

void QueryService::Handle(std::string_view method, std::string_view path, std::string_view body,
                          ServiceAnswer& answer) {
  answer.status = 200;
  answer.content_type = kJson;
  std::string& out = answer.body;
  struct Route {
    std::string_view path;
    std::string_view method;
  };
  static constexpr Route kRoutes[] = {
      {"/query", "POST"},    {"/query_by_hash", "POST"}, {"/cache", "POST"},
      {"/register", "POST"}, {"/unregister", "POST"},    {"/global_view", "GET"},
      {"/instances", "GET"}, {"/metrics", "GET"},        {"/healthz", "GET"},
      {"/snapshot", "GET"},
  };
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (route == nullptr) {
    out = ErrorBody("no such endpoint: " + std::string(path));
    metrics_.Count("other", 404);
    answer.status = 404;
    return;
  }
  const bool head_ok = method == "HEAD" && route->method == "GET";
  if (method != route->method && !head_ok) {
    out = ErrorBody("method " + std::string(method) + " not allowed on " + std::string(path) +
                    " (use " + std::string(route->method) + ")");
    metrics_.Count(path, 405);
    answer.status = 405;
    return;
  }
  if (body.size() > kMaxQueryBodyBytes) {
    out = ErrorBody("request body of " + std::to_string(body.size()) +
                    " bytes exceeds the limit of " + std::to_string(kMaxQueryBodyBytes));
    metrics_.Count(path, 413);
    answer.status = 413;
    return;
  }
  int code = 200;
  if (path == "/query" || path == "/query_by_hash" || path == "/cache") {
    const auto start = SteadyClock::now();
    code = path == "/cache" ? Cache(body, out) : Query(body, out);
    metrics_.ObserveLatency(SteadyClock::now() - start);
  } else if (path == "/register") {
    code = Register(body, out);
  } else if (path == "/unregister") {
    code = Unregister(body, out);
  } else if (path == "/global_view") {
    out = GlobalView();
  } else if (path == "/instances") {
    out = Instances();
  } else if (path == "/snapshot") {
    answer.stream = backend_.Snapshot();
    if (answer.stream) {
      answer.content_type = "application/octet-stream";
    } else {
      out = ErrorBody("this server does not serve snapshots");
      code = 501;
    }
  } else if (path == "/metrics") {
    out = RenderMetricsText(index_, backend_.Sources(), metrics_, gauges_, backend_.Journal());
    answer.content_type = kPrometheusText;
  } else {
    out = Healthz();
  }
  metrics_.Count(path, code);
  answer.status = code;
}

int QueryService::Query(std::string_view body, std::string& out) {
  // One request and one match per thread, reused: a query allocates nothing once they (and
  // `out`) have grown to its size.
  thread_local QueryRequest request;
  thread_local PrefixMatch match_storage;
  const ReleaseLargeOnExit release{request};
  if (const Status parsed = ParseQueryRequest(body, request); !parsed.ok()) {
    out = ErrorBody(parsed.message());
    return HttpStatusFor(parsed);
  }
  // A replica names the journal position its index had reached before the match (at least).
  const std::optional<JournalServing> journal = backend_.Journal();
  PrefixMatch* match = &match_storage;
  if (const Status matched = MatchRequest(index_, request, *match); !matched.ok()) {
    out = ErrorBody(matched.message());
    return HttpStatusFor(matched) == 500 ? 400 : HttpStatusFor(matched);
  }
  const std::shared_ptr<const InstanceTrustMap> trust = backend_.Trust();
  RenderQueryAnswer(*match, request.match.tenant, options_.conductor_compat, trust.get(), out);
  if (request.explain && !options_.conductor_compat) {
    // A slow diagnostic (match_explain.h): {"data": ..., "explain": {...}}.
    std::vector<SourceConfig> configs;
    ExplainContext context;
    context.now_ns = RealtimeNs();
    for (const ServedSource& s : backend_.Sources()) {
      if (s.state == "unregistered") continue;
      configs.push_back(s.config);
      context.sources.push_back({.instance = s.config.name,
                                 .name = s.name,
                                 .format = s.config.format,
                                 .subscribed = s.subscribed,
                                 .last_message_ns = s.transport.last_message_ns,
                                 .watched_since_ns = s.watched_since_ns,
                                 .stale = s.counters.trust.stale(),
                                 .bigram_events = s.counters.bigram_events,
                                 .token_form_mismatches = s.counters.token_form_mismatches});
    }
    Result<std::vector<MatchExplanation>> why =
        ExplainMatch(index_, request, *match, configs, context);
    if (!why.ok()) {
      out = ErrorBody(why.status().message());
      return 400;
    }
    for (const MatchExplanation& e : *why) metrics_.CountExplanation(e.reason);
    out.pop_back();  // the answer's closing brace
    out += ",\"explain\":" + RenderExplanations(*why) + "}";
  }
  if (journal && journal->replica && !options_.conductor_compat) {
    out.pop_back();
    out += ",\"journal_seq\":" + std::to_string(journal->applied_seq) + "}";
  }
  return 200;
}

int QueryService::Cache(std::string_view body, std::string& out) {
  Result<QueryRequest> parsed = ParseCacheRequest(body);
  if (!parsed.ok()) {
    out = ErrorBody(parsed.status().message());
    return HttpStatusFor(parsed.status());
  }
  QueryRequest request = std::move(*parsed);
  // The proxy names prefill instances by host: map a host to the instance whose source endpoint
  // is on it (the first such source, by id); an instance name is used as is.
  const std::vector<ServedSource> sources = backend_.Sources();
  std::map<std::string, std::string, std::less<>> alias;
  for (const ServedSource& s : sources) alias.emplace(s.config.name, s.config.name);
  for (const ServedSource& s : sources) {
    const std::string host = EndpointHost(s.config.endpoint);
    if (!host.empty()) alias.emplace(host, s.config.name);
  }
  const std::vector<std::string> asked = request.match.instances;
  std::vector<std::string> resolved;
  resolved.reserve(asked.size());
  for (const std::string& name : asked) {
    auto it = alias.find(name);
    resolved.push_back(it == alias.end() ? name : it->second);
  }
  request.match.instances = resolved;
  Result<PrefixMatch> match = index_.MatchTokens(request.match, request.tokens);
  if (!match.ok()) {
    out = ErrorBody(match.status().message());
    return 400;
  }
  // Answer under the names the caller used; unknown names answer 0 (and have no state).
  const InstanceTrustMap trust = InstanceTrusts(sources);
  InstanceTrustMap asked_trust;
  PrefixMatch renamed;
  for (size_t i = 0; i < asked.size(); ++i) {
    InstanceMatch entry;
    if (const InstanceMatch* found = match->Find(resolved[i])) entry = *found;
    entry.instance = asked[i];
    renamed.instances.push_back(std::move(entry));
    if (auto t = trust.find(resolved[i]); t != trust.end()) asked_trust[asked[i]] = t->second;
  }
  out = RenderCacheAnswer(renamed, &asked_trust);
  return 200;
}

int QueryService::Register(std::string_view body, std::string& out) {
  Json parsed = JsonTooDeepAt(body) == std::string_view::npos ? Json::parse(body, nullptr, false)
                                                              : Json(Json::value_t::discarded);
  if (parsed.is_discarded() || !parsed.is_object()) {
    out = ErrorBody("register: the body is not a JSON object");
    return 400;
  }
  std::string id;
  if (auto it = parsed.find("instance_id"); it != parsed.end() && it->is_string()) {
    id = it->get<std::string>();
  }
  if (id.empty()) {
    out = ErrorBody("register: 'instance_id' (a non-empty string) is required");
    return 400;
  }
  const Json wrapped = {{"kvevent_instance", {{id, parsed}}}};
  Result<SourcesConfig> config = ParseSourcesConfig(DumpJson(wrapped), "register body");
  if (!config.ok()) {
    out = ErrorBody(config.status().message());
    return 400;
  }
  // All ranks or none: a source that cannot be added (already registered, an endpoint that
  // cannot be bound or connected) leaves no trace in /instances, /global_view or the index.
  const Status status = backend_.Register(config->sources);
  if (!status.ok()) {
    out = ErrorBody("register: " + status.message());
    return HttpStatusFor(status) == 500 ? 400 : HttpStatusFor(status);
  }
  out = DumpJson(Json{{"instance_id", Utf8(id)}, {"status", "registered successfully"}});
  return 200;
}

int QueryService::Unregister(std::string_view body, std::string& out) {
  Json parsed = JsonTooDeepAt(body) == std::string_view::npos ? Json::parse(body, nullptr, false)
                                                              : Json(Json::value_t::discarded);
  if (parsed.is_discarded() || !parsed.is_object()) {
    out = ErrorBody("unregister: the body is not a JSON object");
    return 400;
  }
  auto it = parsed.find("instance_id");
  if (it == parsed.end() || !it->is_string() || it->get<std::string>().empty()) {
    out = ErrorBody("unregister: 'instance_id' (a non-empty string) is required");
    return 400;
  }
  const std::string id = it->get<std::string>();
  Result<ApplyResult> removed = backend_.Unregister(id);
  if (!removed.ok()) {
    if (removed.status().code() == StatusCode::kNotFound) {
      out = ErrorBody("service not found: " + id);
      return 404;
    }
    out = ErrorBody("unregister: " + removed.status().message());
    return HttpStatusFor(removed.status()) == 500 ? 400 : HttpStatusFor(removed.status());
  }
  out = DumpJson(Json{{"removed_instances", {Utf8(id)}},
                      {"status", "unregistered successfully"},
                      {"removed_presences", removed->removed}});
  return 200;
}

std::string QueryService::GlobalView() const {
  const IndexStats stats = index_.stats();
  Json contexts = Json::array();
  for (const ServedSource& s : backend_.Sources()) {
    if (s.state == "unregistered") continue;
    Json c = {{"model_name", Utf8(s.config.model)},   {"lora_name", Utf8(s.config.lora)},
              {"block_size", s.config.block_size},     {"additional_salt", Utf8(s.config.salt)},
              {"tenant_id", Utf8(s.config.tenant)},    {"instance_id", Utf8(s.config.name)}};
    c["dp_rank"] = s.config.dp_rank ? Json(*s.config.dp_rank) : Json(nullptr);
    contexts.push_back(std::move(c));
  }
  Json instances = Json::object();
  for (const InstanceStats& instance : stats.instances) {
    Json tiers = Json::object();
    for (const TierPresences& tier : instance.tiers) tiers[Utf8(tier.tier)] = tier.presences;
    instances[Utf8(instance.instance)] = {{"tiers", tiers}, {"orphans", instance.orphans}};
  }
  const size_t count = contexts.size();
  return DumpJson(Json{{"context_count", count},
                       {"model_contexts", std::move(contexts)},
                       {"scopes", stats.scopes},
                       {"blocks", stats.blocks},
                       {"presences", stats.presences},
                       {"instances", std::move(instances)}});
}

std::string QueryService::Instances() const {
  Json sources = Json::array();
  for (const ServedSource& s : backend_.Sources()) sources.push_back(SourceJson(s));
  const IndexStats stats = index_.stats();
  Json instances = Json::object();
  for (const InstanceStats& instance : stats.instances) {
    Json tiers = Json::object();
    for (const TierPresences& tier : instance.tiers) tiers[Utf8(tier.tier)] = tier.presences;
    instances[Utf8(instance.instance)] = {{"tiers", tiers}, {"orphans", instance.orphans}};
  }
  return DumpJson(Json{{"sources", std::move(sources)}, {"instances", std::move(instances)}});
}

std::string QueryService::Healthz() const {
  Json out{{"status", "ok"}, {"blocks", index_.stats().blocks}};
  if (const std::optional<JournalServing> j = backend_.Journal()) {
    out["journal"] = j->replica ? Json{{"role", "replica"},
                                       {"connected", j->connected},
                                       {"applied_seq", j->applied_seq},
                                       {"stream_last_seq", j->stream_last_seq},
                                       {"lag", j->lag},
                                       {"started_from", j->started_from},
                                       {"snapshot_seq", j->snapshot_seq},
                                       {"skipped_seqs", j->skipped_seqs},
                                       {"reordered", j->reordered},
                                       {"held_records", j->held_records}}
                                : Json{{"role", "ingester"},
                                       {"connected", j->connected},
                                       {"records_pending", j->records_pending},
                                       {"bytes_pending", j->bytes_pending},
                                       {"last_acked_seq", j->last_acked_seq},
                                       {"lost_records", j->lost_records},
                                       {"lost_bytes", j->lost_bytes},
                                       {"snapshot_seq", j->snapshot_seq},
                                       {"snapshots_written", j->snapshots_written},
                                       {"snapshots_failed", j->snapshots_failed},
                                       {"snapshot_writer", j->snapshot_writer}};
  }
  return DumpJson(out);
}

}  // namespace kvindex
