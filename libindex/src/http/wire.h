// Byte helpers the HTTP transports share (no parsing: the libraries parse).
#ifndef KVINDEX_HTTP_WIRE_H_
#define KVINDEX_HTTP_WIRE_H_

#include <string>
#include <string_view>

namespace kvindex::http {

// The request-target's path as the handler sees it: up to '?' or '#', %XX decoded.
std::string TargetPath(std::string_view target);

// One chunk of a chunked body: hex size, CRLF, data, CRLF (an empty `data` is the last chunk).
void AppendChunk(std::string& out, std::string_view data);

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_WIRE_H_
