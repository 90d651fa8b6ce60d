// BM_PrefixHash_Chain/<tokens>: the prefix hash chain over a prompt of <tokens> tokens in blocks of
// 16, beside BM_XXH3_Baseline/<tokens>: one bare XXH3_64bits over the same bytes (the floor any
// chain pays). Items = blocks hashed; bytes = token bytes. Report the ratio chain / baseline.
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <xxhash.h>

#include "kvindex/core/block_hash.h"

namespace {

constexpr uint32_t kBlockSize = 16;

std::vector<kvindex::TokenId> RandomTokens(size_t count) {
  std::mt19937 rng(42);  // fixed seed
  std::uniform_int_distribution<kvindex::TokenId> dist(0, 151935);  // a Qwen-sized vocabulary
  std::vector<kvindex::TokenId> tokens(count);
  for (auto& t : tokens) t = dist(rng);
  return tokens;
}

void BM_PrefixHash_Chain(benchmark::State& state) {
  const auto tokens = RandomTokens(static_cast<size_t>(state.range(0)));
  std::vector<kvindex::PrefixHash> out;
  for (auto _ : state) {
    out.clear();
    kvindex::AppendPrefixHashes(tokens, kBlockSize, std::nullopt, kvindex::kDefaultHashSeed, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size() / kBlockSize));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
}
BENCHMARK(BM_PrefixHash_Chain)->Arg(16)->Arg(512)->Arg(2048)->Arg(32768);

void BM_XXH3_Baseline(benchmark::State& state) {
  const auto tokens = RandomTokens(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(XXH3_64bits_withSeed(tokens.data(), tokens.size() * 4, 1337));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size() / kBlockSize));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
}
BENCHMARK(BM_XXH3_Baseline)->Arg(16)->Arg(512)->Arg(2048)->Arg(32768);

// The per-block floor: one XXH3 call per 16-token block, without chaining.
void BM_XXH3_PerBlockBaseline(benchmark::State& state) {
  const auto tokens = RandomTokens(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    uint64_t acc = 0;
    for (size_t i = 0; i + kBlockSize <= tokens.size(); i += kBlockSize) {
      acc ^= XXH3_64bits_withSeed(tokens.data() + i, kBlockSize * 4, 1337);
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size() / kBlockSize));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
}
BENCHMARK(BM_XXH3_PerBlockBaseline)->Arg(16)->Arg(512)->Arg(2048)->Arg(32768);

}  // namespace

BENCHMARK_MAIN();
