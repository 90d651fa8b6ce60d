// QueryServer: cpp-httplib glue around a transport-free request handler (Handle()).
#include "kvindex/http/query_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kvindex/codec/source_spec.h"
#include "kvindex/query/match_explain.h"
#include "kvindex/query/query_json.h"

namespace kvindex {
namespace {

using Json = nlohmann::json;

constexpr const char* kJson = "application/json";

std::string ErrorBody(const std::string& message) {
  return Json{{"error", message}}.dump(-1, ' ', false, Json::error_handler_t::replace);
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
  std::string rest = endpoint;
  const size_t scheme = rest.find("://");
  if (scheme != std::string::npos) rest = rest.substr(scheme + 3);
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    return close == std::string::npos ? std::string() : rest.substr(1, close - 1);
  }
  const size_t colon = rest.rfind(':');
  return colon == std::string::npos ? rest : rest.substr(0, colon);
}

// cpp-httplib serves a keep-alive connection on one worker until the connection closes or stays
// idle past the keep-alive timeout. With its fixed ThreadPool of N workers, connection N+1 waits
// until one of the first N goes quiet: a router whose connection pool is larger than N saw some
// of its queries wait seconds, or forever while the other connections stayed busy. This queue
// keeps `min_workers` threads and starts another whenever a connection arrives while no worker is
// idle, up to `max_workers` (beyond that a connection waits for the first free worker); a worker
// above `min_workers` that stays idle for kRetireAfter exits.
// What /metrics shows of the connection workers.
struct WorkerGauges {
  std::atomic<uint64_t> workers{0};      // threads running
  std::atomic<uint64_t> connections{0};  // connections being served (busy workers)
};

class ConnectionWorkers final : public httplib::TaskQueue {
 public:
  static constexpr std::chrono::seconds kRetireAfter{10};

  ConnectionWorkers(size_t min_workers, size_t max_workers, WorkerGauges& gauges)
      : min_(min_workers), max_(std::max(min_workers, max_workers)), gauges_(gauges) {
    std::lock_guard lock(mutex_);
    while (live_ < min_) Spawn();
  }
  ~ConnectionWorkers() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    Reap();
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && live_ < max_) Spawn();
    wake_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.thread.join();
    workers_.clear();
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  void Spawn() {  // mutex_ held
    workers_.emplace_back();
    Worker* self = &workers_.back();
    ++live_;
    gauges_.workers.store(live_, std::memory_order_relaxed);
    self->thread = std::thread([this, self] { Run(*self); });
  }

  void Reap() {  // mutex_ held: join workers that retired (they no longer need the mutex)
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void Run(Worker& self) {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      const bool woken = wake_.wait_for(lock, kRetireAfter, [this] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty()) {
        if (shutdown_ || (!woken && live_ > min_)) break;
        continue;
      }
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      gauges_.connections.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      job();
      lock.lock();
      gauges_.connections.fetch_sub(1, std::memory_order_relaxed);
    }
    --live_;
    gauges_.workers.store(live_, std::memory_order_relaxed);
    self.done = true;
  }

  const size_t min_;
  const size_t max_;
  WorkerGauges& gauges_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::list<Worker> workers_;  // stable addresses: each thread holds its own entry
  size_t live_ = 0;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Query latency histogram bounds (seconds).
constexpr std::array<double, 12> kLatencyBounds = {25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
                                                   2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1.0};

}  // namespace

// ---- LocalBackend ---------------------------------------------------------------------------

Result<SourceId> LocalBackend::AddSource(const SourceConfig& config) {
  std::lock_guard lock(mutex_);
  KVINDEX_ASSIGN_OR_RETURN(SourceId id, index_->AddSource(config));
  if (sources_.size() <= id.value) sources_.resize(id.value + 1);
  ServedSource& s = sources_[id.value];
  s.name = SourceDisplayName(config);
  s.config = config;
  s.state = "live";
  return id;
}

Result<ApplyResult> LocalBackend::Apply(SourceId source, const EventBatch& batch) {
  std::lock_guard lock(mutex_);
  KVINDEX_ASSIGN_OR_RETURN(ApplyResult result, index_->Apply(source, batch));
  if (source.value < sources_.size()) {
    ServedSource& s = sources_[source.value];
    ++s.counters.sequence.received;
    ++s.counters.sequence.applied;
    ++s.transport.messages;
    s.counters.events += batch.events.size();
    s.counters.index += result;
  }
  return result;
}

std::vector<ServedSource> LocalBackend::Sources() const {
  std::lock_guard lock(mutex_);
  return sources_;
}

Status LocalBackend::Register(std::span<const SourceConfig> configs) {
  {
    std::lock_guard lock(mutex_);
    for (const SourceConfig& config : configs) {
      for (const ServedSource& s : sources_) {
        if (s.name == SourceDisplayName(config) && s.state != "unregistered") {
          return Status::InvalidArgument("source '" + s.name + "' is already registered");
        }
      }
    }
  }
  for (const SourceConfig& config : configs) KVINDEX_RETURN_IF_ERROR(AddSource(config).status());
  return Status::Ok();
}

Result<ApplyResult> LocalBackend::Unregister(const std::string& instance) {
  std::lock_guard lock(mutex_);
  bool listed = false;
  for (const ServedSource& s : sources_) {
    if (s.config.name == instance && s.state != "unregistered") listed = true;
  }
  if (!listed) return Status::NotFound("unregister: no instance '" + instance + "'");
  KVINDEX_ASSIGN_OR_RETURN(ApplyResult result, index_->RemoveInstance(instance));
  for (ServedSource& s : sources_) {
    if (s.config.name == instance) s.state = "unregistered";
  }
  return result;
}

// ---- QueryServer ----------------------------------------------------------------------------

struct QueryServer::Impl {
  const PrefixIndex* index = nullptr;
  ServerBackend* backend = nullptr;
  QueryServerOptions options;
  httplib::Server server;
  std::thread listener;
  int port = 0;
  std::atomic<bool> stopped{false};

  // Metrics.
  std::mutex metrics_mutex;
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, code) -> count
  std::array<std::atomic<uint64_t>, kLatencyBounds.size() + 1> latency_buckets{};
  std::atomic<uint64_t> latency_count{0};
  std::atomic<uint64_t> latency_sum_ns{0};
  WorkerGauges worker_gauges;

  int Dispatch(const std::string& method, const std::string& path, const std::string& body,
               std::string& out, std::string& content_type);
  int Query(const std::string& body, std::string& out);
  int Cache(const std::string& body, std::string& out);
  int Register(const std::string& body, std::string& out);
  int Unregister(const std::string& body, std::string& out);
  std::string GlobalView();
  std::string Instances();
  std::string Metrics();
  void Count(const std::string& endpoint, int code) {
    std::lock_guard lock(metrics_mutex);
    ++requests[{endpoint, code}];
  }
  void ObserveLatency(std::chrono::nanoseconds elapsed) {
    const double seconds = static_cast<double>(elapsed.count()) * 1e-9;
    size_t bucket = 0;
    while (bucket < kLatencyBounds.size() && seconds > kLatencyBounds[bucket]) ++bucket;
    latency_buckets[bucket].fetch_add(1, std::memory_order_relaxed);
    latency_count.fetch_add(1, std::memory_order_relaxed);
    latency_sum_ns.fetch_add(static_cast<uint64_t>(elapsed.count()), std::memory_order_relaxed);
  }
};

int QueryServer::Impl::Query(const std::string& body, std::string& out) {
  Result<QueryRequest> parsed = ParseQueryRequest(body);
  if (!parsed.ok()) {
    out = ErrorBody(parsed.status().message());
    return HttpStatusFor(parsed.status());
  }
  const QueryRequest& request = *parsed;
  Result<PrefixMatch> match =
      request.kind == QueryKind::kEngineHashes
          ? index->MatchEngineHashes(request.match, request.engine_hashes)
      : request.kind == QueryKind::kPrefixHashes
          ? index->MatchPrefixHashes(request.match, request.prefix_hashes)
          : index->MatchTokens(request.match, request.tokens);
  if (!match.ok()) {
    out = ErrorBody(match.status().message());
    return HttpStatusFor(match.status()) == 500 ? 400 : HttpStatusFor(match.status());
  }
  out = RenderQueryAnswer(*match, request.match.tenant, options.conductor_compat);
  if (request.explain && !options.conductor_compat) {
    // A slow diagnostic (match_explain.h): {"data": ..., "explain": {...}}.
    std::vector<SourceConfig> configs;
    for (const ServedSource& s : backend->Sources()) {
      if (s.state != "unregistered") configs.push_back(s.config);
    }
    Result<std::vector<MatchExplanation>> why = ExplainMatch(*index, request, *match, configs);
    if (!why.ok()) {
      out = ErrorBody(why.status().message());
      return 400;
    }
    out.pop_back();  // the answer's closing brace
    out += ",\"explain\":" + RenderExplanations(*why) + "}";
  }
  return 200;
}

int QueryServer::Impl::Cache(const std::string& body, std::string& out) {
  Result<QueryRequest> parsed = ParseCacheRequest(body);
  if (!parsed.ok()) {
    out = ErrorBody(parsed.status().message());
    return HttpStatusFor(parsed.status());
  }
  QueryRequest request = std::move(*parsed);
  // The proxy names prefill instances by host: map a host to the instance whose source endpoint
  // is on it (the first such source, by id); an instance name is used as is.
  const std::vector<ServedSource> sources = backend->Sources();
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
  Result<PrefixMatch> match = index->MatchTokens(request.match, request.tokens);
  if (!match.ok()) {
    out = ErrorBody(match.status().message());
    return 400;
  }
  // Answer under the names the caller used; unknown names answer 0.
  PrefixMatch renamed;
  for (size_t i = 0; i < asked.size(); ++i) {
    InstanceMatch entry;
    if (const InstanceMatch* found = match->Find(resolved[i])) entry = *found;
    entry.instance = asked[i];
    renamed.instances.push_back(std::move(entry));
  }
  out = RenderCacheAnswer(renamed);
  return 200;
}

int QueryServer::Impl::Register(const std::string& body, std::string& out) {
  Json parsed = Json::parse(body, nullptr, false);
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
  Result<SourcesConfig> config = ParseSourcesConfig(wrapped.dump(), "register body");
  if (!config.ok()) {
    out = ErrorBody(config.status().message());
    return 400;
  }
  // All ranks or none: a source that cannot be added (already registered, an endpoint that
  // cannot be bound or connected) leaves no trace in /instances, /global_view or the index.
  const Status status = backend->Register(config->sources);
  if (!status.ok()) {
    out = ErrorBody("register: " + status.message());
    return HttpStatusFor(status) == 500 ? 400 : HttpStatusFor(status);
  }
  out = Json{{"instance_id", id}, {"status", "registered successfully"}}.dump();
  return 200;
}

int QueryServer::Impl::Unregister(const std::string& body, std::string& out) {
  Json parsed = Json::parse(body, nullptr, false);
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
  Result<ApplyResult> removed = backend->Unregister(id);
  if (!removed.ok()) {
    if (removed.status().code() == StatusCode::kNotFound) {
      out = ErrorBody("service not found: " + id);
      return 404;
    }
    out = ErrorBody("unregister: " + removed.status().message());
    return HttpStatusFor(removed.status()) == 500 ? 400 : HttpStatusFor(removed.status());
  }
  out = Json{{"removed_instances", {id}},
             {"status", "unregistered successfully"},
             {"removed_presences", removed->removed}}
            .dump();
  return 200;
}

namespace {

Json SourceJson(const ServedSource& s) {
  Json counters = Json::object();
  AddSourceCounters(counters, s.counters, s.transport);
  Json j = {{"name", s.name},
            {"instance", s.config.name},
            {"endpoint", s.config.endpoint},
            {"replay_endpoint", s.config.replay_endpoint},
            {"format", s.config.format},
            {"model", s.config.model},
            {"tenant", s.config.tenant},
            {"lora_name", s.config.lora},
            {"block_size", s.config.block_size},
            {"state", s.state},
            {"counters", counters}};
  j["dp_rank"] = s.config.dp_rank ? Json(*s.config.dp_rank) : Json(nullptr);
  return j;
}

}  // namespace

std::string QueryServer::Impl::GlobalView() {
  const IndexStats stats = index->stats();
  Json contexts = Json::array();
  for (const ServedSource& s : backend->Sources()) {
    if (s.state == "unregistered") continue;
    Json c = {{"model_name", s.config.model},
              {"lora_name", s.config.lora},
              {"block_size", s.config.block_size},
              {"additional_salt", s.config.salt},
              {"tenant_id", s.config.tenant},
              {"instance_id", s.config.name}};
    c["dp_rank"] = s.config.dp_rank ? Json(*s.config.dp_rank) : Json(nullptr);
    contexts.push_back(std::move(c));
  }
  Json instances = Json::object();
  for (const InstanceStats& instance : stats.instances) {
    Json tiers = Json::object();
    for (const TierPresences& tier : instance.tiers) tiers[tier.tier] = tier.presences;
    instances[instance.instance] = {{"tiers", tiers}, {"orphans", instance.orphans}};
  }
  const size_t count = contexts.size();
  return Json{{"context_count", count},
              {"model_contexts", std::move(contexts)},
              {"scopes", stats.scopes},
              {"blocks", stats.blocks},
              {"presences", stats.presences},
              {"instances", std::move(instances)}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string QueryServer::Impl::Instances() {
  Json sources = Json::array();
  for (const ServedSource& s : backend->Sources()) sources.push_back(SourceJson(s));
  const IndexStats stats = index->stats();
  Json instances = Json::object();
  for (const InstanceStats& instance : stats.instances) {
    Json tiers = Json::object();
    for (const TierPresences& tier : instance.tiers) tiers[tier.tier] = tier.presences;
    instances[instance.instance] = {{"tiers", tiers}, {"orphans", instance.orphans}};
  }
  return Json{{"sources", std::move(sources)}, {"instances", std::move(instances)}}.dump(
      -1, ' ', false, Json::error_handler_t::replace);
}

std::string QueryServer::Impl::Metrics() {
  std::string out;
  char line[512];
  const std::vector<ServedSource> sources = backend->Sources();
  // One family per per-source counter (source_counters.h), in the documented order.
  std::vector<std::array<SourceCounterField, kSourceCounterCount>> fields;
  fields.reserve(sources.size());
  for (const ServedSource& s : sources) fields.push_back(SourceCounterFields(s.counters, s.transport));
  const auto names = SourceCounterFields({}, {});
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string metric = "kvindex_source_" + std::string(names[i].key) + "_total";
    out += "# HELP " + metric + " " + std::string(names[i].help) + "\n# TYPE " + metric +
           " counter\n";
    for (size_t k = 0; k < sources.size(); ++k) {
      out += metric + "{source=\"" + EscapeLabel(sources[k].name) + "\",instance=\"" +
             EscapeLabel(sources[k].config.name) + "\"} " + std::to_string(fields[k][i].value) +
             "\n";
    }
  }
  const IndexStats stats = index->stats();
  out += "# HELP kvindex_resident_blocks Resident (block, source) presences per instance and tier.\n"
         "# TYPE kvindex_resident_blocks gauge\n";
  for (const InstanceStats& instance : stats.instances) {
    for (const TierPresences& tier : instance.tiers) {
      out += "kvindex_resident_blocks{instance=\"" + EscapeLabel(instance.instance) +
             "\",tier=\"" + EscapeLabel(tier.tier) + "\"} " + std::to_string(tier.presences) +
             "\n";
    }
  }
  auto gauge = [&](const char* name, const char* help, double value) {
    std::snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name,
                  name, value);
    out += line;
  };
  gauge("kvindex_index_blocks", "Resident distinct blocks.", static_cast<double>(stats.blocks));
  gauge("kvindex_index_presences", "Resident (block, holder, tier) presences.",
        static_cast<double>(stats.presences));
  gauge("kvindex_index_bytes", "Estimated heap bytes of the index.",
        static_cast<double>(stats.bytes));
  gauge("kvindex_index_bytes_per_presence", "Index heap bytes per resident presence.",
        stats.presences == 0 ? 0.0
                             : static_cast<double>(stats.bytes) / static_cast<double>(stats.presences));
  gauge("kvindex_index_evictions", "Blocks evicted by --max-blocks (cumulative).",
        static_cast<double>(stats.evictions));
  out += "# HELP kvindex_http_requests_total HTTP requests by endpoint and status code.\n"
         "# TYPE kvindex_http_requests_total counter\n";
  {
    std::lock_guard lock(metrics_mutex);
    for (const auto& [key, count] : requests) {
      out += "kvindex_http_requests_total{endpoint=\"" + EscapeLabel(key.first) + "\",code=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
    }
  }
  gauge("kvindex_http_workers",
        "HTTP worker threads running (--http-threads, plus one per connection beyond them).",
        static_cast<double>(worker_gauges.workers.load(std::memory_order_relaxed)));
  gauge("kvindex_http_connections", "HTTP connections being served (one worker each).",
        static_cast<double>(worker_gauges.connections.load(std::memory_order_relaxed)));
  out += "# HELP kvindex_http_query_duration_seconds Time to answer /query, /query_by_hash and "
         "/cache (parse, match, render).\n# TYPE kvindex_http_query_duration_seconds histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBounds.size(); ++i) {
    cumulative += latency_buckets[i].load(std::memory_order_relaxed);
    std::snprintf(line, sizeof(line), "kvindex_http_query_duration_seconds_bucket{le=\"%g\"} %llu\n",
                  kLatencyBounds[i], static_cast<unsigned long long>(cumulative));
    out += line;
  }
  cumulative += latency_buckets[kLatencyBounds.size()].load(std::memory_order_relaxed);
  out += "kvindex_http_query_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(cumulative) +
         "\n";
  std::snprintf(line, sizeof(line), "kvindex_http_query_duration_seconds_sum %.9f\n",
                static_cast<double>(latency_sum_ns.load(std::memory_order_relaxed)) * 1e-9);
  out += line;
  out += "kvindex_http_query_duration_seconds_count " +
         std::to_string(latency_count.load(std::memory_order_relaxed)) + "\n";
  return out;
}

int QueryServer::Impl::Dispatch(const std::string& method, const std::string& path,
                                const std::string& body, std::string& out,
                                std::string& content_type) {
  content_type = kJson;
  struct Route {
    const char* path;
    const char* method;
  };
  static const Route kRoutes[] = {
      {"/query", "POST"},      {"/query_by_hash", "POST"}, {"/cache", "POST"},
      {"/register", "POST"},   {"/unregister", "POST"},    {"/global_view", "GET"},
      {"/instances", "GET"},   {"/metrics", "GET"},        {"/healthz", "GET"},
  };
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (route == nullptr) {
    out = ErrorBody("no such endpoint: " + path);
    Count("other", 404);
    return 404;
  }
  const bool head_ok = method == "HEAD" && std::string_view(route->method) == "GET";
  if (method != route->method && !head_ok) {
    out = ErrorBody(std::string("method ") + method + " not allowed on " + path + " (use " +
                    route->method + ")");
    Count(path, 405);
    return 405;
  }
  if (body.size() > kMaxQueryBodyBytes) {
    out = ErrorBody("request body of " + std::to_string(body.size()) +
                    " bytes exceeds the limit of " + std::to_string(kMaxQueryBodyBytes));
    Count(path, 413);
    return 413;
  }
  int code = 200;
  if (path == "/query" || path == "/query_by_hash" || path == "/cache") {
    const auto start = std::chrono::steady_clock::now();
    code = path == "/cache" ? Cache(body, out) : Query(body, out);
    ObserveLatency(std::chrono::steady_clock::now() - start);
  } else if (path == "/register") {
    code = Register(body, out);
  } else if (path == "/unregister") {
    code = Unregister(body, out);
  } else if (path == "/global_view") {
    out = GlobalView();
  } else if (path == "/instances") {
    out = Instances();
  } else if (path == "/metrics") {
    out = Metrics();
    content_type = "text/plain; version=0.0.4";
  } else {
    out = Json{{"status", "ok"}, {"blocks", index->stats().blocks}}.dump();
  }
  Count(path, code);
  return code;
}

QueryServer::QueryServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

QueryServer::~QueryServer() { Stop(); }

uint16_t QueryServer::port() const { return static_cast<uint16_t>(impl_->port); }

void QueryServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int QueryServer::Handle(const std::string& method, const std::string& path,
                        const std::string& request_body, std::string& body,
                        std::string& content_type) {
  return impl_->Dispatch(method, path, request_body, body, content_type);
}

Result<std::unique_ptr<QueryServer>> QueryServer::Start(const PrefixIndex& index,
                                                        ServerBackend& backend,
                                                        QueryServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->index = &index;
  impl->backend = &backend;
  impl->options = options;
  Impl* raw = impl.get();
  httplib::Server& server = impl->server;
  const size_t threads = options.threads == 0 ? 1 : options.threads;
  const size_t max_connections = std::max(threads, options.max_connections);
  server.new_task_queue = [threads, max_connections, raw] {
    return new ConnectionWorkers(threads, max_connections, raw->worker_gauges);
  };
  server.set_payload_max_length(kMaxQueryBodyBytes);
  // cpp-httplib writes headers and body separately: without TCP_NODELAY, Nagle's algorithm and the
  // client's delayed ACK hold every answer for ~40 ms.
  server.set_tcp_nodelay(true);
  // A connection is closed after this many requests: at 1,000 a client at 1,250 requests/s had to
  // reconnect every 0.8 s, and the reconnects showed in the tail (bench-http.sh).
  server.set_keep_alive_max_count(100000);
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  // One handler for every method and path (the dispatcher answers 404 and 405 itself); routes
  // are registered per method so that cpp-httplib reads the body first.
  auto handler = [raw](const httplib::Request& req, httplib::Response& res) {
    std::string body;
    std::string content_type;
    res.status = raw->Dispatch(req.method, req.path, req.body, body, content_type);
    res.set_content(std::move(body), content_type.c_str());
  };
  server.Get(".*", handler);
  server.Post(".*", handler);
  server.Put(".*", handler);
  server.Patch(".*", handler);
  server.Delete(".*", handler);
  server.Options(".*", handler);
  // Errors cpp-httplib answers itself (a body over the limit: 413; a bad request line: 400).
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      std::string message = res.status == 413
                                ? "request body exceeds the limit of " +
                                      std::to_string(kMaxQueryBodyBytes) + " bytes"
                                : "HTTP error " + std::to_string(res.status);
      res.set_content(ErrorBody(message), kJson);
    }
  });
  if (!options.listen) return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) {
      return Status::Unavailable("http: cannot bind " + options.host + ":0");
    }
  } else if (!server.bind_to_port(options.host, port)) {
    return Status::Unavailable("http: cannot bind " + options.host + ":" + std::to_string(port));
  }
  impl->port = port;
  impl->listener = std::thread([raw] { raw->server.listen_after_bind(); });
  // Stop() before the listener runs would not end it: wait until it accepts.
  while (!raw->server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
}

}  // namespace kvindex
