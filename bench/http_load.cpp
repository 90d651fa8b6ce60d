// http_load: an open-loop HTTP load generator for scripts/bench-http.sh (wrk and ab are closed
// loop: a slow answer delays the next request and hides itself — coordinated omission).
//
//   http_load --host H --port P --path /query --bodies FILE --rate R --duration S
//             [--connections C] [--warmup S] [--out FILE.json]
//
// Requests are scheduled at fixed times (request k at start + k/R), spread round robin over C
// keep-alive connections, each driven by its own thread. A thread sends its next request at its
// scheduled time, or at once when it is late; latency is measured from the *scheduled* time to
// the end of the answer, so time spent queued behind a slow answer counts. Bodies are the lines of
// FILE (a JSON body per line, e.g. the `query` objects of publish-fake --emit-queries), used in
// turn. Prints and writes count, errors, the achieved rate and latency percentiles (µs).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

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
};

[[noreturn]] void Usage(const char* message) {
  std::fprintf(stderr, "http_load: %s\n", message);
  std::exit(2);
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
    else Usage(("unknown flag " + flag).c_str());
  }
  if (o.bodies.empty() || o.rate <= 0 || o.duration <= 0 || o.connections <= 0 || o.port <= 0) {
    Usage("need --bodies FILE, --rate > 0, --duration > 0, --connections > 0, --port");
  }
  return o;
}

double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t at = std::min(sorted.size() - 1,
                             static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size()))) - 1);
  return static_cast<double>(sorted[at]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::vector<std::string> bodies;
  {
    std::ifstream in(o.bodies);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) bodies.push_back(line);
    }
  }
  if (bodies.empty()) Usage("no bodies in --bodies FILE");

  const double interval_ns = 1e9 / o.rate;
  const auto total = static_cast<uint64_t>((o.warmup + o.duration) * o.rate);
  const auto warm = static_cast<uint64_t>(o.warmup * o.rate);
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(200);
  std::vector<std::vector<int64_t>> latencies(static_cast<size_t>(o.connections));
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> late_sends{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < o.connections; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client(o.host, o.port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_connection_timeout(5, 0);
      client.set_read_timeout(10, 0);
      std::vector<int64_t>& mine = latencies[static_cast<size_t>(c)];
      mine.reserve(total / static_cast<uint64_t>(o.connections) + 1);
      for (uint64_t k = static_cast<uint64_t>(c); k < total; k += static_cast<uint64_t>(o.connections)) {
        const Clock::time_point scheduled =
            start + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(k) * interval_ns));
        if (Clock::now() < scheduled) {
          std::this_thread::sleep_until(scheduled);
        } else if (k >= warm) {
          late_sends.fetch_add(1, std::memory_order_relaxed);
        }
        const std::string& body = bodies[k % bodies.size()];
        auto res = client.Post(o.path.c_str(), body, "application/json");
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - scheduled).count();
        if (!res || res->status != 200) {
          errors.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (k >= warm) mine.push_back(ns);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<int64_t> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  char json[1024];
  std::snprintf(json, sizeof(json),
                "{\"path\": \"%s\", \"rate\": %.0f, \"connections\": %d, \"duration_s\": %.1f, "
                "\"measured\": %zu, \"errors\": %llu, \"late_sends\": %llu, "
                "\"achieved_rate\": %.1f, \"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, "
                "\"p999_us\": %.1f, \"max_us\": %.1f}",
                o.path.c_str(), o.rate, o.connections, o.duration, all.size(),
                static_cast<unsigned long long>(errors.load()),
                static_cast<unsigned long long>(late_sends.load()),
                static_cast<double>(total) / elapsed, Percentile(all, 0.50), Percentile(all, 0.90),
                Percentile(all, 0.99), Percentile(all, 0.999),
                all.empty() ? 0.0 : static_cast<double>(all.back()) / 1000.0);
  std::printf("%s\n", json);
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << json << "\n";
  }
  return errors.load() == 0 ? 0 : 1;
}
