// Snapshot benches (docs/snapshot-format.md): an index of 64 instances whose prompts share a 25%
// prefix, at about N presences (the argument: 1 M and 10 M), written to memory and loaded back.
//
//  BM_Snapshot_Write  CopyState() + WriteSnapshot() into memory while a writer thread goes on
//                     removing and storing prompts back to back (so it changes records and engine
//                     maps the copy has not taken yet); items = presences. Counters: MB,
//                     bytes_per_presence (of the presences in the copy); the writer's pauses, the
//                     longest of all iterations, in ms: point_ms (BeginCopy()'s hold of the shared
//                     lock; the subscriber's writer thread runs it), writer_copy_ms (the longest
//                     piece the writer copied or waited for, from IndexState), both also as the
//                     thread's CPU time (point_cpu_ms, writer_copy_cpu_ms: free of preemption),
//                     writer_apply_ms (the longest Apply() the writer thread timed during the
//                     copies, the pause it saw) and writer_apply_base_ms (the same writer with no
//                     copy running, beforehand); writer_copies per copy.
//  BM_Snapshot_Load   SnapshotReader fed 1 MiB pieces into a fresh index; items = presences.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/snapshot/snapshot.h"

namespace {

using namespace kvindex;

constexpr uint32_t kBs = 16;
constexpr int kInstances = 64;
constexpr int kBlocksPerPrompt = 128;
constexpr int kSharedPrefix = 32;

struct Built {
  std::unique_ptr<PrefixIndex> index;
  std::vector<SourceId> ids;
  // Every 16th prompt (and the instance that stored it), for the writer thread to remove and
  // store again.
  std::vector<std::pair<int, BlockStored>> kept;
};

// An index holding about `presences` presences: each instance stores prompts of 128 blocks whose
// first 32 blocks are one of 8 shared system prompts.
Built BuildIndex(uint64_t presences) {
  Built built;
  built.index = std::make_unique<PrefixIndex>();
  for (int i = 0; i < kInstances; ++i) {
    SourceConfig c;
    c.name = "engine-" + std::to_string(i);
    c.model = "m";
    c.block_size = kBs;
    built.ids.push_back(*built.index->AddSource(c));
  }
  std::mt19937_64 rng(11);
  for (uint64_t prompt = 0; built.index->stats().presences < presences; ++prompt) {
    BlockStored e;
    e.tier = Tier::Gpu();
    const uint64_t system = prompt % 8;
    uint64_t chain = 0x9E3779B97F4A7C15ULL ^ system;
    for (int b = 0; b < kBlocksPerPrompt; ++b) {
      for (uint32_t t = 0; t < kBs; ++t) {
        e.token_ids.push_back(b < kSharedPrefix ? static_cast<TokenId>(system * 1000 + b * kBs + t)
                                                : static_cast<TokenId>(rng() % 150000));
      }
      chain = (chain ^ e.token_ids.back()) * 0x100000001b3ULL + static_cast<uint64_t>(b);
      e.block_hashes.push_back(EngineHash{chain ^ (b < kSharedPrefix ? 0 : prompt << 20)});
    }
    const int inst = static_cast<int>(prompt % kInstances);
    if (prompt % 16 == 0) built.kept.emplace_back(inst, e);
    EventBatch batch;
    batch.events.push_back(std::move(e));
    (void)built.index->Apply(built.ids[static_cast<size_t>(inst)], batch);
  }
  return built;
}

std::string WriteToMemory(const IndexState& state) {
  std::string out;
  (void)WriteSnapshot(state, {}, 0, [&](std::string_view c) {
    out.append(c);
    return true;
  });
  return out;
}

// The writer thread: removes a random kept prompt and stores it again, back to back, timing each
// Apply(); the longest since the last Take() is kept.
class Writer {
 public:
  explicit Writer(Built& b) : b_(b), thread_([this] { Run(); }) {}
  ~Writer() {
    stop_.store(true);
    thread_.join();
  }
  uint64_t TakeMaxNs() { return max_ns_.exchange(0); }
  uint64_t applies() const { return applies_.load(); }

 private:
  void Run() {
    std::mt19937_64 rng(5);
    while (!stop_.load(std::memory_order_relaxed)) {
      const auto& [inst, stored] = b_.kept[rng() % b_.kept.size()];
      BlockRemoved removed;
      removed.block_hashes = stored.block_hashes;
      removed.tier = Tier::Gpu();
      for (int step = 0; step < 2; ++step) {
        EventBatch batch;
        if (step == 0) {
          batch.events.push_back(removed);
        } else {
          batch.events.push_back(stored);
        }
        const auto t0 = std::chrono::steady_clock::now();
        (void)b_.index->Apply(b_.ids[static_cast<size_t>(inst)], batch);
        const auto ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - t0)
                                                  .count());
        uint64_t seen = max_ns_.load(std::memory_order_relaxed);
        while (ns > seen && !max_ns_.compare_exchange_weak(seen, ns)) {
        }
        applies_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  Built& b_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_ns_{0};
  std::atomic<uint64_t> applies_{0};
  std::thread thread_;
};

void BM_Snapshot_Write(benchmark::State& state) {
  Built built = BuildIndex(static_cast<uint64_t>(state.range(0)));
  const uint64_t presences = built.index->stats().presences;
  size_t bytes = 0;
  uint64_t written = presences;
  uint64_t point = 0, point_cpu = 0, copy = 0, copy_cpu = 0, apply = 0, copies = 0, base = 0;
  {
    Writer writer(built);
    // The writer's own longest Apply() with no copy running, over about as long as a copy.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
    base = writer.TakeMaxNs();
    for (auto _ : state) {
      (void)writer.TakeMaxNs();
      const IndexState st = built.index->CopyState();
      apply = std::max(apply, writer.TakeMaxNs());
      const std::string out = WriteToMemory(st);
      bytes = out.size();
      written = st.presences;  // the copy's own count: the writer may be between remove and store
      point = std::max(point, st.pause_ns);
      point_cpu = std::max(point_cpu, st.pause_cpu_ns);
      copy = std::max(copy, st.writer_max_ns);
      copy_cpu = std::max(copy_cpu, st.writer_cpu_max_ns);
      copies = std::max(copies, st.writer_copies);
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * presences));
  state.counters["presences"] = static_cast<double>(presences);
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["bytes_per_presence"] = static_cast<double>(bytes) / static_cast<double>(written);
  state.counters["point_ms"] = static_cast<double>(point) / 1e6;
  state.counters["point_cpu_ms"] = static_cast<double>(point_cpu) / 1e6;
  state.counters["writer_copy_ms"] = static_cast<double>(copy) / 1e6;
  state.counters["writer_copy_cpu_ms"] = static_cast<double>(copy_cpu) / 1e6;
  state.counters["writer_apply_ms"] = static_cast<double>(apply) / 1e6;
  state.counters["writer_apply_base_ms"] = static_cast<double>(base) / 1e6;
  state.counters["writer_copies"] = static_cast<double>(copies);
}
BENCHMARK(BM_Snapshot_Write)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

void BM_Snapshot_Load(benchmark::State& state) {
  uint64_t presences = 0;
  std::string bytes;
  {
    const Built built = BuildIndex(static_cast<uint64_t>(state.range(0)));
    presences = built.index->stats().presences;
    bytes = WriteToMemory(built.index->CopyState());
  }
  for (auto _ : state) {
    auto fresh = std::make_unique<PrefixIndex>();
    auto reader_ptr = std::make_unique<SnapshotReader>("bench", fresh.get());
    SnapshotReader& reader = *reader_ptr;
    std::string_view rest = bytes;
    while (!rest.empty()) {
      const size_t n = std::min<size_t>(rest.size(), size_t{1} << 20);
      if (!reader.Feed(rest.substr(0, n)).ok()) state.SkipWithError("load failed");
      rest.remove_prefix(n);
    }
    if (!reader.Finish().ok()) state.SkipWithError("load failed");
    state.PauseTiming();  // the fresh index's teardown is not the load
    reader_ptr.reset();
    fresh.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * presences));
  state.counters["presences"] = static_cast<double>(presences);
  state.counters["MB"] = static_cast<double>(bytes.size()) / 1e6;
}
BENCHMARK(BM_Snapshot_Load)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
