// HttpTransport: what QueryServer needs from an HTTP/1.1 server library. A transport listens,
// reads requests off its connections, hands each one's method, path and body to the handler and
// sends back what the handler answered; routing, bodies and errors are the handler's
// (QueryService). QueryServer runs one; tests run one with a handler of their own.
//
// This header names no type of the HTTP library.
#ifndef KVINDEX_HTTP_TRANSPORT_H_
#define KVINDEX_HTTP_TRANSPORT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kvindex/core/status.h"
#include "kvindex/query/query_service.h"
#include "kvindex/query/serving_metrics.h"

namespace kvindex::http {

// How connections get a thread.
enum class ConnectionModel : uint8_t {
  // `threads` I/O threads share the open connections, each waiting on all of its own at once
  // (epoll): the fewest threads, whatever the number of connections.
  kPool,
  // Each connection has a thread of its own, blocked in recv between requests: the fewest system
  // calls and wake-ups per request, one thread per open connection (up to `max_connections`).
  kDedicated,
};

struct TransportOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  ConnectionModel model = ConnectionModel::kPool;
  size_t threads = 2;             // I/O threads (kPool)
  size_t max_connections = 1024;  // open connections served at once; more wait to be accepted
  size_t max_body_bytes = 0;      // a larger request body is answered 413 and the connection closed
  // A request not complete this long after its first byte (or after the previous answer) is cut
  // off, as is a write the client does not read for this long.
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  std::chrono::milliseconds keep_alive_timeout{2000};  // an idle keep-alive connection is closed
};

struct TransportHooks {
  // Answers one request into `answer` (the connection's, reused from request to request: the
  // handler replaces its status, content type and body; `stream` arrives empty); `path` is the
  // decoded path without its query string. Any I/O thread.
  std::function<void(std::string_view method, std::string_view path, std::string_view body,
                     ServiceAnswer& answer)>
      handle;
  // The body of an error the transport answers itself (413, 400).
  std::function<std::string(int status)> error_body;
  // workers: the threads serving connections (kPool: the I/O threads; kDedicated: the
  // connections' threads, parked ones included); connections: open ones.
  ConnectionGauges* gauges = nullptr;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual uint16_t port() const = 0;
  // Stops accepting, closes the connections, joins the threads. Idempotent.
  virtual void Stop() = 0;
};

// Binds and starts serving. kUnavailable when the address cannot be bound, kInvalidArgument for
// a bad host.
Result<std::unique_ptr<HttpTransport>> StartHttpTransport(const TransportOptions& options,
                                                          TransportHooks hooks);

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_TRANSPORT_H_
