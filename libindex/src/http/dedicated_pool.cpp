// Connections on threads of their own (dedicated_pool.h).
#include "dedicated_pool.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>

#include "exchange.h"

namespace kvindex::http {
namespace {

namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Sets the socket's receive or send timeout (SO_RCVTIMEO, SO_SNDTIMEO); at least 1 ms, as 0 would
// mean none.
void SetTimeout(int fd, int option, milliseconds timeout) {
  const long ms = std::max<long>(1, static_cast<long>(timeout.count()));
  const timeval value{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, option, &value, sizeof value);
}

// The head and body in one sendmsg when the socket takes them at once (nearly always: an answer
// is far smaller than the socket's buffer); what is left goes out as the client reads it, each
// wait bounded by the socket's send timeout. false: the client went away or stalled.
bool SendAnswer(int fd, std::string_view head, std::string_view body) {
  iovec pieces[2] = {{const_cast<char*>(head.data()), head.size()},
                     {const_cast<char*>(body.data()), body.size()}};
  msghdr message{};
  message.msg_iov = pieces;
  message.msg_iovlen = body.empty() ? 1 : 2;
  while (message.msg_iovlen > 0) {
    const ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    size_t done = static_cast<size_t>(sent);
    while (message.msg_iovlen > 0 && done >= message.msg_iov->iov_len) {
      done -= message.msg_iov->iov_len;
      ++message.msg_iov;
      --message.msg_iovlen;
    }
    if (message.msg_iovlen > 0) {
      message.msg_iov->iov_base = static_cast<char*>(message.msg_iov->iov_base) + done;
      message.msg_iov->iov_len -= done;
    }
  }
  return true;
}

// After the last answer: reads and drops what the client still sends (a body over the limit)
// until it closes or `timeout` passes, so that closing with unread bytes (a reset) does not
// destroy the answer before the client has read it.
void Drain(int fd, milliseconds timeout) {
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point deadline = Clock::now() + timeout;
  char discard[4096];
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return;
    SetTimeout(fd, SO_RCVTIMEO, std::chrono::ceil<milliseconds>(deadline - now));
    const ssize_t n = ::recv(fd, discard, sizeof discard, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

}  // namespace

void DedicatedPool::Serve(int fd) {
  std::unique_lock lock(mutex_);
  if (stopping_) {
    lock.unlock();
    ::close(fd);
    closed_();
    return;
  }
  waiting_.push_back(fd);
  open_.insert(fd);
  // A parked thread takes it, unless the sockets waiting already claim every parked thread.
  if (waiting_.size() <= parked_) {
    wake_.notify_one();
    return;
  }
  threads_.emplace_back([this] { Work(); });
  if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(threads_.size());
}

void DedicatedPool::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (std::thread& thread : threads) thread.join();
  if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(0);
}

void DedicatedPool::Work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++parked_;
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    --parked_;
    if (waiting_.empty()) return;  // stopping, and nothing left to close
    const int fd = waiting_.front();
    waiting_.pop_front();
    lock.unlock();
    Connection(fd);
    lock.lock();
    open_.erase(fd);  // Stop() no longer shuts it down: closing it is safe
    lock.unlock();
    ::close(fd);
    closed_();
    lock.lock();
  }
}

// Serves requests one after the other until the client leaves, a timeout passes, an answer
// closes the connection or Stop() shuts the socket down.
void DedicatedPool::Connection(int fd) {
  Exchange exchange(options_, hooks_, fd);
  beast::flat_buffer buffer;
  buffer.reserve(kKeepBufferBytes);
  SetTimeout(fd, SO_SNDTIMEO, options_.write_timeout);
  milliseconds receive_timeout = options_.keep_alive_timeout;
  SetTimeout(fd, SO_RCVTIMEO, receive_timeout);
  for (;;) {
    exchange.Begin(buffer);
    // A request read with the previous one (pipelined) must be complete within the read timeout;
    // otherwise the connection waits up to the keep-alive timeout for the next request's first
    // bytes, and then the read timeout runs from them.
    bool started = buffer.size() > 0;
    Clock::time_point deadline =
        started ? Clock::now() + options_.read_timeout : Clock::time_point::max();
    Exchange::Step step = started ? exchange.Parse(buffer) : Exchange::Step::kRead;
    while (step == Exchange::Step::kRead) {
      milliseconds wait = options_.keep_alive_timeout;
      if (started) {
        const Clock::time_point now = Clock::now();
        if (now >= deadline) return;
        wait = std::chrono::ceil<milliseconds>(deadline - now);
      }
      if (wait != receive_timeout) {  // only when a request takes more than one read
        receive_timeout = wait;
        SetTimeout(fd, SO_RCVTIMEO, wait);
      }
      const size_t room = beast::read_size(buffer, kKeepBufferBytes);
      const auto space = buffer.prepare(room);
      const ssize_t n = ::recv(fd, space.data(), space.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      // The end, a reset, a timeout, or Stop(): the connection ends without an answer (a
      // half-sent request is dropped).
      if (n <= 0) return;
      buffer.commit(static_cast<size_t>(n));
      if (!started) {
        started = true;
        deadline = Clock::now() + options_.read_timeout;
      }
      step = exchange.Parse(buffer);
    }
    if (step == Exchange::Step::kClose) return;
    if (step == Exchange::Step::kNext) continue;
    if (!SendAnswer(fd, exchange.head(), exchange.body())) return;
    if (!exchange.keep_alive()) return Drain(fd, options_.read_timeout);
  }
}

}  // namespace kvindex::http
