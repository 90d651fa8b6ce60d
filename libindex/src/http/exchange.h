// Exchange: the HTTP half of one connection, shared by both ways of serving connections
// (transport.h, ConnectionModel). It feeds what the connection read to Beast's parser
// (RequestParser), runs the handler when a request is complete and lays out the answer's head and
// body; the connection sends them. It touches the socket itself only for the two writes HTTP
// puts in the middle of a request: the "100 Continue" interim answer and a streamed answer's
// chunks (SendAll, each wait bounded by the write timeout).
#ifndef KVINDEX_HTTP_EXCHANGE_H_
#define KVINDEX_HTTP_EXCHANGE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>

#include "kvindex/http/transport.h"
#include "request_parser.h"

namespace kvindex::http {

// A connection's read buffer keeps room for this much (a whole query body: one recv per request)
// and shrinks back to it after a larger request.
constexpr size_t kKeepBufferBytes = 64 * 1024;

// Sends all of `data` on a blocking or non-blocking socket, waiting up to `timeout` for the client
// to read each time its buffer is full. false: the client went away or stalled.
bool SendAll(int fd, std::string_view data, std::chrono::milliseconds timeout);

class Exchange {
 public:
  // What the connection does next.
  enum class Step : uint8_t {
    kRead,   // the request is not complete: read more
    kSend,   // an answer is ready: send head() then body(), then call Sent()
    kNext,   // the request was answered (streamed) and the connection stays: the next request
    kClose,  // the connection ends now, without a further answer
  };

  // `options` and `hooks` must outlive the exchange; `fd` is the connection's socket.
  Exchange(const TransportOptions& options, const TransportHooks& hooks, int fd)
      : options_(options), hooks_(hooks), fd_(fd) {}

  // Before each request: a new parser, and storage a large request or answer left is released.
  void Begin(boost::beast::flat_buffer& buffer);
  // Parses what `buffer` holds, consuming it; answers once the request is complete.
  Step Parse(boost::beast::flat_buffer& buffer);

  // The answer of the last kSend: the status line and fields, then the body (empty for HEAD).
  std::string_view head() const { return head_; }
  std::string_view body() const { return body_; }
  // After kSend: whether the connection stays open for the next request.
  bool keep_alive() const { return keep_alive_; }

 private:
  Step Answer();
  Step AnswerError(int status);
  bool Stream(unsigned version, bool keep_alive, bool head_only);

  const TransportOptions& options_;
  const TransportHooks& hooks_;
  const int fd_;
  RequestParts request_;  // the request being read; its strings serve the next one
  std::optional<RequestParser> parser_;
  ServiceAnswer answer_;  // reused: the handler writes each answer into the same body
  std::string path_;
  std::string head_;
  std::string_view body_;
  bool keep_alive_ = false;
  bool continue_sent_ = false;
};

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_EXCHANGE_H_
