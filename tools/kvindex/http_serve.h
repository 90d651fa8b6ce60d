// `subscribe --http`: the HTTP API (docs/http-api.md) over the live index, with a ServerBackend that runs
// writer work on the Subscriber's I/O thread: unregister through Subscriber::Submit(), register
// through Subscriber::AddSourceWhileRunning().
#ifndef KVINDEX_TOOLS_HTTP_SERVE_H_
#define KVINDEX_TOOLS_HTTP_SERVE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/http/query_server.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/server_backend.h"
#include "kvindex/zmq/subscriber.h"

namespace kvindex::cli {

struct HttpCliOptions {
  std::string address;  // --http (empty value: the default address)
  bool given = false;
  std::string compat;   // --compat: "" or "conductor"
  std::string mode = "pool";  // --http-mode: "pool" or "dedicated"
  size_t threads = 2;   // --http-threads
  size_t max_connections = 1024;  // --http-max-connections
};

// Adds --http, --compat, --http-mode, --http-threads and --http-max-connections to `cmd`.
void AddHttpOptions(CLI::App* cmd, HttpCliOptions& options);

class HttpServing;  // the running server and its backend

// Starts serving when --http was given, or when the --config file has `http_server_port` (then on
// 127.0.0.1:PORT). Returns null when not asked to serve. kInvalidArgument for a bad address or
// --compat value, kUnavailable when the address cannot be bound.
// `journal`, when set, reports the journal the subscriber publishes to (subscribe --journal).
Result<std::shared_ptr<HttpServing>> StartHttpServing(
    const HttpCliOptions& options, const std::string& config_path, PrefixIndex& index,
    Subscriber& subscriber, const std::vector<SourceConfig>& sources,
    std::function<std::optional<JournalServing>()> journal = {});

// The same with a backend of the caller's (a replica's), which must outlive the serving.
Result<std::shared_ptr<HttpServing>> StartHttpServingWith(const HttpCliOptions& options,
                                                          const std::string& config_path,
                                                          PrefixIndex& index,
                                                          ServerBackend& backend);

// Stops accepting and finishes the requests in flight. Null-safe.
void StopHttpServing(const std::shared_ptr<HttpServing>& serving);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_HTTP_SERVE_H_
