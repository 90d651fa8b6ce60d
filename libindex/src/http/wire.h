// Byte helpers the HTTP transports share (no parsing: the libraries parse).
#ifndef KVINDEX_HTTP_WIRE_H_
#define KVINDEX_HTTP_WIRE_H_

#include <memory>
#include <string>
#include <string_view>

#include "kvindex/core/status.h"
#include "kvindex/http/transport.h"

namespace kvindex::http {

Result<std::unique_ptr<HttpTransport>> StartBeastTransport(const TransportOptions& options,
                                                           TransportHooks hooks);
Result<std::unique_ptr<HttpTransport>> StartEvhttpTransport(const TransportOptions& options,
                                                            TransportHooks hooks);
Result<std::unique_ptr<HttpTransport>> StartHttplibTransport(const TransportOptions& options,
                                                             TransportHooks hooks);

// The request-target's path as the handler sees it: up to '?' or '#', %XX decoded.
std::string TargetPath(std::string_view target);

// One chunk of a chunked body: hex size, CRLF, data, CRLF (an empty `data` is the last chunk).
void AppendChunk(std::string& out, std::string_view data);

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_WIRE_H_
