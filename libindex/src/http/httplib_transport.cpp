// The HTTP transport on cpp-httplib (transport.h): a thread per open connection.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include <httplib.h>

#include "kvindex/http/transport.h"
#include "wire.h"

namespace kvindex::http {
namespace {

// cpp-httplib serves a keep-alive connection on one worker until the connection closes or stays
// idle past the keep-alive timeout. With its fixed ThreadPool of N workers, connection N+1 waits
// until one of the first N goes quiet: a router whose connection pool is larger than N saw some
// of its queries wait seconds, or forever while the other connections stayed busy. This queue
// keeps `min_workers` threads and starts another whenever a connection arrives while no worker is
// idle, up to `max_workers` (beyond that a connection waits for the first free worker); a worker
// above `min_workers` that stays idle for kRetireAfter exits.
class ConnectionWorkers final : public httplib::TaskQueue {
 public:
  static constexpr std::chrono::seconds kRetireAfter{10};

  ConnectionWorkers(size_t min_workers, size_t max_workers, ConnectionGauges& gauges)
      : min_(min_workers), max_(std::max(min_workers, max_workers)), gauges_(gauges) {
    std::lock_guard lock(mutex_);
    while (live_ < min_) Spawn();
  }
  ~ConnectionWorkers() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    Reap();
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && live_ < max_) Spawn();
    wake_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.thread.join();
    workers_.clear();
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  void Spawn() {  // mutex_ held
    workers_.emplace_back();
    Worker* self = &workers_.back();
    ++live_;
    gauges_.workers.store(live_, std::memory_order_relaxed);
    self->thread = std::thread([this, self] { Run(*self); });
  }

  void Reap() {  // mutex_ held: join workers that retired (they no longer need the mutex)
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void Run(Worker& self) {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      const bool woken =
          wake_.wait_for(lock, kRetireAfter, [this] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty()) {
        if (shutdown_ || (!woken && live_ > min_)) break;
        continue;
      }
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      gauges_.connections.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      job();
      lock.lock();
      gauges_.connections.fetch_sub(1, std::memory_order_relaxed);
    }
    --live_;
    gauges_.workers.store(live_, std::memory_order_relaxed);
    self.done = true;
  }

  const size_t min_;
  const size_t max_;
  ConnectionGauges& gauges_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::list<Worker> workers_;  // stable addresses: each thread holds its own entry
  size_t live_ = 0;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

class HttplibTransport final : public HttpTransport {
 public:
  explicit HttplibTransport(TransportHooks hooks) : hooks_(std::move(hooks)) {}
  ~HttplibTransport() override { Stop(); }

  Status Listen(const TransportOptions& options) {
    const size_t threads = options.threads == 0 ? 1 : options.threads;
    const size_t max_connections = std::max(threads, options.max_connections);
    ConnectionGauges* gauges = hooks_.gauges;
    server_.new_task_queue = [threads, max_connections, gauges] {
      return new ConnectionWorkers(threads, max_connections, *gauges);
    };
    server_.set_payload_max_length(options.max_body_bytes);
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_max_count(100000);
    server_.set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(options.keep_alive_timeout).count());
    server_.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(options.read_timeout).count(), 0);
    server_.set_write_timeout(std::chrono::duration_cast<std::chrono::seconds>(options.write_timeout).count(), 0);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      ServiceAnswer answer = hooks_.handle(req.method, req.path, req.body);
      res.status = answer.status;
      res.set_content(std::move(answer.body), std::string(answer.content_type));
    };
    server_.Get(".*", handler);
    server_.Post(".*", handler);
    server_.Put(".*", handler);
    server_.Patch(".*", handler);
    server_.Delete(".*", handler);
    server_.Options(".*", handler);
    server_.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) res.set_content(hooks_.error_body(res.status), "application/json");
    });
    int port = options.port;
    if (port == 0) {
      port = server_.bind_to_any_port(options.host);
      if (port < 0) return Status::Unavailable("http: cannot bind " + options.host + ":0");
    } else if (!server_.bind_to_port(options.host, port)) {
      return Status::Unavailable("http: cannot bind " + options.host + ":" + std::to_string(port));
    }
    port_ = static_cast<uint16_t>(port);
    listener_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }
  void Stop() override {
    if (stopped_) return;
    stopped_ = true;
    server_.stop();
    if (listener_.joinable()) listener_.join();
  }

 private:
  TransportHooks hooks_;
  httplib::Server server_;
  std::thread listener_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace

Result<std::unique_ptr<HttpTransport>> StartHttplibTransport(const TransportOptions& options,
                                                             TransportHooks hooks) {
  auto transport = std::make_unique<HttplibTransport>(std::move(hooks));
  KVINDEX_RETURN_IF_ERROR(transport->Listen(options));
  return std::unique_ptr<HttpTransport>(std::move(transport));
}

}  // namespace kvindex::http
