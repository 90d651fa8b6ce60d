// DedicatedPool: connections served each by a thread of its own (ConnectionModel::kDedicated),
// blocked in recv(2) between requests. A request that arrives in one segment costs one recv and
// one sendmsg, and one wake-up of the thread; the pool keeps finished threads parked for the next
// connection, so a new connection does not start a thread while a parked one is there.
//
// Timeouts are the socket's own (SO_RCVTIMEO, SO_SNDTIMEO), changed only when a request needs more
// than one read. Stop() shuts every open socket down, which wakes its thread.
#ifndef KVINDEX_HTTP_DEDICATED_POOL_H_
#define KVINDEX_HTTP_DEDICATED_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kvindex/http/transport.h"

namespace kvindex::http {

class DedicatedPool {
 public:
  // `options` and `hooks` must outlive the pool; `closed` runs after each connection's socket was
  // closed (on the connection's thread).
  DedicatedPool(const TransportOptions& options, const TransportHooks& hooks,
                std::function<void()> closed)
      : options_(options), hooks_(hooks), closed_(std::move(closed)) {}
  ~DedicatedPool() { Stop(); }
  DedicatedPool(const DedicatedPool&) = delete;
  DedicatedPool& operator=(const DedicatedPool&) = delete;

  // Serves the connected socket `fd` (taken over: the pool closes it) on a parked thread or a new
  // one. After Stop(), closes it at once.
  void Serve(int fd);
  // Ends every connection (their threads see the socket shut down) and joins the threads.
  void Stop();

 private:
  void Work();
  void Connection(int fd);

  const TransportOptions& options_;
  const TransportHooks& hooks_;
  const std::function<void()> closed_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<int> waiting_;       // accepted sockets no thread has taken yet
  std::unordered_set<int> open_;  // sockets being served, for Stop()
  size_t parked_ = 0;             // threads waiting for a socket that no socket has claimed
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_DEDICATED_POOL_H_
