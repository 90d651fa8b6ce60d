// http_load: an open-loop HTTP load generator for scripts/bench-http.sh (wrk and ab are closed
// loop: a slow answer delays the next request and hides itself — coordinated omission).
//
//   http_load --host H --port P --path /query --bodies FILE --rate R --duration S
//             [--connections C] [--warmup S] [--out FILE.json] [--samples FILE.tsv]
//
// Request k is due at start + k/R. One thread drives C keep-alive connections through epoll: a
// due request goes out on any idle connection at once, or waits (FIFO) for the first connection
// to become idle, as a client's connection pool would. Latency is measured from the request's
// *due* time to the end of its answer, so time spent waiting for a connection or behind a slow
// answer counts. Bodies are the lines of FILE (a JSON body per line, e.g. the `query` objects of
// publish-fake --emit-queries), used in turn; each request is one preformatted buffer written with
// one send(2). Prints and writes count, errors, the achieved rate, how many requests found every
// connection busy (`queued`) or went out more than 100 us after their due time (`late_sends`), and
// latency percentiles (us). --samples writes one line per measured request: its due time (us since
// the first request was due) and its latency (us), to see when slow answers happened.
//
// Machine stalls. One probe thread per CPU, pinned to it, sleeps 1 ms at a time and records every
// wake-up more than 2 ms late: an interval in which that CPU did not run a thread that wanted it,
// whoever held it (on the 2-vCPU test machine, mostly a kernel thread: see
// docs/benchmarks-machine.md). A stall on any CPU counts, since a server thread may have been on
// it. The results give their count, total and longest over the measured window, and the latency
// percentiles again over the requests whose [due, answered] interval overlaps no stall
// (`p99_us_clear`), so that a server's tail can be told from the machine's. Every request counts
// in the plain percentiles; the clear ones are a second view, never a replacement.
//
// One thread and raw sockets, so that the generator's own CPU (it shares the machine with the
// server under test) stays small: the previous design, one cpp-httplib client thread per
// connection sleeping until each request's time, used ~0.45 core at 5,000 requests/s on the
// 2-vCPU machine, about as much as the server's HTTP threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 13333;
  std::string path = "/query";
  std::string bodies;
  double rate = 1000;
  double duration = 10;
  double warmup = 1;
  int connections = 4;
  std::string out;
  std::string samples;
};

[[noreturn]] void Usage(const char* message) {
  std::fprintf(stderr, "http_load: %s\n", message);
  std::exit(2);
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "http_load: %s\n", message.c_str());
  std::exit(1);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--host") o.host = value;
    else if (flag == "--port") o.port = std::atoi(value.c_str());
    else if (flag == "--path") o.path = value;
    else if (flag == "--bodies") o.bodies = value;
    else if (flag == "--rate") o.rate = std::atof(value.c_str());
    else if (flag == "--duration") o.duration = std::atof(value.c_str());
    else if (flag == "--warmup") o.warmup = std::atof(value.c_str());
    else if (flag == "--connections") o.connections = std::atoi(value.c_str());
    else if (flag == "--out") o.out = value;
    else if (flag == "--samples") o.samples = value;
    else Usage(("unknown flag " + flag).c_str());
  }
  if (o.bodies.empty() || o.rate <= 0 || o.duration <= 0 || o.connections <= 0 ||
      o.connections > 10000 || o.port <= 0 || o.port > 65535 || o.warmup < 0) {
    Usage("need --bodies FILE, --rate > 0, --duration > 0, --connections 1..10000, --port");
  }
  return o;
}

double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t at = std::min(sorted.size() - 1,
                             static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size()))) - 1);
  return static_cast<double>(sorted[at]) / 1000.0;
}

// One keep-alive connection and the request in flight on it.
struct Connection {
  int fd = -1;
  bool busy = false;
  uint64_t request = 0;
  Clock::time_point due;
  Clock::time_point sent;
  std::string in;  // the answer received so far
};

int Connect(const Options& o) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &address.sin_addr) != 1) {
    Usage(("--host must be an IPv4 address: " + o.host).c_str());
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    Fail("connect " + o.host + ":" + std::to_string(o.port) + ": " + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Where a complete answer in `in` ends (0 while incomplete) and its status code. Answers carry
// Content-Length (kvindex never sends chunked answers); a missing one means "no body".
size_t AnswerEnd(const std::string& in, int& status, bool& close) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
  size_t length = 0;
  close = false;
  size_t line = in.find("\r\n");
  while (line < head_end) {
    const size_t next = in.find("\r\n", line + 2);
    const std::string_view header(in.data() + line + 2, next - line - 2);
    const size_t colon = header.find(':');
    if (colon != std::string_view::npos) {
      std::string name(header.substr(0, colon));
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      std::string_view value = header.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (name == "content-length") length = std::strtoull(std::string(value).c_str(), nullptr, 10);
      if (name == "connection" && (value == "close" || value == "Close")) close = true;
    }
    line = next;
  }
  const size_t end = head_end + 4 + length;
  return in.size() >= end ? end : 0;
}

// An interval in which a probe thread was kept off its CPU: [begin, end] in steady-clock ns.
struct Stall {
  int64_t begin;
  int64_t end;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Sleeps 1 ms at a time on CPU `cpu` until `stop`, recording every wake-up more than 2 ms late.
void ProbeStalls(int cpu, const std::atomic<bool>& stop, std::vector<Stall>& stalls) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);  // best effort: unpinned otherwise
  constexpr int64_t kPeriodNs = 1'000'000;
  constexpr int64_t kLateNs = 2'000'000;
  int64_t intended = NowNs() + kPeriodNs;
  while (!stop.load(std::memory_order_relaxed)) {
    const timespec at{static_cast<time_t>(intended / 1'000'000'000), static_cast<long>(intended % 1'000'000'000)};
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr);
    const int64_t woke = NowNs();
    if (woke - intended > kLateNs) stalls.push_back({intended, woke});
    intended = std::max(intended, woke) + kPeriodNs;
  }
}

// The latencies (ns) of the requests whose interval [due, due + latency] overlaps no stall.
// `requests` holds (due ns, latency ns) in due order, `stalls` is sorted by start.
std::vector<int64_t> ClearLatencies(const std::vector<std::pair<int64_t, int64_t>>& requests,
                                    const std::vector<Stall>& stalls) {
  std::vector<int64_t> clear;
  clear.reserve(requests.size());
  size_t first = 0;  // stalls that began 10 s before a request cannot overlap it (none lasts 10 s)
  for (const auto& [due, ns] : requests) {
    while (first < stalls.size() && stalls[first].begin < due - 10'000'000'000) ++first;
    bool overlaps = false;
    for (size_t i = first; i < stalls.size() && stalls[i].begin <= due + ns; ++i) {
      if (stalls[i].end >= due) {
        overlaps = true;
        break;
      }
    }
    if (!overlaps) clear.push_back(ns);
  }
  std::sort(clear.begin(), clear.end());
  return clear;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::vector<std::string> requests;  // one preformatted request per body line
  {
    std::ifstream in(o.bodies);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      requests.push_back("POST " + o.path + " HTTP/1.1\r\nHost: " + o.host + ":" + std::to_string(o.port) +
                         "\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(line.size()) + "\r\n\r\n" + line);
    }
  }
  if (requests.empty()) Usage("no bodies in --bodies FILE");
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // wake at the due time, not up to 50 us after it (the probe
                                   // threads inherit it)
  std::atomic<bool> probe_stop{false};
  const int cpus = std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  std::vector<std::vector<Stall>> cpu_stalls(static_cast<size_t>(cpus));
  std::vector<std::thread> probes;
  for (int c = 0; c < cpus; ++c) {
    cpu_stalls[static_cast<size_t>(c)].reserve(100000);
    probes.emplace_back([&, c] { ProbeStalls(c, probe_stop, cpu_stalls[static_cast<size_t>(c)]); });
  }

  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) Fail(std::string("epoll_create1: ") + std::strerror(errno));
  std::vector<Connection> connections(static_cast<size_t>(o.connections));
  auto open = [&](size_t c) {
    connections[c].fd = Connect(o);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = c;
    if (::epoll_ctl(epoll, EPOLL_CTL_ADD, connections[c].fd, &event) != 0) {
      Fail(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  };
  auto reopen = [&](size_t c) {
    ::close(connections[c].fd);
    connections[c].in.clear();
    connections[c].busy = false;
    open(c);
  };
  for (size_t c = 0; c < connections.size(); ++c) open(c);

  const double interval_ns = 1e9 / o.rate;
  const auto total = static_cast<uint64_t>((o.warmup + o.duration) * o.rate);
  const auto warm = static_cast<uint64_t>(o.warmup * o.rate);
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(200);
  auto due_of = [&](uint64_t k) {
    return start + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(k) * interval_ns));
  };
  std::vector<int64_t> latencies;
  latencies.reserve(total);
  std::vector<std::pair<uint64_t, int64_t>> samples;  // (request, latency ns), every measured one
  samples.reserve(total);
  std::vector<size_t> idle;
  for (size_t c = connections.size(); c-- > 0;) idle.push_back(c);
  std::deque<uint64_t> waiting;  // due requests that found every connection busy
  uint64_t next = 0;             // the next request not yet due
  uint64_t done = 0;
  uint64_t errors = 0;
  uint64_t queued = 0;
  uint64_t late_sends = 0;
  const auto answer_timeout = std::chrono::seconds(10);

  auto send = [&](uint64_t k, Clock::time_point now) {
    const size_t c = idle.back();
    idle.pop_back();
    Connection& conn = connections[c];
    const std::string& request = requests[k % requests.size()];
    conn.busy = true;
    conn.request = k;
    conn.due = due_of(k);
    conn.sent = now;
    if (k >= warm && now - conn.due > std::chrono::microseconds(100)) ++late_sends;
    size_t written = 0;
    while (written < request.size()) {
      const ssize_t n = ::send(conn.fd, request.data() + written, request.size() - written, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the server closed the connection: count the request, reconnect
        ++errors;
        ++done;
        reopen(c);
        idle.push_back(c);
        return;
      }
      written += static_cast<size_t>(n);
    }
  };

  std::vector<epoll_event> events(connections.size());
  char buffer[65536];
  while (done < total) {
    Clock::time_point now = Clock::now();
    for (; next < total && due_of(next) <= now; ++next) {
      if (!idle.empty() && waiting.empty()) {
        send(next, now);
      } else {
        if (next >= warm) ++queued;
        waiting.push_back(next);
      }
    }
    while (!waiting.empty() && !idle.empty()) {
      const uint64_t k = waiting.front();
      waiting.pop_front();
      send(k, now);
    }
    for (size_t c = 0; c < connections.size(); ++c) {
      if (connections[c].busy && now - connections[c].sent > answer_timeout) {
        ++errors;
        ++done;
        reopen(c);
        idle.push_back(c);
      }
    }
    // Sleep until the next request is due (or at most 100 ms) unless an answer arrives first.
    std::chrono::nanoseconds wait = std::chrono::milliseconds(100);
    if (next < total) wait = std::min(wait, std::chrono::duration_cast<std::chrono::nanoseconds>(due_of(next) - now));
    if (wait < std::chrono::nanoseconds(0)) wait = std::chrono::nanoseconds(0);
    const timespec timeout{static_cast<time_t>(wait.count() / 1'000'000'000), static_cast<long>(wait.count() % 1'000'000'000)};
    const int ready = ::epoll_pwait2(epoll, events.data(), static_cast<int>(events.size()), &timeout, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      Fail(std::string("epoll_pwait2: ") + std::strerror(errno));
    }
    for (int e = 0; e < ready; ++e) {
      const size_t c = events[static_cast<size_t>(e)].data.u64;
      Connection& conn = connections[c];
      bool closed = false;
      for (;;) {
        const ssize_t n = ::recv(conn.fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n > 0) {
          conn.in.append(buffer, static_cast<size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
      int status = 0;
      bool close_after = false;
      const size_t end = conn.busy ? AnswerEnd(conn.in, status, close_after) : 0;
      if (end != 0) {
        const Clock::time_point finished = Clock::now();
        ++done;
        if (status != 200) {
          ++errors;
        } else if (conn.request >= warm) {
          latencies.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(finished - conn.due).count());
          samples.emplace_back(conn.request, latencies.back());
        }
        conn.busy = false;
        conn.in.erase(0, end);
        if (close_after || closed) {
          reopen(c);
        }
        idle.push_back(c);
      } else if (closed) {
        // The server closed it: in the middle of an answer (an error), or while it sat idle (its
        // keep-alive timeout), when it is on the idle list already.
        const bool was_busy = conn.busy;
        if (was_busy) {
          ++errors;
          ++done;
        }
        reopen(c);
        if (was_busy) idle.push_back(c);
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  probe_stop.store(true);
  for (std::thread& t : probes) t.join();
  std::vector<Stall> stalls;  // every CPU's, by start
  for (const auto& v : cpu_stalls) stalls.insert(stalls.end(), v.begin(), v.end());
  std::sort(stalls.begin(), stalls.end(), [](const Stall& a, const Stall& b) { return a.begin < b.begin; });
  std::sort(latencies.begin(), latencies.end());
  std::sort(samples.begin(), samples.end());
  // The stalls inside the measured window, and the requests that overlap none of them.
  const int64_t window_begin = std::chrono::duration_cast<std::chrono::nanoseconds>(due_of(warm).time_since_epoch()).count();
  uint64_t stall_count = 0;
  int64_t stalled_ns = 0;
  int64_t longest_stall_ns = 0;
  for (const Stall& s : stalls) {
    if (s.end < window_begin) continue;
    ++stall_count;
    stalled_ns += s.end - s.begin;
    longest_stall_ns = std::max(longest_stall_ns, s.end - s.begin);
  }
  std::vector<std::pair<int64_t, int64_t>> timed;  // (due ns, latency ns) in due order
  timed.reserve(samples.size());
  for (const auto& [k, ns] : samples) {
    timed.emplace_back(std::chrono::duration_cast<std::chrono::nanoseconds>(due_of(k).time_since_epoch()).count(), ns);
  }
  const std::vector<int64_t> clear = ClearLatencies(timed, stalls);
  char stall_json[512];
  std::snprintf(stall_json, sizeof(stall_json),
                ", \"machine_stalls\": %llu, \"machine_stalled_ms\": %.1f, \"machine_stall_max_us\": %.1f, "
                "\"clear\": %zu, \"p50_us_clear\": %.1f, \"p99_us_clear\": %.1f, \"p999_us_clear\": %.1f}",
                static_cast<unsigned long long>(stall_count), static_cast<double>(stalled_ns) / 1e6,
                static_cast<double>(longest_stall_ns) / 1000.0, clear.size(), Percentile(clear, 0.50),
                Percentile(clear, 0.99), Percentile(clear, 0.999));
  char json[1536];
  std::snprintf(json, sizeof(json),
                "{\"path\": \"%s\", \"rate\": %.0f, \"connections\": %d, \"duration_s\": %.1f, \"warmup_s\": %.1f, "
                "\"measured\": %zu, \"errors\": %llu, \"queued\": %llu, \"late_sends\": %llu, "
                "\"achieved_rate\": %.1f, \"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, "
                "\"p999_us\": %.1f, \"max_us\": %.1f}",
                o.path.c_str(), o.rate, o.connections, o.duration, o.warmup, latencies.size(),
                static_cast<unsigned long long>(errors), static_cast<unsigned long long>(queued),
                static_cast<unsigned long long>(late_sends), static_cast<double>(total) / elapsed,
                Percentile(latencies, 0.50), Percentile(latencies, 0.90), Percentile(latencies, 0.99),
                Percentile(latencies, 0.999),
                latencies.empty() ? 0.0 : static_cast<double>(latencies.back()) / 1000.0);
  std::string line(json);
  line.pop_back();  // the closing brace: the stall figures follow
  line += stall_json;
  std::printf("%s\n", line.c_str());
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << line << "\n";
  }
  if (!o.samples.empty()) {
    std::ofstream out(o.samples);
    for (const auto& [k, ns] : samples) {
      out << static_cast<int64_t>(static_cast<double>(k) * interval_ns / 1000.0) << '\t' << ns / 1000 << '\n';
    }
  }
  return errors == 0 ? 0 : 1;
}
