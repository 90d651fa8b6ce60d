// The HTTP transport on Boost.Beast over Asio (transport.h).
//
// A fixed pool of I/O threads, each running its own io_context; an accepted connection is handed
// to the threads in turn and stays on its thread, which reads, answers (QueryService runs on it)
// and writes. Per request: one wait for readability (epoll_wait; the descriptor is registered
// once and not re-armed), one recv into a buffer with room for a whole body, Beast's parser
// (RequestParser: no field list, the body into a string the connection reuses), the handler
// into the connection's reused answer, and one sendmsg of head and body. Pipelined requests are
// parsed from what the connection already read and answered one after the other. Timeouts are
// deadlines each connection stores and a sweeper on each thread checks every kSweepEvery (no
// timer per request).
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include "kvindex/http/transport.h"
#include "request_parser.h"
#include "wire.h"

namespace kvindex::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr std::chrono::milliseconds kSweepEvery{100};
constexpr size_t kKeepBufferBytes = 64 * 1024;  // a connection's read buffer shrinks back to this
// A connection's request body and answer strings are released after a request above this.
constexpr size_t kKeepAnswerBytes = 1 << 20;

class BeastTransport;
class Connection;

// One I/O thread: its io_context, its connections (for the sweeper) and the sweeper's timer.
struct Loop {
  std::list<Connection*> connections;  // destroyed after the context, whose handlers hold them
  net::io_context context{1};
  std::optional<net::steady_timer> sweeper;
  std::thread thread;
};

// Sends all of `data` on a socket Asio may have made non-blocking, waiting up to `timeout` for
// the client to read each time its buffer is full. false: the client went away or stalled.
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

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(BeastTransport& transport, Loop& loop, tcp::socket socket);
  ~Connection();

  void Start() { Serve(); }
  // The sweeper: closes the connection once its deadline has passed.
  void Sweep(Clock::time_point now) {
    if (now >= deadline_) Close();
  }
  void Close() {
    ErrorCode ignored;
    socket_.close(ignored);
  }

 private:
  enum class Next : uint8_t { kRead, kNextRequest, kStop };

  void Serve();
  Next ParseBuffered();
  void ReadSome();
  Next Answer();
  Next AnswerError(int status);
  Next Send(unsigned version, int status, std::string_view content_type, std::string_view body,
            size_t content_length, bool keep_alive);
  Next Sent(bool keep_alive);
  void Drain();
  bool Stream(const ServiceAnswer& answer, unsigned version, bool keep_alive, bool head_only);

  BeastTransport& transport_;
  Loop& loop_;
  std::list<Connection*>::iterator self_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  RequestParts request_;  // the request being read; its strings serve the next one
  std::optional<RequestParser> parser_;
  ServiceAnswer answer_;  // reused: the handler writes each answer into the same body
  std::string path_;
  std::string head_;      // the answer's status line and header fields
  Clock::time_point deadline_ = Clock::time_point::max();
  bool started_ = false;  // bytes of the current request have arrived
  bool continue_sent_ = false;
};

class BeastTransport final : public HttpTransport {
 public:
  BeastTransport(const TransportOptions& options, TransportHooks hooks)
      : options_(options), hooks_(std::move(hooks)) {
    const size_t threads = std::max<size_t>(1, options.threads);
    for (size_t i = 0; i < threads; ++i) loops_.push_back(std::make_unique<Loop>());
    acceptor_.emplace(loops_[0]->context);
    retry_.emplace(loops_[0]->context);
  }
  ~BeastTransport() override { Stop(); }

  Status Listen() {
    ErrorCode ec;
    tcp::endpoint endpoint(net::ip::make_address(options_.host, ec), options_.port);
    if (ec) {  // a host name: its first address
      tcp::resolver resolver(loops_[0]->context);
      const auto found = resolver.resolve(options_.host, std::to_string(options_.port), ec);
      if (ec || found.empty()) return Status::InvalidArgument("http: bad host " + options_.host);
      endpoint = found.begin()->endpoint();
    }
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("http: cannot bind " + options_.host + ":" +
                                 std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_->local_endpoint().port();
    accepting_ = true;
    Accept();
    for (auto& loop : loops_) {
      Loop* raw = loop.get();
      raw->sweeper.emplace(raw->context);
      Sweep(*raw);
      raw->thread = std::thread([raw] { raw->context.run(); });
    }
    if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(loops_.size());
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    for (auto& loop : loops_) {
      Loop* raw = loop.get();
      net::post(raw->context, [this, raw] {
        if (raw == loops_[0].get()) {
          ErrorCode ignored;
          acceptor_->close(ignored);
          retry_->cancel();
        }
        if (raw->sweeper) raw->sweeper->cancel();
        for (Connection* connection : raw->connections) connection->Close();
      });
    }
    for (auto& loop : loops_) {
      if (loop->thread.joinable()) loop->thread.join();
    }
    if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(0);
  }

  const TransportOptions& options() const { return options_; }
  const TransportHooks& hooks() const { return hooks_; }

  // A connection closed (its last handler is gone): accept again if the limit had stopped it.
  void Closed() {
    std::lock_guard lock(mutex_);
    --open_;
    if (hooks_.gauges != nullptr) hooks_.gauges->connections.store(open_);
    if (!accepting_ && !stopped_ && open_ < options_.max_connections) {
      accepting_ = true;
      net::post(loops_[0]->context, [this] { Accept(); });
    }
  }

 private:
  void Accept() {
    Loop& loop = *loops_[next_loop_++ % loops_.size()];
    acceptor_->async_accept(loop.context, [this, &loop](ErrorCode ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || stopped_) return;
      if (ec) {  // out of descriptors, say: try again shortly rather than spin
        retry_->expires_after(std::chrono::milliseconds(50));
        retry_->async_wait([this](ErrorCode timer) {
          if (!timer && !stopped_) Accept();
        });
        return;
      }
      ErrorCode ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      {
        std::lock_guard lock(mutex_);
        ++open_;
        if (hooks_.gauges != nullptr) hooks_.gauges->connections.store(open_);
      }
      // Made on its own thread: the connection list and everything else of a connection belong
      // to the thread it runs on.
      net::post(loop.context, [this, &loop, s = std::move(socket)]() mutable {
        std::make_shared<Connection>(*this, loop, std::move(s))->Start();
      });
      std::lock_guard lock(mutex_);
      if (open_ < options_.max_connections) {
        net::post(loops_[0]->context, [this] { Accept(); });
      } else {
        accepting_ = false;
      }
    });
  }

  void Sweep(Loop& loop) {
    loop.sweeper->expires_after(kSweepEvery);
    loop.sweeper->async_wait([this, &loop](ErrorCode ec) {
      if (ec || stopped_) return;
      const Clock::time_point now = Clock::now();
      for (auto it = loop.connections.begin(); it != loop.connections.end();) {
        Connection* connection = *it++;  // Sweep() may not erase: Close() only cancels
        connection->Sweep(now);
      }
      Sweep(loop);
    });
  }

  const TransportOptions options_;
  const TransportHooks hooks_;
  // Before the loops: connections the loops' handlers still hold call Closed() as they go.
  std::atomic<bool> stopped_{false};
  std::mutex mutex_;  // open_, accepting_
  size_t open_ = 0;
  bool accepting_ = false;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::optional<tcp::acceptor> acceptor_;
  std::optional<net::steady_timer> retry_;  // the accept retry after an error
  size_t next_loop_ = 0;
  uint16_t port_ = 0;
};

Connection::Connection(BeastTransport& transport, Loop& loop, tcp::socket socket)
    : transport_(transport), loop_(loop), socket_(std::move(socket)) {
  self_ = loop_.connections.insert(loop_.connections.end(), this);
  // Room for a whole query body makes one recv per request.
  buffer_.reserve(kKeepBufferBytes);
}

Connection::~Connection() {
  loop_.connections.erase(self_);
  transport_.Closed();
}

// Serves requests one after the other: each parsed from what was already read (pipelined) or read
// when it comes, until one has to wait for the socket.
void Connection::Serve() {
  for (;;) {
    parser_.emplace(request_);
    parser_->body_limit(transport_.options().max_body_bytes);
    parser_->eager(true);
    continue_sent_ = false;
    if (buffer_.size() == 0 && buffer_.capacity() > kKeepBufferBytes) {
      buffer_.shrink_to_fit();
      buffer_.reserve(kKeepBufferBytes);
    }
    for (std::string* kept : {&request_.body, &answer_.body}) {
      if (kept->capacity() > kKeepAnswerBytes) std::string().swap(*kept);
    }
    started_ = buffer_.size() > 0;  // a pipelined request, read with the previous one
    deadline_ = Clock::now() + (started_ ? transport_.options().read_timeout
                                         : transport_.options().keep_alive_timeout);
    const Next next = started_ ? ParseBuffered() : Next::kRead;
    if (next == Next::kRead) return ReadSome();
    if (next == Next::kStop) return;
  }
}

// Parses what the buffer holds: kNextRequest once the request was answered (and the connection
// stays), kRead when more bytes are needed, kStop when the connection ends or an answer is still
// being written.
Connection::Next Connection::ParseBuffered() {
  while (buffer_.size() > 0) {
    ErrorCode ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == bhttp::error::need_more) break;
    if (ec == bhttp::error::body_limit) return AnswerError(413);
    if (ec) return AnswerError(400);
    if (parser_->is_done()) return Answer();
    if (used == 0) break;
  }
  // "Expect: 100-continue": the client waits for this before it sends the body.
  if (parser_->is_header_done() && !continue_sent_ && request_.expect_continue) {
    continue_sent_ = true;
    if (!SendAll(socket_.native_handle(), "HTTP/1.1 100 Continue\r\n\r\n",
                 transport_.options().write_timeout)) {
      Close();
      return Next::kStop;
    }
  }
  return Next::kRead;
}

// One recv into the buffer's free room. Asio tries the recv before it waits only while the
// previous one filled its room; otherwise it waits for readability first, so a request costs one
// wait and one recv (and the descriptor, registered once, is not re-armed per wait).
void Connection::ReadSome() {
  const size_t room = beast::read_size(buffer_, kKeepBufferBytes);
  socket_.async_read_some(buffer_.prepare(room), [self = shared_from_this()](ErrorCode ec,
                                                                             size_t n) {
    // The end, a reset, or a close by the sweeper or Stop(): the connection ends without an
    // answer (a half-sent request is dropped).
    if (ec) return;
    self->buffer_.commit(n);
    if (!self->started_) {  // the request's first bytes: it must now arrive within the timeout
      self->started_ = true;
      self->deadline_ = Clock::now() + self->transport_.options().read_timeout;
    }
    const Next next = self->ParseBuffered();
    if (next == Next::kRead) return self->ReadSome();
    if (next == Next::kNextRequest) self->Serve();
  });
}

Connection::Next Connection::Answer() {
  const bool keep_alive = parser_->keep_alive();
  parser_.reset();
  const bool head = request_.method == bhttp::verb::head;
  TargetPath(request_.target, path_);
  answer_.status = 200;
  answer_.content_type = {};
  answer_.stream = nullptr;
  transport_.hooks().handle(request_.method_string, path_, request_.body, answer_);
  if (answer_.stream) {
    const bool complete = Stream(answer_, request_.version, keep_alive, head);
    answer_.stream = nullptr;
    if (complete && keep_alive) return Next::kNextRequest;
    Close();
    return Next::kStop;
  }
  // HEAD: the GET answer's Content-Length, no body.
  const std::string_view body = head ? std::string_view() : std::string_view(answer_.body);
  return Send(request_.version, answer_.status, answer_.content_type, body, answer_.body.size(),
              keep_alive);
}

Connection::Next Connection::AnswerError(int status) {
  const unsigned version = parser_ && parser_->is_header_done() ? request_.version : 11;
  parser_.reset();
  answer_.body = transport_.hooks().error_body(status);
  return Send(version, status, "application/json", answer_.body, answer_.body.size(), false);
}

// Sends the head and `body` in one sendmsg when the socket takes them at once (nearly always: an
// answer is far smaller than the socket's buffer); the rest, if any, is written as the client
// reads it, within the write timeout, without holding the thread.
Connection::Next Connection::Send(unsigned version, int status, std::string_view content_type,
                                  std::string_view body, size_t content_length, bool keep_alive) {
  ResponseHead(version, status, content_type, content_length, keep_alive, head_);
  iovec pieces[2] = {{head_.data(), head_.size()}, {const_cast<char*>(body.data()), body.size()}};
  msghdr message{};
  message.msg_iov = pieces;
  message.msg_iovlen = body.empty() ? 1 : 2;
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(socket_.native_handle(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    Close();
    return Next::kStop;
  }
  size_t done = sent > 0 ? static_cast<size_t>(sent) : 0;
  if (done == head_.size() + body.size()) return Sent(keep_alive);
  // The rest: what is left of the head, then of the body.
  const size_t head_left = done < head_.size() ? head_.size() - done : 0;
  const size_t body_done = done > head_.size() ? done - head_.size() : 0;
  const std::array<net::const_buffer, 2> rest = {
      net::buffer(head_.data() + (head_.size() - head_left), head_left),
      net::buffer(body.data() + body_done, body.size() - body_done)};
  deadline_ = Clock::now() + transport_.options().write_timeout;
  net::async_write(socket_, rest, [self = shared_from_this(), keep_alive](ErrorCode ec, size_t) {
    if (ec) return;
    if (self->Sent(keep_alive) == Next::kNextRequest) self->Serve();
  });
  return Next::kStop;
}

// After an answer went out: the next request, or the end of the connection.
Connection::Next Connection::Sent(bool keep_alive) {
  if (keep_alive) return Next::kNextRequest;
  ErrorCode ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  deadline_ = Clock::now() + transport_.options().read_timeout;
  Drain();
  return Next::kStop;
}

// After the last answer: reads and drops what the client still sends (a body over the limit)
// until it closes or the read timeout, so that closing with unread bytes (a reset) does not
// destroy the answer before the client has read it.
void Connection::Drain() {
  buffer_.clear();
  socket_.async_read_some(buffer_.prepare(kKeepBufferBytes),
                          [self = shared_from_this()](ErrorCode ec, size_t) {
                            if (!ec) self->Drain();
                          });
}

// A streamed answer: the header, then each chunk as the producer writes it (the header goes out
// with the first), each send waiting at most the write timeout. HEAD: the header alone.
bool Connection::Stream(const ServiceAnswer& answer, unsigned version, bool keep_alive,
                        bool head_only) {
  bhttp::response<bhttp::empty_body> start;
  start.version(version);
  start.result(static_cast<unsigned>(answer.status));
  start.set(bhttp::field::content_type,
            beast::string_view(answer.content_type.data(), answer.content_type.size()));
  start.keep_alive(keep_alive);
  start.chunked(true);
  std::ostringstream header;
  header << start.base();
  const int fd = socket_.native_handle();
  const std::chrono::milliseconds timeout = transport_.options().write_timeout;
  std::string pending = header.str();
  if (head_only) return SendAll(fd, pending, timeout);
  bool client_there = true;
  const bool complete = answer.stream([&](std::string_view chunk) {
    if (!client_there) return false;
    if (chunk.empty()) return true;  // an empty chunk would end the body
    AppendChunk(pending, chunk);
    client_there = SendAll(fd, pending, timeout);
    pending.clear();
    return client_there;
  });
  if (!complete || !client_there) return false;
  AppendChunk(pending, {});
  return SendAll(fd, pending, timeout);
}

}  // namespace

Result<std::unique_ptr<HttpTransport>> StartHttpTransport(const TransportOptions& options,
                                                          TransportHooks hooks) {
  auto transport = std::make_unique<BeastTransport>(options, std::move(hooks));
  KVINDEX_RETURN_IF_ERROR(transport->Listen());
  return std::unique_ptr<HttpTransport>(std::move(transport));
}

}  // namespace kvindex::http
