// QueryServer: serves a QueryService (query_service.h: the HTTP API of docs/http-api.md over a live
// PrefixIndex) over HTTP/1.1 (`subscribe --http HOST:PORT`). The server listens, runs the
// connection threads and hands every request to the service; what each endpoint answers is the
// service's. docs/http-api.md is the reference.
//
// Concurrency: requests run on the server's I/O threads (transport.h), each calling
// QueryService::Handle() (safe at once); Start(), Stop() and the destructor belong to one owning
// thread.
//
// This header names no type of the HTTP library.
#ifndef KVINDEX_HTTP_QUERY_SERVER_H_
#define KVINDEX_HTTP_QUERY_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvindex/core/status.h"
#include "kvindex/http/transport.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/server_backend.h"

namespace kvindex {

struct QueryServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 13333;  // 0: an ephemeral port (see QueryServer::port())
  // kPool: `threads` I/O threads share the open connections; kDedicated: a thread per connection.
  http::ConnectionModel model = http::ConnectionModel::kPool;
  size_t threads = 2;  // I/O threads (kPool); each serves its share of the open connections
  // Connections open at once; a further one waits to be accepted until one closes.
  size_t max_connections = 1024;
  // `--compat conductor`: /query and /query_by_hash answer without the "data" wrapper.
  bool conductor_compat = false;
  // false: bind nothing and start no thread; only Handle() answers.
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

  // Answers one request as the server does (QueryService::Handle(), without the transport):
  // returns the status code and sets `body` and `content_type`. Any thread.
  int Handle(const std::string& method, const std::string& path, const std::string& request_body,
             std::string& body, std::string& content_type);

  struct Impl;

 private:
  explicit QueryServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_HTTP_QUERY_SERVER_H_
