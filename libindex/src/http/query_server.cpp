// QueryServer: a QueryService behind an HTTP transport (transport.h).
#include "kvindex/http/query_server.h"

#include <utility>

#include "kvindex/http/transport.h"
#include "kvindex/query/query_json.h"
#include "kvindex/query/query_service.h"

namespace kvindex {

struct QueryServer::Impl {
  Impl(const PrefixIndex& index, ServerBackend& backend, const QueryServerOptions& options)
      : service(index, backend, QueryServiceOptions{options.conductor_compat}) {}

  QueryService service;
  std::unique_ptr<http::HttpTransport> transport;
};

QueryServer::QueryServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

QueryServer::~QueryServer() { Stop(); }

uint16_t QueryServer::port() const { return impl_->transport ? impl_->transport->port() : 0; }

void QueryServer::Stop() {
  if (impl_->transport) impl_->transport->Stop();
}

int QueryServer::Handle(const std::string& method, const std::string& path,
                        const std::string& request_body, std::string& body,
                        std::string& content_type) {
  ServiceAnswer answer = impl_->service.Handle(method, path, request_body);
  body = std::move(answer.body);
  content_type = answer.content_type;
  return answer.status;
}

Result<std::unique_ptr<QueryServer>> QueryServer::Start(const PrefixIndex& index,
                                                        ServerBackend& backend,
                                                        QueryServerOptions options) {
  auto impl = std::make_unique<Impl>(index, backend, options);
  if (!options.listen) return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
  http::TransportOptions transport;
  transport.host = options.host;
  transport.port = options.port;
  transport.model = options.model;
  transport.threads = options.threads;
  transport.max_connections = options.max_connections;
  transport.max_body_bytes = kMaxQueryBodyBytes;
  http::TransportHooks hooks;
  QueryService* service = &impl->service;
  hooks.handle = [service](std::string_view method, std::string_view path, std::string_view body,
                           ServiceAnswer& answer) { service->Handle(method, path, body, answer); };
  hooks.error_body = [](int status) { return QueryService::TransportErrorBody(status); };
  hooks.gauges = &impl->service.connection_gauges();
  KVINDEX_ASSIGN_OR_RETURN(impl->transport, http::StartHttpTransport(transport, std::move(hooks)));
  return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
}

}  // namespace kvindex
