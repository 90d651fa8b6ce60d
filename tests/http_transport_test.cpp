// The HTTP transport over loopback with a handler of the test's own (it echoes what it was asked),
// each case with both connection models (a shared pool of I/O threads, a thread per connection):
// keep-alive, pipelined requests answered in order byte for byte, 413 over the body limit, 400 for
// bytes that are not HTTP, the connection limit, half-sent and dribbled requests cut off by the
// read timeout while other clients are answered, and streamed answers (chunked, never held whole,
// stopped when the client goes away). The expected bytes are written out by hand.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/http/transport.h"

namespace kvindex::http {
namespace {

// A blocking loopback client socket (15 s receive timeout: a hang fails instead of blocking).
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    timeval timeout{15, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& bytes) {
    REQUIRE(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  // Reads exactly `n` bytes (fewer if the server closes first).
  std::string Read(size_t n) {
    std::string out;
    while (out.size() < n) {
      char buffer[65536];
      const ssize_t got = recv(fd_, buffer, std::min(sizeof buffer, n - out.size()), 0);
      if (got <= 0) break;
      out.append(buffer, static_cast<size_t>(got));
    }
    return out;
  }
  // Reads until the server closes the connection (or resets it).
  std::string ReadToEnd() { return Read(size_t{1} << 30); }
  // Whether anything (bytes or the end) arrives within `ms`.
  bool Readable(int ms) {
    pollfd waiting{fd_, POLLIN, 0};
    return poll(&waiting, 1, ms) > 0;
  }

 private:
  int fd_ = -1;
};

std::string Response(int status, const std::string& reason, const std::string& body,
                     bool close = false) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         (close ? "Connection: close\r\n" : "") + "\r\n" + body;
}

// Answers "METHOD PATH BODY" as text/plain; /stream answers `chunks` streamed.
struct Echo {
  std::vector<std::string> chunks;
  std::atomic<size_t> stream_writes{0};
  bool endless = false;

  ServiceAnswer operator()(std::string_view method, std::string_view path, std::string_view body) {
    ServiceAnswer answer;
    answer.content_type = "text/plain";
    if (path == "/stream") {
      answer.stream = [this](const std::function<bool(std::string_view)>& write) {
        if (endless) {
          const std::string mib(1 << 20, 'x');
          while (write(mib)) ++stream_writes;
          return false;
        }
        for (const std::string& chunk : chunks) {
          if (!write(chunk)) return false;
        }
        return true;
      };
      return answer;
    }
    answer.body = std::string(method) + " " + std::string(path) + " " + std::string(body);
    return answer;
  }
};

constexpr ConnectionModel kModels[] = {ConnectionModel::kPool, ConnectionModel::kDedicated};

const char* Name(ConnectionModel model) {
  return model == ConnectionModel::kPool ? "pool" : "dedicated";
}

TransportOptions With(ConnectionModel model) {
  TransportOptions options;
  options.model = model;
  return options;
}

struct Server {
  Echo echo;
  ConnectionGauges gauges;
  std::unique_ptr<HttpTransport> transport;

  explicit Server(TransportOptions options = {}) {
    options.max_body_bytes = 1000;
    TransportHooks hooks;
    hooks.handle = [this](std::string_view m, std::string_view p, std::string_view b,
                          ServiceAnswer& answer) { answer = echo(m, p, b); };
    hooks.error_body = [](int status) { return "{\"error\": \"" + std::to_string(status) + "\"}"; };
    hooks.gauges = &gauges;
    auto started = StartHttpTransport(options, std::move(hooks));
    REQUIRE(started.ok());
    transport = std::move(*started);
  }
  uint16_t port() const { return transport->port(); }
};

TEST_CASE("keep-alive: one connection answers request after request") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    Client client(server.port());
    for (int i = 0; i < 3; ++i) {
      const std::string body = "n=" + std::to_string(i);
      client.Send("POST /q?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
      const std::string want = Response(200, "OK", "POST /q " + body);
      CHECK(client.Read(want.size()) == want);
    }
    CHECK(server.gauges.connections.load() == 1);
    // The pool's two I/O threads, or this connection's own.
    CHECK(server.gauges.workers.load() == (model == ConnectionModel::kPool ? 2 : 1));
  }
}

TEST_CASE("pipelining: requests sent at once are all answered, in order, byte for byte") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    Client client(server.port());
    client.Send(
        "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
        "POST /b%2Fc HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        "HEAD /d HTTP/1.1\r\nHost: h\r\n\r\n"
        "POST /e HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        "GET /f HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\n";
    const std::string want =
        Response(200, "OK", "GET /a ") + Response(200, "OK", "POST /b/c hello") + head +
        Response(200, "OK", "POST /e abc") + Response(200, "OK", "GET /f ", true);
    CHECK(client.ReadToEnd() == want);
  }
}

TEST_CASE("a body over the limit is 413 with the error body, and the connection closes") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    Client client(server.port());
    client.Send("POST /q HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\n");
    const std::string body = "{\"error\": \"413\"}";
    const std::string want =
        "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    CHECK(client.ReadToEnd() == want);
    // At the limit: answered.
    Client fits(server.port());
    fits.Send("POST /q HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n" +
              std::string(1000, 'b'));
    const std::string ok = Response(200, "OK", "POST /q " + std::string(1000, 'b'));
    CHECK(fits.Read(ok.size()) == ok);
  }
}

TEST_CASE("bytes that are not HTTP are 400 with the error body") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    Client client(server.port());
    client.Send("hello there\r\n\r\n");
    const std::string response = client.ReadToEnd();
    CHECK(response.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(response.find("{\"error\": \"400\"}") != std::string::npos);
  }
}

TEST_CASE("max_connections: a further connection waits until one closes") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    TransportOptions options = With(model);
    options.max_connections = 3;
    Server server(options);
    const std::string ask = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    const std::string want = Response(200, "OK", "GET /x ");
    std::vector<std::unique_ptr<Client>> open;
    for (int i = 0; i < 3; ++i) {
      open.push_back(std::make_unique<Client>(server.port()));
      open.back()->Send(ask);
      CHECK(open.back()->Read(want.size()) == want);
    }
    Client fourth(server.port());  // the kernel completes the handshake; the server does not accept
    fourth.Send(ask);
    CHECK(!fourth.Readable(300));
    CHECK(server.gauges.connections.load() == 3);
    open.front()->Close();
    CHECK(fourth.Read(want.size()) == want);
    for (size_t i = 1; i < open.size(); ++i) {
      open[i]->Send(ask);
      CHECK(open[i]->Read(want.size()) == want);
    }
  }
}

TEST_CASE("slowloris: 200 half-sent requests are cut off while a normal client is answered") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    TransportOptions options = With(model);
    options.read_timeout = std::chrono::milliseconds(500);
    options.keep_alive_timeout = std::chrono::milliseconds(500);
    Server server(options);
    std::vector<std::unique_ptr<Client>> stalled;
    for (int i = 0; i < 200; ++i) {
      stalled.push_back(std::make_unique<Client>(server.port()));
      stalled.back()->Send("POST /slow HTTP/1.1\r\nHost: h\r\nContent-Le");
    }
    Client normal(server.port());
    for (int i = 0; i < 20; ++i) {
      normal.Send("GET /fast HTTP/1.1\r\nHost: h\r\n\r\n");
      const std::string want = Response(200, "OK", "GET /fast ");
      REQUIRE(normal.Read(want.size()) == want);
    }
    // Each stalled connection is closed by the server without an answer.
    size_t closed = 0;
    for (auto& client : stalled) closed += client->ReadToEnd().empty() ? 1 : 0;
    CHECK(closed == 200);
  }
}

TEST_CASE("a streamed answer is sent chunked, and the connection stays usable") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    server.echo.chunks = {"ab", "", "cde"};
    Client client(server.port());
    client.Send("GET /stream HTTP/1.1\r\nHost: h\r\n\r\nGET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    const std::string want =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n" +
        Response(200, "OK", "GET /after ");
    CHECK(client.Read(want.size()) == want);
  }
}

TEST_CASE("a streamed answer stops when the client goes away (never held whole)") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    Server server(With(model));
    server.echo.endless = true;
    {
      Client client(server.port());
      client.Send("GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
      CHECK(client.Read(3 << 20).size() == size_t{3} << 20);
    }  // closed with the stream still going: the next write fails
    // The server is still serving (on a thread the stream no longer holds).
    for (int i = 0; i < 4; ++i) {
      Client next(server.port());
      next.Send("GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
      CHECK(next.ReadToEnd() == Response(200, "OK", "GET /x ", true));
    }
    // A GiB would mean the client's close went unseen.
    CHECK(server.echo.stream_writes.load() < 1000);
  }
}

TEST_CASE("a request dribbled byte by byte is cut off by the read timeout from its first byte") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    TransportOptions options = With(model);
    options.read_timeout = std::chrono::milliseconds(300);
    Server server(options);
    Client client(server.port());
    // 100 bytes, one every 20 ms: each arrives well within the timeout, the whole takes 2 s.
    const std::string request =
        "POST /dribble HTTP/1.1\r\nHost: h\r\nContent-Length: 40\r\n\r\n" + std::string(40, 'd');
    size_t sent = 0;
    while (sent < request.size() && !client.Readable(20)) client.Send(request.substr(sent++, 1));
    CHECK(sent < request.size());
    CHECK(client.ReadToEnd().empty());  // closed without an answer
  }
}

TEST_CASE("dedicated: a finished connection's thread serves the next connection") {
  Server server(With(ConnectionModel::kDedicated));
  const std::string want = Response(200, "OK", "GET /x ", true);
  for (int i = 0; i < 3; ++i) {
    // The previous connection's thread is parked once the server counts no open connection.
    for (int wait = 0; wait < 500 && server.gauges.connections.load() != 0; ++wait) {
      usleep(10 * 1000);
    }
    Client client(server.port());
    client.Send("GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    CHECK(client.ReadToEnd() == want);
  }
  CHECK(server.gauges.workers.load() == 1);
}

TEST_CASE("stopping ends connections waiting in recv and joins their threads") {
  for (const ConnectionModel model : kModels) {
    CAPTURE(Name(model));
    TransportOptions options = With(model);
    options.keep_alive_timeout = std::chrono::hours(1);  // a Stop() that waits for it hangs
    Server server(options);
    std::vector<std::unique_ptr<Client>> idle;
    for (int i = 0; i < 8; ++i) {
      idle.push_back(std::make_unique<Client>(server.port()));
      idle.back()->Send("GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
      const std::string want = Response(200, "OK", "GET /x ");
      REQUIRE(idle.back()->Read(want.size()) == want);
    }
    server.transport->Stop();
    for (auto& client : idle) CHECK(client->ReadToEnd().empty());
    CHECK(server.gauges.workers.load() == 0);
  }
}

}  // namespace
}  // namespace kvindex::http
