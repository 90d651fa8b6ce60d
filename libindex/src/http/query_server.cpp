// QueryServer: cpp-httplib glue around QueryService, which answers every request.
#include "kvindex/http/query_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include <httplib.h>

#include "kvindex/query/query_json.h"
#include "kvindex/query/query_service.h"

namespace kvindex {
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

}  // namespace

struct QueryServer::Impl {
  Impl(const PrefixIndex& index, ServerBackend& backend, const QueryServerOptions& options)
      : service(index, backend, QueryServiceOptions{options.conductor_compat}) {}

  QueryService service;
  httplib::Server server;
  std::thread listener;
  int port = 0;
  std::atomic<bool> stopped{false};
};

QueryServer::QueryServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

QueryServer::~QueryServer() { Stop(); }

uint16_t QueryServer::port() const { return static_cast<uint16_t>(impl_->port); }

void QueryServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int QueryServer::Handle(const std::string& method, const std::string& path,
                        const std::string& request_body, std::string& body,
                        std::string& content_type) {
  ServiceAnswer answer = impl_->service.Handle(method, path, request_body);
  body = std::move(answer.body);
  content_type = answer.content_type;
  return answer.status;
}

Result<std::unique_ptr<QueryServer>> QueryServer::Start(const PrefixIndex& index,
                                                        ServerBackend& backend,
                                                        QueryServerOptions options) {
  auto impl = std::make_unique<Impl>(index, backend, options);
  Impl* raw = impl.get();
  httplib::Server& server = impl->server;
  const size_t threads = options.threads == 0 ? 1 : options.threads;
  const size_t max_connections = std::max(threads, options.max_connections);
  server.new_task_queue = [threads, max_connections, raw] {
    return new ConnectionWorkers(threads, max_connections, raw->service.connection_gauges());
  };
  server.set_payload_max_length(kMaxQueryBodyBytes);
  // cpp-httplib writes headers and body separately: without TCP_NODELAY, Nagle's algorithm and the
  // client's delayed ACK hold every answer for ~40 ms.
  server.set_tcp_nodelay(true);
  // A connection is closed after this many requests: at 1,000 a client at 1,250 requests/s had to
  // reconnect every 0.8 s, and the reconnects showed in the tail (bench-http.sh).
  server.set_keep_alive_max_count(100000);
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  // One handler for every method and path (the service answers 404 and 405 itself); routes
  // are registered per method so that cpp-httplib reads the body first.
  auto handler = [raw](const httplib::Request& req, httplib::Response& res) {
    ServiceAnswer answer = raw->service.Handle(req.method, req.path, req.body);
    res.status = answer.status;
    if (answer.stream) {
      // Streamed in one provider call: the producer writes the whole answer, chunk by chunk.
      res.set_chunked_content_provider(
          std::string(answer.content_type),
          [stream = std::move(answer.stream)](size_t, httplib::DataSink& sink) {
            const bool ok =
                stream([&](std::string_view chunk) { return sink.write(chunk.data(), chunk.size()); });
            if (ok) sink.done();
            return ok;
          });
      return;
    }
    res.set_content(std::move(answer.body), std::string(answer.content_type));
  };
  server.Get(".*", handler);
  server.Post(".*", handler);
  server.Put(".*", handler);
  server.Patch(".*", handler);
  server.Delete(".*", handler);
  server.Options(".*", handler);
  // Errors cpp-httplib answers itself (a body over the limit: 413; a bad request line: 400).
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      res.set_content(QueryService::TransportErrorBody(res.status), "application/json");
    }
  });
  if (!options.listen) return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) {
      return Status::Unavailable("http: cannot bind " + options.host + ":0");
    }
  } else if (!server.bind_to_port(options.host, port)) {
    return Status::Unavailable("http: cannot bind " + options.host + ":" + std::to_string(port));
  }
  impl->port = port;
  impl->listener = std::thread([raw] { raw->server.listen_after_bind(); });
  // Stop() before the listener runs would not end it: wait until it accepts.
  while (!raw->server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<QueryServer>(new QueryServer(std::move(impl)));
}

}  // namespace kvindex
