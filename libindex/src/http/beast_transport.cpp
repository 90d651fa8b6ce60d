// The HTTP transport on Boost.Beast over Asio (transport.h).
//
// An acceptor on the first I/O thread hands each connection to its thread. ConnectionModel::kPool:
// a fixed pool of I/O threads, each running its own io_context; an accepted connection is handed
// to the threads in turn and stays on its thread, which reads, answers (QueryService runs on it)
// and writes. Per request: one wait for readability (epoll_wait; the descriptor is registered
// once and not re-armed), one recv into a buffer with room for a whole body, the exchange
// (exchange.h: Beast's parser, the handler into the connection's reused answer), and one sendmsg
// of head and body. Pipelined requests are parsed from what the connection already read and
// answered one after the other. Timeouts are deadlines each connection stores and a sweeper on
// each thread checks every kSweepEvery (no timer per request). ConnectionModel::kDedicated: the
// accepted socket goes to a thread of its own (dedicated_pool.h).
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

#include "kvindex/http/transport.h"
#include "dedicated_pool.h"
#include "exchange.h"

namespace kvindex::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr std::chrono::milliseconds kSweepEvery{100};

class BeastTransport;
class Connection;

// One I/O thread: its io_context, its connections (for the sweeper) and the sweeper's timer.
struct Loop {
  std::list<Connection*> connections;  // destroyed after the context, whose handlers hold them
  net::io_context context{1};
  std::optional<net::steady_timer> sweeper;
  std::thread thread;
};

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
  Next Send();
  Next Sent(bool keep_alive);
  void Drain();

  BeastTransport& transport_;
  Loop& loop_;
  std::list<Connection*>::iterator self_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  Exchange exchange_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool started_ = false;  // bytes of the current request have arrived
};

class BeastTransport final : public HttpTransport {
 public:
  BeastTransport(const TransportOptions& options, TransportHooks hooks)
      : options_(options), hooks_(std::move(hooks)) {
    // kDedicated: the first loop only accepts (and its sweeper has nothing to sweep).
    const size_t threads = dedicated() ? 1 : std::max<size_t>(1, options.threads);
    if (dedicated()) dedicated_.emplace(options_, hooks_, [this] { Closed(); });
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
    if (hooks_.gauges != nullptr && !dedicated()) hooks_.gauges->workers.store(loops_.size());
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
    if (dedicated_) dedicated_->Stop();  // after the acceptor: no connection comes after this
    if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(0);
  }

  const TransportOptions& options() const { return options_; }
  bool dedicated() const { return options_.model == ConnectionModel::kDedicated; }
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
      if (dedicated_) {
        const int fd = socket.release(ignored);
        if (fd >= 0) {
          dedicated_->Serve(fd);
        } else {
          Closed();
        }
      } else {
        // Made on its own thread: the connection list and everything else of a connection
        // belong to the thread it runs on.
        net::post(loop.context, [this, &loop, s = std::move(socket)]() mutable {
          std::make_shared<Connection>(*this, loop, std::move(s))->Start();
        });
      }
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
  std::optional<DedicatedPool> dedicated_;  // kDedicated: the connections' threads
  std::optional<tcp::acceptor> acceptor_;
  std::optional<net::steady_timer> retry_;  // the accept retry after an error
  size_t next_loop_ = 0;
  uint16_t port_ = 0;
};

Connection::Connection(BeastTransport& transport, Loop& loop, tcp::socket socket)
    : transport_(transport),
      loop_(loop),
      socket_(std::move(socket)),
      exchange_(transport.options(), transport.hooks(), socket_.native_handle()) {
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
    exchange_.Begin(buffer_);
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
  switch (exchange_.Parse(buffer_)) {
    case Exchange::Step::kRead:
      return Next::kRead;
    case Exchange::Step::kSend:
      return Send();
    case Exchange::Step::kNext:
      return Next::kNextRequest;
    case Exchange::Step::kClose:
      break;
  }
  Close();
  return Next::kStop;
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

// Sends the exchange's head and body in one sendmsg when the socket takes them at once (nearly
// always: an answer is far smaller than the socket's buffer); the rest, if any, is written as the
// client reads it, within the write timeout, without holding the thread.
Connection::Next Connection::Send() {
  const std::string_view head = exchange_.head();
  const std::string_view body = exchange_.body();
  const bool keep_alive = exchange_.keep_alive();
  iovec pieces[2] = {{const_cast<char*>(head.data()), head.size()},
                     {const_cast<char*>(body.data()), body.size()}};
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
  if (done == head.size() + body.size()) return Sent(keep_alive);
  // The rest: what is left of the head, then of the body.
  const size_t head_left = done < head.size() ? head.size() - done : 0;
  const size_t body_done = done > head.size() ? done - head.size() : 0;
  const std::array<net::const_buffer, 2> rest = {
      net::buffer(head.data() + (head.size() - head_left), head_left),
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

}  // namespace

Result<std::unique_ptr<HttpTransport>> StartHttpTransport(const TransportOptions& options,
                                                          TransportHooks hooks) {
  auto transport = std::make_unique<BeastTransport>(options, std::move(hooks));
  KVINDEX_RETURN_IF_ERROR(transport->Listen());
  return std::unique_ptr<HttpTransport>(std::move(transport));
}

}  // namespace kvindex::http
