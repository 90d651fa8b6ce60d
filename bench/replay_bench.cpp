// Trace replay benchmarks on the full Mooncake conversation trace (12,031 requests, 288,500
// blocks, 3.0 MB; traces/mooncake/conversation_trace.jsonl). Targets (docs/benchmarks.md
// "Headline figures"): parse <= 30 ms, one LRU configuration <= 15 ms. The parse baseline in the
// same binary is nlohmann_json building a DOM per line and copying the fields out (what a first
// version would do).
// Run by scripts/bench-replay.sh, which also times the 9-configuration sweep end to end against
// a straightforward Python simulator (bench/replay_baseline.py), and the --curve against one
// --capacity run and a 20-capacity sweep.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kvindex/files/request_trace.h"
#include "kvindex/sim/hit_curve.h"
#include "kvindex/sim/simulator.h"

namespace {

const std::string kTracePath =
    std::string(KVINDEX_SOURCE_DIR) + "/traces/mooncake/conversation_trace.jsonl";

const std::string& TraceText() {
  static const std::string text = [] {
    std::ifstream in(kTracePath, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }();
  return text;
}

const kvindex::sim::PreparedTrace* Prepared() {
  static const kvindex::sim::PreparedTrace* prepared = [] {
    auto trace = kvindex::ReadTraceBuffer("conversation", TraceText());
    if (!trace.ok()) return static_cast<kvindex::sim::PreparedTrace*>(nullptr);
    auto p = kvindex::sim::PreparedTrace::Prepare(*trace);
    if (!p.ok()) return static_cast<kvindex::sim::PreparedTrace*>(nullptr);
    return new kvindex::sim::PreparedTrace(std::move(p).value());
  }();
  return prepared;
}

bool Ready(benchmark::State& state) {
  if (TraceText().empty()) {
    state.SkipWithError(("trace not found: " + kTracePath).c_str());
    return false;
  }
  return true;
}

// The kvindex reader over the in-memory trace (parse + stable sort).
void BM_TraceParse_Kvindex(benchmark::State& state) {
  if (!Ready(state)) return;
  size_t requests = 0;
  for (auto _ : state) {
    auto trace = kvindex::ReadTraceBuffer("conversation", TraceText());
    if (!trace.ok()) state.SkipWithError(trace.status().ToString().c_str());
    requests = trace.ok() ? trace->requests.size() : 0;
    benchmark::DoNotOptimize(requests);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * TraceText().size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * requests));
}
BENCHMARK(BM_TraceParse_Kvindex)->Unit(benchmark::kMillisecond);

// The same from the file (open, 1 MiB reads, parse, sort).
void BM_TraceParse_KvindexFile(benchmark::State& state) {
  if (!Ready(state)) return;
  for (auto _ : state) {
    auto trace = kvindex::ReadTrace(kTracePath);
    if (!trace.ok()) state.SkipWithError(trace.status().ToString().c_str());
    benchmark::DoNotOptimize(trace);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * TraceText().size()));
}
BENCHMARK(BM_TraceParse_KvindexFile)->Unit(benchmark::kMillisecond);

// Baseline: nlohmann_json parses each line into a DOM; fields copied into TraceRequest.
void BM_TraceParse_NlohmannBaseline(benchmark::State& state) {
  if (!Ready(state)) return;
  const std::string& text = TraceText();
  for (auto _ : state) {
    std::vector<kvindex::TraceRequest> requests;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      if (nl > pos) {
        auto j = nlohmann::json::parse(text.begin() + static_cast<long>(pos),
                                       text.begin() + static_cast<long>(nl), nullptr, false);
        kvindex::TraceRequest r;
        r.timestamp_ms = j["timestamp"].get<double>();
        r.input_length = j["input_length"].get<uint64_t>();
        r.output_length = j["output_length"].get<uint64_t>();
        r.hash_ids = j["hash_ids"].get<std::vector<uint64_t>>();
        requests.push_back(std::move(r));
      }
      pos = nl + 1;
    }
    benchmark::DoNotOptimize(requests);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_TraceParse_NlohmannBaseline)->Unit(benchmark::kMillisecond);

// Hash ids to dense block indices, once per trace.
void BM_Replay_Prepare(benchmark::State& state) {
  if (!Ready(state)) return;
  auto trace = kvindex::ReadTraceBuffer("conversation", TraceText());
  for (auto _ : state) {
    auto prepared = kvindex::sim::PreparedTrace::Prepare(*trace);
    benchmark::DoNotOptimize(prepared);
  }
}
BENCHMARK(BM_Replay_Prepare)->Unit(benchmark::kMillisecond);

// One configuration: policy × capacity (0 = inf) × router × instances.
void BM_Replay_Config(benchmark::State& state) {
  if (!Ready(state) || Prepared() == nullptr) return;
  kvindex::sim::SimConfig config;
  config.policy = static_cast<kvindex::sim::PolicyKind>(state.range(0));
  config.capacity = state.range(1) == 0 ? kvindex::sim::kInfiniteCapacity
                                        : static_cast<uint64_t>(state.range(1));
  config.router = static_cast<kvindex::sim::RouterKind>(state.range(2));
  config.instances = static_cast<uint32_t>(state.range(3));
  for (auto _ : state) {
    auto report = kvindex::sim::Simulate(*Prepared(), config);
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * Prepared()->blocks().size()));
  state.SetLabel(std::string(kvindex::sim::PolicyName(config.policy)) + "/" +
                 (state.range(1) == 0 ? std::string("inf") : std::to_string(state.range(1))) +
                 "/" + std::string(kvindex::sim::RouterName(config.router)) + "/" +
                 std::to_string(config.instances));
}
BENCHMARK(BM_Replay_Config)
    ->ArgNames({"policy", "capacity", "router", "instances"})
    // lru, lfu, fifo, prefix-lru at 10,000 blocks; lru at 1,000 and inf; one instance.
    ->Args({0, 10000, 0, 1})
    ->Args({0, 1000, 0, 1})
    ->Args({0, 0, 0, 1})
    ->Args({1, 10000, 0, 1})
    ->Args({2, 10000, 0, 1})
    ->Args({3, 10000, 0, 1})
    // Routers over 8 instances of 2,000 blocks (lru).
    ->Args({0, 2000, 0, 8})
    ->Args({0, 2000, 1, 8})
    ->Args({0, 2000, 2, 8})
    ->Args({0, 2000, 3, 8})
    ->Unit(benchmark::kMillisecond);

// The exact LRU curve (every capacity from 1 to the working set) in one pass, against which
// BM_Replay_Config's single lru configurations compare: instances (round-robin).
void BM_Replay_Curve(benchmark::State& state) {
  if (!Ready(state) || Prepared() == nullptr) return;
  kvindex::sim::SimConfig config;
  config.instances = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    auto curve = kvindex::sim::LruHitCurve(*Prepared(), config);
    benchmark::DoNotOptimize(curve);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * Prepared()->blocks().size()));
}
BENCHMARK(BM_Replay_Curve)->ArgNames({"instances"})->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
