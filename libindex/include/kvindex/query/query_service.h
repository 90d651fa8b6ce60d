// QueryService: the HTTP API of docs/http-api.md without a transport. A server hands it each
// request's method, path and body and sends back the status code, body and content type it answers:
//
//   POST /query, /query_by_hash   the prefix match per instance (query_json.h shapes)
//   POST /cache                   the upstream cache-aware proxy's {"HitStatus": {...}}
//   POST /register, /unregister   the upstream conductor's bodies; unregister purges presence
//   GET  /global_view, /instances, /metrics (Prometheus text), /healthz
//
// Every error is JSON {"error": "..."} with 400 (bad request), 404 (unknown path or instance),
// 405 (wrong method), 413 (body over kMaxQueryBodyBytes) or 501 (a backend that cannot add
// sources); no request can crash the service. docs/http-api.md is the reference. The service
// counts every request by endpoint and status code and times the query endpoints
// (serving_metrics.h); /metrics reports them.
//
// Thread safety: Handle() may run on any number of threads at once. Queries read the PrefixIndex
// concurrently with its single writer (prefix_index.h); anything that writes (register,
// unregister) goes through the ServerBackend, which runs it on the writer and waits.
#ifndef KVINDEX_QUERY_QUERY_SERVICE_H_
#define KVINDEX_QUERY_QUERY_SERVICE_H_

#include <functional>
#include <string>
#include <string_view>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/server_backend.h"
#include "kvindex/query/serving_metrics.h"

namespace kvindex {

struct QueryServiceOptions {
  // `--compat conductor`: /query and /query_by_hash answer without the "data" wrapper.
  bool conductor_compat = false;
};

// One answer of QueryService::Handle().
struct ServiceAnswer {
  int status = 200;  // the HTTP status code
  std::string body;
  // "application/json", or the Prometheus text type for /metrics: a static string.
  std::string_view content_type;
  // When set, the answer's body is streamed instead (`body` is ignored): the transport sends the
  // chunks `stream` writes with chunked transfer encoding; `write` returns false when the client
  // went away; `stream` returns false on an error (GET /snapshot).
  std::function<bool(const std::function<bool(std::string_view chunk)>& write)> stream;
};

class QueryService {
 public:
  // `index` and `backend` must outlive the service.
  QueryService(const PrefixIndex& index, ServerBackend& backend, QueryServiceOptions options = {});
  QueryService(const QueryService&) = delete;
  QueryService& operator=(const QueryService&) = delete;

  // Answers one request. Never fails: a bad request is an error answer. HEAD is answered as GET
  // (the transport drops the body). The arguments are read during the call only.
  ServiceAnswer Handle(std::string_view method, std::string_view path, std::string_view body);

  // The gauges /metrics shows of the transport's connection threads; the transport updates them.
  ConnectionGauges& connection_gauges() { return gauges_; }

  // The JSON error body for a request the transport answered itself before Handle() (413: a body
  // over kMaxQueryBodyBytes; any other status: "HTTP error <status>"). Not counted in /metrics.
  static std::string TransportErrorBody(int status);

 private:
  int Query(std::string_view body, std::string& out);
  int Cache(std::string_view body, std::string& out);
  int Register(std::string_view body, std::string& out);
  int Unregister(std::string_view body, std::string& out);
  std::string GlobalView() const;
  std::string Instances() const;
  std::string Healthz() const;

  const PrefixIndex& index_;
  ServerBackend& backend_;
  const QueryServiceOptions options_;
  RequestMetrics metrics_;
  ConnectionGauges gauges_;
};

}  // namespace kvindex

#endif  // KVINDEX_QUERY_QUERY_SERVICE_H_
