// PrefixIndex benches at fixed sizes (docs/benchmarks.md), each beside a baseline doing the same
// operations on a plain std::unordered_map design in the same binary:
//
//  BM_PrefixIndex_Apply          items = block-ops (prefix hashing + presence, no decoding), in
//                                steady state: 64 instances, a ring of 2,048 chains of 128 blocks x
//                                16 tokens (the first 32 blocks, 25%, are one of 8 shared prompts);
//                                1,024 chains resident; each step stores the next chain (one
//                                BlockStored of 128 blocks) and removes the oldest (one
//                                BlockRemoved of 128 hashes): 256 block-ops per step.
//  BM_PrefixIndex_Match/128      a fully matching 128-block query by prefix hashes against an index
//                                of 64 instances x 336 chains x 128 blocks: 2,066,432 distinct
//                                presences (each instance repeats its 32 shared blocks);
//                                p50_ns / p99_ns counters from per-iteration timings.
//                                Match/1 (a 1-block query, same fixture) shows the fixed cost of
//                                a 64-instance query: candidates, scratch and the 64 answers.
//  BM_PrefixIndex_MatchTokens/2048  the same with 2,048 token ids (hashing included).
//  BM_PrefixIndex_MatchUnderIngest/128  Match/128 on the same fixture (its own copy) while a writer
//                                thread applies 4,000 batches/s of 50 one-block events (200 k
//                                blocks/s, as scripts/bench-http.sh streams; half stores, half
//                                removes of the batch stored 64 batches earlier, so the size
//                                stays put): what the index's one-writer / many-readers lock costs
//                                a query (p50_ns, p99_ns). /128/0: the writer back to back (a
//                                backlog being caught up). Baseline: ..._MatchBesideIngest/128/*,
//                                the same writer applying into another index: the same sharing of
//                                the CPUs, no lock in common. max_ns: the slowest query.
//  BM_PrefixIndex_MatchUnderGrowth/128/1  the same, but the writer only stores fresh blocks (the
//                                index grows by 200 k blocks/s, so it needs a new 2 MiB record chunk
//                                every 65,536 blocks and its tables double now and then): whether
//                                growing stalls queries (max_ns, and over_1ms: how many queries took more than 1 ms). Baseline: ..._MatchBesideGrowth.
//  BM_PrefixIndex_GrowthStall    the writer alone storing 4,000,000 fresh blocks into an empty
//                                index (80,000 batches of 50 one-block events, fresh engine hashes:
//                                the block table and the engine map both grow 30 times, in the
//                                same batches): each batch's Apply timed; max_ms (the longest:
//                                both tables' largest growth), p9999_ms, over_10ms and over_50ms
//                                (batches), blocks_per_s. What growth costs ingest and a
//                                replica's lag; the tables build their next arrays ahead on a
//                                helper thread (docs/architecture.md "Index concurrency").
//  BM_PrefixIndex_Miss           a 2,048-token query whose first block is absent.
//  BM_PrefixIndex_Memory         bytes_per_block = resident bytes (RSS delta, /proc/self/statm, with
//                                glibc told to map and unmap every large allocation and trimmed
//                                before each reading) per (block, source) presence after storing
//                                1,003,520 presences (64 x 163 chains). RSS, not the allocator's
//                                count, because the index maps its record chunks itself (huge
//                                pages); heap_bytes_per_block is the mallinfo2 delta (heap only).
//  BM_UnorderedMapBaseline_*     the same operations on std::unordered_map<key, std::vector<...>>
//                                blocks and per-instance std::unordered_map engine maps.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include <benchmark/benchmark.h>

#include "kvindex/index/prefix_index.h"

namespace {

using namespace kvindex;

constexpr uint32_t kBlockSize = 16;
constexpr int kInstances = 64;
constexpr int kChainBlocks = 128;
constexpr int kSharedBlocks = 32;  // 25% of a chain
constexpr int kSharedPrompts = 8;

// A chain: its tokens, engine hashes (publisher-style: unique per chain position) and the index of
// its shared prefix.
struct Chain {
  std::vector<TokenId> tokens;
  std::vector<EngineHash> hashes;
};

Chain MakeChain(std::mt19937_64& rng, int shared) {
  Chain c;
  c.tokens.reserve(kChainBlocks * kBlockSize);
  for (int i = 0; i < kSharedBlocks * static_cast<int>(kBlockSize); ++i) {
    c.tokens.push_back(static_cast<TokenId>(shared * 7919 + i));
  }
  while (c.tokens.size() < kChainBlocks * kBlockSize) {
    c.tokens.push_back(static_cast<TokenId>(rng() % 151936));
  }
  // Engine hashes as vLLM derives them: a function of the prefix (shared blocks share hashes).
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int b = 0; b < kChainBlocks; ++b) {
    for (uint32_t i = 0; i < kBlockSize; ++i) h = (h ^ c.tokens[b * kBlockSize + i]) * 0x100000001b3ULL;
    c.hashes.push_back(EngineHash{h});
  }
  return c;
}

EventBatch StoredBatch(const Chain& c) {
  BlockStored e;
  e.block_hashes = c.hashes;
  e.token_ids = c.tokens;
  e.tier = Tier::Gpu();
  EventBatch b;
  b.dp_rank = 0;
  b.events.push_back(std::move(e));
  return b;
}

SourceConfig Config(int i) {
  SourceConfig c;
  c.name = "instance-" + std::to_string(i);
  c.model = "m";
  c.block_size = kBlockSize;
  c.dp_rank = 0;
  return c;
}

// ------------------------------------------------------------------ the baseline design
// One std::unordered_map from (scope, prefix hash) to a vector of (instance, tier mask), and one
// std::unordered_map engine hash -> prefix hash per instance: what a straightforward port of the
// upstream conductor's maps would look like, with the same hashing and the same walk.
class Baseline {
 public:
  void Apply(int inst, const BlockStored& e) {
    std::optional<PrefixHash> prev;
    std::vector<PrefixHash> hashes;
    AppendPrefixHashes(e.token_ids, kBlockSize, prev, kDefaultHashSeed, hashes);
    auto& engine = engine_[inst];
    for (size_t i = 0; i < hashes.size(); ++i) {
      auto& holders = blocks_[hashes[i].value];
      bool found = false;
      for (auto& [h, tiers] : holders) {
        if (h == inst) {
          tiers |= 1;
          found = true;
        }
      }
      if (!found) holders.emplace_back(inst, 1);
      engine[e.block_hashes[i].value] = hashes[i].value;
    }
  }
  void Remove(int inst, const BlockRemoved& e) {
    auto& engine = engine_[inst];
    for (const EngineHash& h : e.block_hashes) {
      auto it = engine.find(h.value);
      if (it == engine.end()) continue;
      auto b = blocks_.find(it->second);
      if (b != blocks_.end()) {
        std::erase_if(b->second, [&](const auto& p) { return p.first == inst; });
        if (b->second.empty()) blocks_.erase(b);
      }
      engine.erase(it);
    }
  }
  // The same answer shape as PrefixIndex (one InstanceMatch per instance, zeros included), so the
  // comparison includes building the result.
  PrefixMatch MatchResult(std::span<const PrefixHash> hashes, std::vector<uint64_t>& matched) const {
    Match(hashes, matched);
    PrefixMatch out;
    for (int i = 0; i < kInstances; ++i) {
      InstanceMatch& m = out.instances.emplace_back();
      m.instance = names_[static_cast<size_t>(i)];
      m.block_size = kBlockSize;
      m.longest_matched = matched[static_cast<size_t>(i)] * kBlockSize;
      m.gpu = m.longest_matched;
      m.dp.push_back({0, m.longest_matched});
    }
    return out;
  }
  // Longest match per instance, in blocks.
  void Match(std::span<const PrefixHash> hashes, std::vector<uint64_t>& matched) const {
    matched.assign(kInstances, 0);
    int alive = kInstances;
    for (size_t d = 0; d < hashes.size() && alive > 0; ++d) {
      auto it = blocks_.find(hashes[d].value);
      if (it == blocks_.end()) break;
      for (const auto& [h, tiers] : it->second) {
        if (matched[h] == d) matched[h] = d + 1;
      }
      alive = 0;
      for (uint64_t m : matched) alive += m == d + 1;
    }
  }

 private:
  std::vector<std::string> names_ = [] {
    std::vector<std::string> n;
    for (int i = 0; i < kInstances; ++i) n.push_back("instance-" + std::to_string(i));
    return n;
  }();
  std::unordered_map<uint64_t, std::vector<std::pair<int, uint16_t>>> blocks_;
  std::unordered_map<int, std::unordered_map<uint64_t, uint64_t>> engine_;
};

// ------------------------------------------------------------------ fixtures
struct Workload {
  std::vector<Chain> chains;  // chains[i] belongs to instance i % kInstances
};

constexpr int kApplyRing = 2048;
constexpr int kApplyResident = 1024;

const Workload& ApplyWorkload() {
  static const Workload w = [] {
    Workload x;
    std::mt19937_64 rng(1);
    for (int i = 0; i < kApplyRing; ++i) x.chains.push_back(MakeChain(rng, i % kSharedPrompts));
    return x;
  }();
  return w;
}

EventBatch RemovedBatch(const Chain& c) {
  BlockRemoved e;
  e.block_hashes = c.hashes;
  e.tier = Tier::Gpu();
  EventBatch b;
  b.dp_rank = 0;
  b.events.push_back(std::move(e));
  return b;
}

constexpr int kMatchChainsPerInstance = 336;  // 64 x (32 + 336 x 96) = 2,066,432 presences

struct MatchFixture {
  Workload w;
  std::unique_ptr<PrefixIndex> index;
  std::unique_ptr<Baseline> baseline;
  std::vector<std::vector<PrefixHash>> prefix;  // per chain
};

MatchFixture* BuildMatchFixture() {
  {
    auto* x = new MatchFixture;
    std::mt19937_64 rng(2);
    x->index = std::make_unique<PrefixIndex>();
    x->baseline = std::make_unique<Baseline>();
    std::vector<SourceId> ids;
    for (int i = 0; i < kInstances; ++i) ids.push_back(*x->index->AddSource(Config(i)));
    for (int c = 0; c < kInstances * kMatchChainsPerInstance; ++c) {
      x->w.chains.push_back(MakeChain(rng, c % kSharedPrompts));
      const EventBatch b = StoredBatch(x->w.chains.back());
      (void)x->index->Apply(ids[c % kInstances], b);
      x->baseline->Apply(c % kInstances, std::get<BlockStored>(b.events[0]));
    }
    for (int c = 0; c < 1024; ++c) {
      x->prefix.push_back(ChainPrefixHashes(x->w.chains[static_cast<size_t>(c) * 13 %
                                                        x->w.chains.size()].tokens,
                                            kBlockSize));
    }
    return x;
  }
}

const MatchFixture& Fixture() {
  static const MatchFixture* f = BuildMatchFixture();
  return *f;
}

void ReportPercentiles(benchmark::State& state, std::vector<double>& ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p99_ns"] = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)];
}

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ apply
void BM_PrefixIndex_Apply(benchmark::State& state) {
  const Workload& w = ApplyWorkload();
  std::vector<EventBatch> stores;
  std::vector<EventBatch> removes;
  for (const Chain& c : w.chains) {
    stores.push_back(StoredBatch(c));
    removes.push_back(RemovedBatch(c));
  }
  PrefixIndex index;
  std::vector<SourceId> ids;
  for (int i = 0; i < kInstances; ++i) ids.push_back(*index.AddSource(Config(i)));
  for (int c = 0; c < kApplyResident; ++c) (void)index.Apply(ids[c % kInstances], stores[c]);
  size_t step = 0;
  for (auto _ : state) {
    const size_t in = (step + kApplyResident) % kApplyRing;
    const size_t out = step % kApplyRing;
    auto a = index.Apply(ids[in % kInstances], stores[in]);
    auto b = index.Apply(ids[out % kInstances], removes[out]);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * 2 * kChainBlocks);
  state.counters["presences"] = static_cast<double>(index.stats().presences);
}
BENCHMARK(BM_PrefixIndex_Apply);

void BM_UnorderedMapBaseline_Apply(benchmark::State& state) {
  const Workload& w = ApplyWorkload();
  std::vector<EventBatch> stores;
  std::vector<EventBatch> removes;
  for (const Chain& c : w.chains) {
    stores.push_back(StoredBatch(c));
    removes.push_back(RemovedBatch(c));
  }
  Baseline baseline;
  for (int c = 0; c < kApplyResident; ++c) {
    baseline.Apply(c % kInstances, std::get<BlockStored>(stores[c].events[0]));
  }
  size_t step = 0;
  for (auto _ : state) {
    const size_t in = (step + kApplyResident) % kApplyRing;
    const size_t out = step % kApplyRing;
    baseline.Apply(static_cast<int>(in % kInstances), std::get<BlockStored>(stores[in].events[0]));
    baseline.Remove(static_cast<int>(out % kInstances),
                    std::get<BlockRemoved>(removes[out].events[0]));
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * 2 * kChainBlocks);
}
BENCHMARK(BM_UnorderedMapBaseline_Apply);

// ------------------------------------------------------------------ match
MatchQuery Query() {
  MatchQuery q;
  q.model = "m";
  return q;
}

void BM_PrefixIndex_Match(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  const MatchQuery q = Query();
  std::vector<double> ns;
  size_t i = 0;
  for (auto _ : state) {
    const auto& hashes = f.prefix[i++ % f.prefix.size()];
    const auto t0 = Clock::now();
    auto m = f.index->MatchPrefixHashes(q, std::span(hashes).first(state.range(0)));
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
  state.counters["presences"] = static_cast<double>(f.index->stats().presences);
}
BENCHMARK(BM_PrefixIndex_Match)->Arg(1)->Arg(128);

// The writer of BM_PrefixIndex_MatchUnderIngest: 4,000 batches/s (or back to back when not
// `paced`) of 50 one-block events on source `id`, alternating a store of fresh blocks and the
// removal of the batch stored 64 batches before; when `grow`, only stores, each of blocks never
// seen before (the first token of each event counts up).
class PacedWriter {
 public:
  static constexpr int kEvents = 50;
  static constexpr int kRing = 128;
  static constexpr auto kInterval = std::chrono::microseconds(250);

  PacedWriter(PrefixIndex& index, SourceId id, bool paced, bool grow) {
    std::mt19937_64 rng(3);
    for (int b = 0; b < kRing; ++b) {
      EventBatch store;
      EventBatch remove;
      BlockRemoved removed;
      removed.tier = Tier::Gpu();
      for (int e = 0; e < kEvents; ++e) {
        BlockStored stored;
        stored.block_hashes.push_back(EngineHash{rng()});
        for (uint32_t t = 0; t < kBlockSize; ++t) stored.token_ids.push_back(static_cast<TokenId>(rng() % 151936));
        stored.tier = Tier::Gpu();
        removed.block_hashes.push_back(stored.block_hashes[0]);
        store.events.push_back(std::move(stored));
      }
      remove.events.push_back(std::move(removed));
      stores_.push_back(std::move(store));
      removes_.push_back(std::move(remove));
    }
    thread_ = std::thread([this, &index, id, paced, grow] {
      auto due = Clock::now();
      TokenId fresh = 1u << 20;  // above every random token id
      for (uint64_t k = 0; !stop_.load(std::memory_order_relaxed); ++k) {
        const size_t in = k % kRing;
        if (grow) {
          for (Event& e : stores_[in].events) std::get<BlockStored>(e).token_ids[0] = fresh++;
        } else if (k >= kRing / 2) {
          (void)index.Apply(id, removes_[(k - kRing / 2) % kRing]);
        }
        (void)index.Apply(id, stores_[in]);
        blocks_.fetch_add(kEvents, std::memory_order_relaxed);
        if (paced) {
          due += kInterval;
          std::this_thread::sleep_until(due);
        }
      }
    });
  }
  ~PacedWriter() {
    stop_ = true;
    thread_.join();
  }
  uint64_t blocks() const { return blocks_.load(); }

 private:
  std::vector<EventBatch> stores_;
  std::vector<EventBatch> removes_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> blocks_{0};
  std::thread thread_;
};

// Match/128 while a PacedWriter runs: into the queried index (`same_index`), or into another index
// (the baseline: the same CPU sharing, no lock in common).
void MatchWhileWriting(benchmark::State& state, bool same_index, bool grow = false) {
  static MatchFixture* f = BuildMatchFixture();
  static const SourceId writer_id = [] {
    SourceConfig c = Config(kInstances);
    c.name = "writer";
    return *f->index->AddSource(c);
  }();
  static PrefixIndex other;
  static const SourceId other_id = *other.AddSource(Config(0));
  const MatchQuery q = Query();
  std::vector<double> ns;
  size_t i = 0;
  PacedWriter writer(same_index ? *f->index : other, same_index ? writer_id : other_id,
                     state.range(1) != 0, grow);
  const auto start = Clock::now();
  for (auto _ : state) {
    const auto& hashes = f->prefix[i++ % f->prefix.size()];
    const auto t0 = Clock::now();
    auto m = f->index->MatchPrefixHashes(q, std::span(hashes).first(state.range(0)));
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
  if (!ns.empty()) state.counters["max_ns"] = ns.back();  // sorted by ReportPercentiles
  state.counters["over_1ms"] =
      static_cast<double>(ns.end() - std::upper_bound(ns.begin(), ns.end(), 1e6));
  state.counters["writer_blocks_per_s"] = static_cast<double>(writer.blocks()) / seconds;
}
void BM_PrefixIndex_MatchUnderIngest(benchmark::State& state) { MatchWhileWriting(state, true); }
void BM_PrefixIndex_MatchBesideIngest(benchmark::State& state) { MatchWhileWriting(state, false); }
BENCHMARK(BM_PrefixIndex_MatchUnderIngest)->Args({128, 1})->Args({128, 0})->UseRealTime();
BENCHMARK(BM_PrefixIndex_MatchBesideIngest)->Args({128, 1})->Args({128, 0})->UseRealTime();
void BM_PrefixIndex_MatchUnderGrowth(benchmark::State& state) { MatchWhileWriting(state, true, true); }
void BM_PrefixIndex_MatchBesideGrowth(benchmark::State& state) { MatchWhileWriting(state, false, true); }
BENCHMARK(BM_PrefixIndex_MatchUnderGrowth)->Args({128, 1})->UseRealTime()->MinTime(2);
BENCHMARK(BM_PrefixIndex_MatchBesideGrowth)->Args({128, 1})->UseRealTime()->MinTime(2);

// ------------------------------------------------------------------ growth
void BM_PrefixIndex_GrowthStall(benchmark::State& state) {
  constexpr int kEvents = 50;
  constexpr int kBatches = 80'000;
  constexpr int kRing = 64;
  std::mt19937_64 rng(5);
  std::vector<EventBatch> ring(kRing);
  for (EventBatch& batch : ring) {
    for (int e = 0; e < kEvents; ++e) {
      BlockStored stored;
      stored.block_hashes.push_back(EngineHash{0});
      for (uint32_t t = 0; t < kBlockSize; ++t) {
        stored.token_ids.push_back(static_cast<TokenId>(rng() % 151936));
      }
      stored.tier = Tier::Gpu();
      batch.events.push_back(std::move(stored));
    }
  }
  std::vector<double> ms;
  ms.reserve(kBatches);
  double seconds = 0;
  for (auto _ : state) {
    PrefixIndex index;
    const SourceId id = *index.AddSource(Config(0));
    ms.clear();
    TokenId fresh = 1u << 20;  // above every random token id
    const auto start = Clock::now();
    for (int k = 0; k < kBatches; ++k) {
      EventBatch& batch = ring[k % kRing];
      for (Event& e : batch.events) {
        auto& stored = std::get<BlockStored>(e);
        stored.token_ids[0] = fresh++;
        stored.block_hashes[0] = EngineHash{rng()};
      }
      const auto t0 = Clock::now();
      benchmark::DoNotOptimize(index.Apply(id, batch));
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::sort(ms.begin(), ms.end());
  state.counters["max_ms"] = ms.back();
  state.counters["p9999_ms"] = ms[ms.size() * 9999 / 10000];
  state.counters["over_10ms"] =
      static_cast<double>(ms.end() - std::upper_bound(ms.begin(), ms.end(), 10.0));
  state.counters["over_50ms"] =
      static_cast<double>(ms.end() - std::upper_bound(ms.begin(), ms.end(), 50.0));
  state.counters["blocks_per_s"] = kBatches * kEvents / seconds;
}
BENCHMARK(BM_PrefixIndex_GrowthStall)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_UnorderedMapBaseline_Match(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  std::vector<double> ns;
  std::vector<uint64_t> matched;
  size_t i = 0;
  for (auto _ : state) {
    const auto& hashes = f.prefix[i++ % f.prefix.size()];
    const auto t0 = Clock::now();
    auto m = f.baseline->MatchResult(std::span(hashes).first(state.range(0)), matched);
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
}
BENCHMARK(BM_UnorderedMapBaseline_Match)->Arg(128);

void BM_PrefixIndex_MatchTokens(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  const MatchQuery q = Query();
  std::vector<double> ns;
  size_t i = 0;
  for (auto _ : state) {
    const auto& tokens = f.w.chains[(i++ % f.prefix.size()) * 13 % f.w.chains.size()].tokens;
    const auto t0 = Clock::now();
    auto m = f.index->MatchTokens(q, std::span(tokens).first(state.range(0)));
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
}
BENCHMARK(BM_PrefixIndex_MatchTokens)->Arg(2048);

void BM_UnorderedMapBaseline_MatchTokens(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  std::vector<double> ns;
  std::vector<uint64_t> matched;
  std::vector<PrefixHash> hashes;
  size_t i = 0;
  for (auto _ : state) {
    const auto& tokens = f.w.chains[(i++ % f.prefix.size()) * 13 % f.w.chains.size()].tokens;
    const auto t0 = Clock::now();
    hashes.clear();
    AppendPrefixHashes(std::span(tokens).first(state.range(0)), kBlockSize, std::nullopt,
                       kDefaultHashSeed, hashes);
    auto m = f.baseline->MatchResult(hashes, matched);
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
}
BENCHMARK(BM_UnorderedMapBaseline_MatchTokens)->Arg(2048);

std::vector<TokenId> MissTokens() {
  std::vector<TokenId> t(2048);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<TokenId>(200000 + i);
  return t;
}

void BM_PrefixIndex_Miss(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  const MatchQuery q = Query();
  const auto tokens = MissTokens();
  std::vector<double> ns;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto m = f.index->MatchTokens(q, tokens);
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
}
BENCHMARK(BM_PrefixIndex_Miss);

void BM_UnorderedMapBaseline_Miss(benchmark::State& state) {
  const MatchFixture& f = Fixture();
  const auto tokens = MissTokens();
  std::vector<double> ns;
  std::vector<uint64_t> matched;
  std::vector<PrefixHash> hashes;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    hashes.clear();
    AppendPrefixHashes(tokens, kBlockSize, std::nullopt, kDefaultHashSeed, hashes);
    auto m = f.baseline->MatchResult(hashes, matched);
    benchmark::DoNotOptimize(m);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  state.SetItemsProcessed(state.iterations());
  ReportPercentiles(state, ns);
}
BENCHMARK(BM_UnorderedMapBaseline_Miss);

// ------------------------------------------------------------------ memory
constexpr int kMemoryChainsPerInstance = 163;  // 64 x (32 + 163 x 96) = 1,003,520 presences

size_t HeapInUse() { return mallinfo2().uordblks + mallinfo2().hblkhd; }

// Resident bytes after returning free heap pages to the kernel. M_MMAP_THRESHOLD fixed at 128 KiB
// (glibc's default, which glibc otherwise raises after the first large free) makes every large
// table a mapping of its own that leaves the RSS when freed, so a table's growth leaves no garbage.
size_t Resident() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  malloc_trim(0);
  long pages = 0;
  long resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void BM_PrefixIndex_Memory(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<Chain> chains;
  for (int c = 0; c < kInstances * kMemoryChainsPerInstance; ++c) {
    chains.push_back(MakeChain(rng, c % kSharedPrompts));
  }
  for (auto _ : state) {
    const size_t before = Resident();
    const size_t heap_before = HeapInUse();
    auto index = std::make_unique<PrefixIndex>();
    std::vector<SourceId> ids;
    for (int i = 0; i < kInstances; ++i) ids.push_back(*index->AddSource(Config(i)));
    for (size_t c = 0; c < chains.size(); ++c) {
      (void)index->Apply(ids[c % kInstances], StoredBatch(chains[c]));
    }
    const size_t heap_after = HeapInUse();
    const size_t after = Resident();
    const IndexStats s = index->stats();
    state.counters["presences"] = static_cast<double>(s.presences);
    state.counters["blocks"] = static_cast<double>(s.blocks);
    state.counters["bytes_per_block"] =
        static_cast<double>(after - before) / static_cast<double>(s.presences);
    state.counters["heap_bytes_per_block"] =
        static_cast<double>(heap_after - heap_before) / static_cast<double>(s.presences);
    state.counters["stats_bytes_per_block"] =
        static_cast<double>(s.bytes) / static_cast<double>(s.presences);
  }
}
BENCHMARK(BM_PrefixIndex_Memory)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_UnorderedMapBaseline_Memory(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<Chain> chains;
  for (int c = 0; c < kInstances * kMemoryChainsPerInstance; ++c) {
    chains.push_back(MakeChain(rng, c % kSharedPrompts));
  }
  for (auto _ : state) {
    const size_t before = Resident();
    auto baseline = std::make_unique<Baseline>();
    for (size_t c = 0; c < chains.size(); ++c) {
      const EventBatch b = StoredBatch(chains[c]);
      baseline->Apply(static_cast<int>(c % kInstances), std::get<BlockStored>(b.events[0]));
    }
    const size_t after = Resident();
    state.counters["bytes_per_block"] =
        static_cast<double>(after - before) /
        (static_cast<double>(kInstances) * (kSharedBlocks + kMemoryChainsPerInstance *
                                                                (kChainBlocks - kSharedBlocks)));
  }
}
BENCHMARK(BM_UnorderedMapBaseline_Memory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
