// The HTTP transport on libevent's evhttp (transport.h): one event loop per I/O thread, each with
// its own listening socket on the same port (SO_REUSEPORT; the kernel spreads the connections).
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvindex/http/transport.h"
#include "wire.h"

namespace kvindex::http {
namespace {

struct EvLoop {
  event_base* base = nullptr;
  evhttp* server = nullptr;
  std::thread thread;
};

const char* MethodName(evhttp_cmd_type command) {
  switch (command) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
  }
  return "GET";
}

class EvhttpTransport final : public HttpTransport {
 public:
  explicit EvhttpTransport(TransportHooks hooks) : hooks_(std::move(hooks)) {}
  ~EvhttpTransport() override {
    Stop();
    for (EvLoop& loop : loops_) {
      if (loop.server != nullptr) evhttp_free(loop.server);
      if (loop.base != nullptr) event_base_free(loop.base);
    }
  }

  Status Listen(const TransportOptions& options) {
    static const int threads_ready = evthread_use_pthreads();
    if (threads_ready != 0) return Status::Unavailable("http: libevent threads unavailable");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(options.port);
    if (inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) {
      return Status::InvalidArgument("http: bad host " + options.host);
    }
    loops_.resize(std::max<size_t>(1, options.threads));
    for (EvLoop& loop : loops_) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
      if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
          listen(fd, 1024) != 0) {
        if (fd >= 0) close(fd);
        return Status::Unavailable("http: cannot bind " + options.host + ":" +
                                   std::to_string(options.port));
      }
      socklen_t length = sizeof address;
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);  // the port, if it was 0
      port_ = ntohs(address.sin_port);
      loop.base = event_base_new();
      loop.server = evhttp_new(loop.base);
      evhttp_set_max_body_size(loop.server, static_cast<ev_ssize_t>(options.max_body_bytes));
      evhttp_set_timeout(loop.server, static_cast<int>(options.read_timeout.count() / 1000));
      evhttp_set_allowed_methods(loop.server, 0xffff);
      evhttp_set_gencb(loop.server, &EvhttpTransport::OnRequest, this);
      if (evhttp_accept_socket(loop.server, fd) != 0) {
        close(fd);
        return Status::Unavailable("http: cannot listen on " + options.host);
      }
    }
    for (EvLoop& loop : loops_) {
      event_base* base = loop.base;
      loop.thread = std::thread([base] { event_base_dispatch(base); });
    }
    if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(loops_.size());
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (stopped_) return;
    stopped_ = true;
    for (EvLoop& loop : loops_) {
      if (loop.base != nullptr) event_base_loopbreak(loop.base);
    }
    for (EvLoop& loop : loops_) {
      if (loop.thread.joinable()) loop.thread.join();
    }
    if (hooks_.gauges != nullptr) hooks_.gauges->workers.store(0);
  }

 private:
  static void OnRequest(evhttp_request* request, void* arg) {
    auto* self = static_cast<EvhttpTransport*>(arg);
    evbuffer* input = evhttp_request_get_input_buffer(request);
    const size_t length = evbuffer_get_length(input);
    const char* body = reinterpret_cast<const char*>(evbuffer_pullup(input, -1));
    const evhttp_cmd_type command = evhttp_request_get_command(request);
    const char* uri = evhttp_request_get_uri(request);
    ServiceAnswer answer = self->hooks_.handle(MethodName(command), TargetPath(uri == nullptr ? "" : uri),
                                               std::string_view(body == nullptr ? "" : body, length));
    evkeyvalq* headers = evhttp_request_get_output_headers(request);
    const std::string type(answer.content_type);
    evhttp_add_header(headers, "Content-Type", type.c_str());
    evbuffer* out = evbuffer_new();
    if (answer.stream) {
      std::string whole;
      answer.stream([&whole](std::string_view chunk) {
        whole.append(chunk);
        return true;
      });
      answer.body = std::move(whole);
    }
    evbuffer_add(out, answer.body.data(), answer.body.size());
    evhttp_send_reply(request, answer.status, nullptr, out);
    evbuffer_free(out);
  }

  TransportHooks hooks_;
  std::vector<EvLoop> loops_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace

Result<std::unique_ptr<HttpTransport>> StartEvhttpTransport(const TransportOptions& options,
                                                            TransportHooks hooks) {
  auto transport = std::make_unique<EvhttpTransport>(std::move(hooks));
  KVINDEX_RETURN_IF_ERROR(transport->Listen(options));
  return std::unique_ptr<HttpTransport>(std::move(transport));
}

}  // namespace kvindex::http
