// http_floor: the machine's own latency floor for scripts/bench-http.sh. A minimal HTTP/1.1
// keep-alive server that answers every request with the same small JSON body, doing no work, so
// that bench/http_load against it measures only what any server pays on this machine: the load
// generator, loopback TCP, a thread wake-up per request and the scheduling of the (virtual) CPUs.
// Its p99 beside kvindex's, at the same rate, connections and ingest load, tells how much of
// kvindex's tail is kvindex.
//
//   http_floor --port P [--host H]
//
// Like cpp-httplib, it serves each connection on a thread of its own blocked in recv(2), so one
// request costs the same wake-ups as with the real server. Requests must carry their body with
// Content-Length (no chunked bodies); the answer is `200` with `{"floor":true}`. Prints
// "listening HOST:PORT" once bound, and serves until SIGTERM or SIGINT.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

namespace {

[[noreturn]] void Usage(const char* message) {
  std::fprintf(stderr, "http_floor: %s\nusage: http_floor --port P [--host H]\n", message);
  std::exit(2);
}

// The length of the first complete request in `buffer` (headers and Content-Length body), 0 while
// incomplete, -1 when its header section is not HTTP.
long RequestLength(std::string_view buffer) {
  const size_t end = buffer.find("\r\n\r\n");
  if (end == std::string_view::npos) return buffer.size() > 65536 ? -1 : 0;
  size_t body = 0;
  size_t line = buffer.find("\r\n") + 2;
  while (line < end) {
    const size_t next = buffer.find("\r\n", line);
    const std::string_view header = buffer.substr(line, next - line);
    const size_t colon = header.find(':');
    if (colon == std::string_view::npos) return -1;
    std::string name(header.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "content-length") body = std::strtoul(std::string(header.substr(colon + 1)).c_str(), nullptr, 10);
    line = next + 2;
  }
  if (body > (size_t{64} << 20)) return -1;  // no sane request body is this large
  const size_t total = end + 4 + body;
  return buffer.size() >= total ? static_cast<long>(total) : 0;
}

void Serve(int fd) {
  static constexpr std::string_view kAnswer =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"floor\":true}";
  std::string buffer;
  char chunk[65536];
  for (;;) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    long length;
    while ((length = RequestLength(buffer)) > 0) {
      buffer.erase(0, static_cast<size_t>(length));
      if (send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(kAnswer.size())) {
        close(fd);
        return;
      }
    }
    if (length < 0) break;
  }
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--host") host = value;
    else if (flag == "--port") port = std::atoi(value.c_str());
    else Usage(("unknown flag " + flag).c_str());
  }
  if (port <= 0 || port > 65535) Usage("--port must be 1..65535");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) Usage(("--host must be an IPv4 address: " + host).c_str());
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 128) != 0) {
    std::fprintf(stderr, "http_floor: cannot listen on %s:%d: %s\n", host.c_str(), port, std::strerror(errno));
    return 1;
  }
  std::printf("listening %s:%d\n", host.c_str(), port);
  std::fflush(stdout);
  // SIGTERM/SIGINT end the process with status 0; the connection threads need no cleanup.
  std::signal(SIGTERM, [](int) { _exit(0); });
  std::signal(SIGINT, [](int) { _exit(0); });
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::fprintf(stderr, "http_floor: accept: %s\n", std::strerror(errno));
      return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread(Serve, fd).detach();
  }
}
