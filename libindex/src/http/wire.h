// Byte helpers the HTTP transports share (no parsing: the libraries parse).
#ifndef KVINDEX_HTTP_WIRE_H_
#define KVINDEX_HTTP_WIRE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace kvindex::http {

// The request-target's path as the handler sees it: up to '?' or '#', %XX decoded.
std::string TargetPath(std::string_view target);
// The same into `out` (replaced, its storage reused).
void TargetPath(std::string_view target, std::string& out);

// One chunk of a chunked body: hex size, CRLF, data, CRLF (an empty `data` is the last chunk).
void AppendChunk(std::string& out, std::string_view data);

// Replaces `out` with the head of an answer with a Content-Length body, byte for byte as
// Boost.Beast's serializer writes it: the status line (`version` 10 for HTTP/1.0, 11 for
// HTTP/1.1), Content-Type, Content-Length, then "Connection: close" when an HTTP/1.1 (or later)
// answer ends the connection, or "Connection: keep-alive" when an HTTP/1.0 one keeps it, and
// the empty line.
void ResponseHead(unsigned version, int status, std::string_view content_type,
                  size_t content_length, bool keep_alive, std::string& out);

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_WIRE_H_
