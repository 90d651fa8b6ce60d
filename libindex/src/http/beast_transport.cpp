// The HTTP transport on Boost.Beast over Asio (transport.h).
//
// A fixed pool of I/O threads, each running its own io_context; an accepted connection is handed
// to the threads in turn and stays on its thread, which reads, answers (QueryService runs on it)
// and writes. Per request: one wait for readability, one recv, one sendmsg of header and body
// (Beast's serializer gives both as one buffer sequence). Pipelined requests are parsed from what
// the connection already read and answered one after the other. Timeouts are deadlines each
// connection stores and a sweeper on each thread checks every kSweepEvery (no timer per request).
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
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
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include "kvindex/http/transport.h"
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

  void Start() { ReadNext(); }
  // The sweeper: closes the connection once its deadline has passed.
  void Sweep(Clock::time_point now) {
    if (now >= deadline_) Close();
  }
  void Close() {
    ErrorCode ignored;
    socket_.close(ignored);
  }

 private:
  void ReadNext();
  void ReadSome();
  void OnRead(ErrorCode ec);
  void Answer();
  void AnswerError(int status);
  void Send(bhttp::response<bhttp::string_body>&& response, bool keep_alive);
  void Drain();
  bool Stream(const ServiceAnswer& answer, unsigned version, bool keep_alive, bool head_only);

  BeastTransport& transport_;
  Loop& loop_;
  std::list<Connection*>::iterator self_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> response_;
  Clock::time_point deadline_ = Clock::time_point::max();
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
  // Beast reads into the buffer's free capacity (at least 512 bytes): room for a whole query
  // body makes one recv per request.
  buffer_.reserve(kKeepBufferBytes);
}

Connection::~Connection() {
  loop_.connections.erase(self_);
  transport_.Closed();
}

void Connection::ReadNext() {
  parser_.emplace();
  parser_->body_limit(transport_.options().max_body_bytes);
  parser_->eager(true);
  continue_sent_ = false;
  if (buffer_.size() == 0 && buffer_.capacity() > kKeepBufferBytes) {
    buffer_.shrink_to_fit();
    buffer_.reserve(kKeepBufferBytes);
  }
  if (buffer_.size() > 0) {  // a pipelined request, read with the previous one
    deadline_ = Clock::now() + transport_.options().read_timeout;
    ReadSome();
    return;
  }
  // Wait until the next request arrives, so that it takes one recv (no recv that finds nothing).
  deadline_ = Clock::now() + transport_.options().keep_alive_timeout;
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](ErrorCode ec) {
    if (ec) return;
    self->deadline_ = Clock::now() + self->transport_.options().read_timeout;
    self->ReadSome();
  });
}

void Connection::ReadSome() {
  bhttp::async_read_some(socket_, buffer_, *parser_,
                         [self = shared_from_this()](ErrorCode ec, size_t) { self->OnRead(ec); });
}

void Connection::OnRead(ErrorCode ec) {
  if (ec == bhttp::error::body_limit) return AnswerError(413);
  if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted) return;
  if (ec == bhttp::error::partial_message || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::bad_descriptor) {
    return;
  }
  if (ec) return AnswerError(400);
  if (parser_->is_done()) return Answer();
  // "Expect: 100-continue": the client waits for this before it sends the body.
  if (parser_->is_header_done() && !continue_sent_) {
    const auto& request = parser_->get();
    const auto expect = request[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      continue_sent_ = true;
      if (!SendAll(socket_.native_handle(), "HTTP/1.1 100 Continue\r\n\r\n",
                   transport_.options().write_timeout)) {
        return Close();
      }
    }
  }
  ReadSome();
}

void Connection::Answer() {
  bhttp::request<bhttp::string_body> request = parser_->release();
  parser_.reset();
  const auto method = request.method_string();
  const auto target = request.target();
  const bool head = request.method() == bhttp::verb::head;
  const bool keep_alive = request.keep_alive();
  ServiceAnswer answer = transport_.hooks().handle(
      std::string_view(method.data(), method.size()),
      TargetPath(std::string_view(target.data(), target.size())), request.body());
  if (answer.stream) {
    if (Stream(answer, request.version(), keep_alive, head) && keep_alive) return ReadNext();
    return Close();
  }
  bhttp::response<bhttp::string_body> response;
  response.version(request.version());
  response.result(static_cast<unsigned>(answer.status));
  response.set(bhttp::field::content_type,
               beast::string_view(answer.content_type.data(), answer.content_type.size()));
  response.body() = std::move(answer.body);
  response.prepare_payload();
  if (head) response.body().clear();  // Content-Length stays the GET answer's
  Send(std::move(response), keep_alive);
}

void Connection::AnswerError(int status) {
  const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
  parser_.reset();
  bhttp::response<bhttp::string_body> response;
  response.version(version);
  response.result(static_cast<unsigned>(status));
  response.set(bhttp::field::content_type, "application/json");
  response.body() = transport_.hooks().error_body(status);
  response.prepare_payload();
  Send(std::move(response), false);
}

void Connection::Send(bhttp::response<bhttp::string_body>&& response, bool keep_alive) {
  response.keep_alive(keep_alive);
  response_ = std::move(response);
  deadline_ = Clock::now() + transport_.options().write_timeout;
  bhttp::async_write(socket_, response_, [self = shared_from_this(), keep_alive](ErrorCode ec, size_t) {
    self->response_ = {};
    if (ec) return;
    if (keep_alive) return self->ReadNext();
    ErrorCode ignored;
    self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
    self->deadline_ = Clock::now() + self->transport_.options().read_timeout;
    self->Drain();
  });
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
