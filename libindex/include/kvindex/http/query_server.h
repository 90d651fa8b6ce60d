// QueryServer: the HTTP API of SPEC §4 over a live PrefixIndex (`subscribe --http HOST:PORT`).
//
//   POST /query, /query_by_hash   the prefix match per instance (query_json.h shapes)
//   POST /cache                   the upstream cache-aware proxy's {"HitStatus": {...}}
//   POST /register, /unregister   the upstream conductor's bodies; unregister purges presence
//   GET  /global_view, /instances, /metrics (Prometheus text), /healthz
//
// Every error is JSON {"error": "..."} with 400 (bad request), 404 (unknown path or instance),
// 405 (wrong method), 413 (body over 16 MiB) or 501 (a backend that cannot add sources);
// no request can crash the server. docs/http-api.md is the reference.
//
// Concurrency: queries run on the server's worker threads and read the PrefixIndex concurrently
// with its single writer (prefix_index.h). Anything that writes (register, unregister) goes
// through the ServerBackend, which runs it on the writer (or under the writer's rules) and waits.
//
// This header names no cpp-httplib type.
#ifndef KVINDEX_HTTP_QUERY_SERVER_H_
#define KVINDEX_HTTP_QUERY_SERVER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/ingest/source_counters.h"

namespace kvindex {

// What the server reports about one source (GET /instances, /metrics).
struct ServedSource {
  std::string name;  // display name ("vllm-0", "vllm-0/dp1")
  SourceConfig config;
  std::string state;  // "live", "backfilling", "unregistered", ...
  SourceCounters counters;
  TransportCounters transport;  // live messages, bytes, replay traffic (source_counters.h)
};

// What the process knows besides the index, and the writer-side operations.
class ServerBackend {
 public:
  virtual ~ServerBackend() = default;
  // A snapshot of every source. Any thread.
  virtual std::vector<ServedSource> Sources() const = 0;
  // Adds the sources of one POST /register (one per DP rank) on the index's writer; blocks until
  // done. All or nothing: on failure (a source already registered, an endpoint that cannot be
  // opened) none of them is added or listed. kUnsupported when this process cannot add sources
  // while running.
  virtual Status Register(std::span<const SourceConfig> configs) = 0;
  // Purges every presence of `instance` and unlists it (POST /unregister) on the writer; blocks
  // until done. kNotFound for an unknown instance.
  virtual Result<ApplyResult> Unregister(const std::string& instance) = 0;
};

// A backend for a process whose writer is any thread holding `writer_mutex()` (tests, offline
// serving): every writer call below and every HTTP writer operation take the mutex.
class LocalBackend : public ServerBackend {
 public:
  explicit LocalBackend(PrefixIndex* index) : index_(index) {}
  Result<SourceId> AddSource(const SourceConfig& config);
  Result<ApplyResult> Apply(SourceId source, const EventBatch& batch);

  std::vector<ServedSource> Sources() const override;
  Status Register(std::span<const SourceConfig> configs) override;
  Result<ApplyResult> Unregister(const std::string& instance) override;

 private:
  PrefixIndex* index_;
  mutable std::mutex mutex_;
  std::vector<ServedSource> sources_;  // by SourceId
};

struct QueryServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 13333;  // 0: an ephemeral port (see QueryServer::port())
  size_t threads = 4;     // worker threads kept running
  // Connections served at once: a keep-alive connection holds one worker thread while it is open,
  // so a worker is started per connection beyond `threads`, up to this many (more wait).
  size_t max_connections = 1024;
  // `--compat conductor`: /query and /query_by_hash answer without the "data" wrapper.
  bool conductor_compat = false;
  // false: bind nothing and start no thread; only Handle() answers (the fuzz target).
  bool listen = true;
};

class QueryServer {
 public:
  // Binds and starts serving on its own threads. kUnavailable when the address cannot be bound,
  // kInvalidArgument for a bad host. `index` and `backend` must outlive the server.
  static Result<std::unique_ptr<QueryServer>> Start(const PrefixIndex& index,
                                                    ServerBackend& backend,
                                                    QueryServerOptions options = {});
  ~QueryServer();  // Stop()s
  QueryServer(const QueryServer&) = delete;
  QueryServer& operator=(const QueryServer&) = delete;

  // The bound port.
  uint16_t port() const;
  // Stops accepting, finishes the requests in flight, joins the threads. Idempotent.
  void Stop();

  // Answers one request as the HTTP layer would (used by the server and the fuzz target):
  // returns the status code and sets `body` and `content_type`.
  int Handle(const std::string& method, const std::string& path, const std::string& request_body,
             std::string& body, std::string& content_type);

  struct Impl;

 private:
  explicit QueryServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_HTTP_QUERY_SERVER_H_
