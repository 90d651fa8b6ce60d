// The HTTP half of a connection (exchange.h).
#include "exchange.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <sstream>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include "wire.h"

namespace kvindex::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using ErrorCode = boost::system::error_code;

// A connection's request body and answer strings are released after a request above this.
constexpr size_t kKeepAnswerBytes = 1 << 20;

}  // namespace

bool SendAll(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    pollfd waiting{fd, POLLOUT, 0};
    if (::poll(&waiting, 1, static_cast<int>(timeout.count())) <= 0) return false;
  }
  return true;
}

void Exchange::Begin(beast::flat_buffer& buffer) {
  parser_.emplace(request_);
  parser_->body_limit(options_.max_body_bytes);
  parser_->eager(true);
  continue_sent_ = false;
  if (buffer.size() == 0 && buffer.capacity() > kKeepBufferBytes) {
    buffer.shrink_to_fit();
    buffer.reserve(kKeepBufferBytes);
  }
  for (std::string* kept : {&request_.body, &answer_.body}) {
    if (kept->capacity() > kKeepAnswerBytes) std::string().swap(*kept);
  }
}

Exchange::Step Exchange::Parse(beast::flat_buffer& buffer) {
  while (buffer.size() > 0) {
    ErrorCode ec;
    const size_t used = parser_->put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) break;
    if (ec == bhttp::error::body_limit) return AnswerError(413);
    if (ec) return AnswerError(400);
    if (parser_->is_done()) return Answer();
    if (used == 0) break;
  }
  // "Expect: 100-continue": the client waits for this before it sends the body.
  if (parser_->is_header_done() && !continue_sent_ && request_.expect_continue) {
    continue_sent_ = true;
    if (!SendAll(fd_, "HTTP/1.1 100 Continue\r\n\r\n", options_.write_timeout)) return Step::kClose;
  }
  return Step::kRead;
}

Exchange::Step Exchange::Answer() {
  const bool keep_alive = parser_->keep_alive();
  parser_.reset();
  const bool head = request_.method == bhttp::verb::head;
  TargetPath(request_.target, path_);
  answer_.status = 200;
  answer_.content_type = {};
  answer_.stream = nullptr;
  hooks_.handle(request_.method_string, path_, request_.body, answer_);
  if (answer_.stream) {
    const bool complete = Stream(request_.version, keep_alive, head);
    answer_.stream = nullptr;
    return complete && keep_alive ? Step::kNext : Step::kClose;
  }
  // HEAD: the GET answer's Content-Length, no body.
  body_ = head ? std::string_view() : std::string_view(answer_.body);
  keep_alive_ = keep_alive;
  ResponseHead(request_.version, answer_.status, answer_.content_type, answer_.body.size(),
               keep_alive, head_);
  return Step::kSend;
}

Exchange::Step Exchange::AnswerError(int status) {
  const unsigned version = parser_ && parser_->is_header_done() ? request_.version : 11;
  parser_.reset();
  answer_.body = hooks_.error_body(status);
  body_ = answer_.body;
  keep_alive_ = false;
  ResponseHead(version, status, "application/json", answer_.body.size(), false, head_);
  return Step::kSend;
}

// A streamed answer: the header, then each chunk as the producer writes it (the header goes out
// with the first), each send waiting at most the write timeout. HEAD: the header alone.
bool Exchange::Stream(unsigned version, bool keep_alive, bool head_only) {
  bhttp::response<bhttp::empty_body> start;
  start.version(version);
  start.result(static_cast<unsigned>(answer_.status));
  start.set(bhttp::field::content_type,
            beast::string_view(answer_.content_type.data(), answer_.content_type.size()));
  start.keep_alive(keep_alive);
  start.chunked(true);
  std::ostringstream header;
  header << start.base();
  const std::chrono::milliseconds timeout = options_.write_timeout;
  std::string pending = header.str();
  if (head_only) return SendAll(fd_, pending, timeout);
  bool client_there = true;
  const bool complete = answer_.stream([&](std::string_view chunk) {
    if (!client_there) return false;
    if (chunk.empty()) return true;  // an empty chunk would end the body
    AppendChunk(pending, chunk);
    client_there = SendAll(fd_, pending, timeout);
    pending.clear();
    return client_there;
  });
  if (!complete || !client_there) return false;
  AppendChunk(pending, {});
  return SendAll(fd_, pending, timeout);
}

}  // namespace kvindex::http
