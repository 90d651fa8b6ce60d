// Snapshot benches (docs/snapshot-format.md): an index of 64 instances whose prompts share a 25%
// prefix, at about N presences (the argument), written to memory and loaded back.
//
//  BM_Snapshot_Write  CopyState() + WriteSnapshot() into memory; counters: MB, bytes_per_presence,
//                     pause_ms (the shared-lock copy, the writer's pause), items = presences.
//  BM_Snapshot_Load   SnapshotReader fed 1 MiB pieces into a fresh index; items = presences.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
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

// An index holding about `presences` presences: each instance stores prompts of 128 blocks whose
// first 32 blocks are one of 8 shared system prompts.
std::unique_ptr<PrefixIndex> BuildIndex(uint64_t presences) {
  auto index = std::make_unique<PrefixIndex>();
  std::vector<SourceId> ids;
  for (int i = 0; i < kInstances; ++i) {
    SourceConfig c;
    c.name = "engine-" + std::to_string(i);
    c.model = "m";
    c.block_size = kBs;
    ids.push_back(*index->AddSource(c));
  }
  std::mt19937_64 rng(11);
  for (uint64_t prompt = 0; index->stats().presences < presences; ++prompt) {
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
    EventBatch batch;
    batch.events.push_back(std::move(e));
    (void)index->Apply(ids[prompt % kInstances], batch);
  }
  return index;
}

std::string WriteToMemory(const PrefixIndex& index, uint64_t* pause_ns) {
  std::string out;
  const IndexState state = index.CopyState();
  *pause_ns = state.pause_ns;
  (void)WriteSnapshot(state, {}, 0, [&](std::string_view c) {
    out.append(c);
    return true;
  });
  return out;
}

void BM_Snapshot_Write(benchmark::State& state) {
  const auto index = BuildIndex(static_cast<uint64_t>(state.range(0)));
  const uint64_t presences = index->stats().presences;
  size_t bytes = 0;
  uint64_t max_pause = 0;
  for (auto _ : state) {
    uint64_t pause = 0;
    const std::string out = WriteToMemory(*index, &pause);
    bytes = out.size();
    max_pause = std::max(max_pause, pause);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * presences));
  state.counters["presences"] = static_cast<double>(presences);
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["bytes_per_presence"] = static_cast<double>(bytes) / static_cast<double>(presences);
  state.counters["pause_ms"] = static_cast<double>(max_pause) / 1e6;
}
BENCHMARK(BM_Snapshot_Write)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

void BM_Snapshot_Load(benchmark::State& state) {
  uint64_t presences = 0;
  std::string bytes;
  {
    const auto index = BuildIndex(static_cast<uint64_t>(state.range(0)));
    presences = index->stats().presences;
    uint64_t pause = 0;
    bytes = WriteToMemory(*index, &pause);
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
BENCHMARK(BM_Snapshot_Load)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
