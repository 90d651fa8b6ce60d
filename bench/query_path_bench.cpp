// The HTTP /query path minus the socket, at fixed sizes (docs/benchmarks.md), each step beside the
// baseline it should approach, in the same binary:
//
//  BM_NlohmannParse/2048         baseline: nlohmann::json::parse of a /query body with 2,048 token
//                                ids ({"model":"m","token_ids":[...]}, 11,596 bytes; ids <
//                                151,936).
//  BM_ParseQueryRequest/2048     kvindex::ParseQueryRequest of the same body.
//  BM_PrefixIndex_MatchTokens/2048  baseline: PrefixIndex::MatchTokens alone on the same tokens
//                                (prefix hashing included) against the index below.
//  BM_RenderQueryAnswer/2048     RenderQueryAnswer of that match (64 instances).
//  BM_QueryServer_Handle/2048    QueryServer::Handle("POST", "/query", body): parse + match +
//                                render + the server's own metrics, as the HTTP worker runs it.
//
// The index: 64 instances (block size 16) x 163 chains of 128 blocks, the first 32 blocks one of 8
// shared prompts: 64 x (32 + 163 x 96) = 1,003,520 presences. Queries cycle over 256 stored chains
// (fully matched by one instance, 32 blocks by 1/8 of the others). Counters: p50_ns from
// per-iteration timings.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "kvindex/http/query_server.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"

namespace {

using namespace kvindex;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBlockSize = 16;
constexpr int kInstances = 64;
constexpr int kChainBlocks = 128;
constexpr int kSharedBlocks = 32;
constexpr int kSharedPrompts = 8;
constexpr int kChainsPerInstance = 163;  // 64 x (32 + 163 x 96) = 1,003,520 presences
constexpr size_t kQueries = 256;

std::vector<TokenId> MakeChain(std::mt19937_64& rng, int shared) {
  std::vector<TokenId> tokens;
  for (int i = 0; i < kSharedBlocks * static_cast<int>(kBlockSize); ++i) {
    tokens.push_back(static_cast<TokenId>(shared * 7919 + i));
  }
  while (tokens.size() < kChainBlocks * kBlockSize) {
    tokens.push_back(static_cast<TokenId>(rng() % 151936));
  }
  return tokens;
}

std::string BodyFor(const std::vector<TokenId>& tokens) {
  std::string body = "{\"model\":\"m\",\"token_ids\":[";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) body += ',';
    body += std::to_string(tokens[i]);
  }
  body += "]}";
  return body;
}

struct Fixture {
  PrefixIndex index;
  LocalBackend backend{&index};
  std::unique_ptr<QueryServer> server;
  std::vector<std::vector<TokenId>> queries;
  std::vector<std::string> bodies;
};

const Fixture& GetFixture() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    std::mt19937_64 rng(2);
    std::vector<SourceId> ids;
    for (int i = 0; i < kInstances; ++i) {
      SourceConfig c;
      c.name = "instance-" + std::to_string(i);
      c.model = "m";
      c.block_size = kBlockSize;
      c.dp_rank = 0;
      ids.push_back(*x->backend.AddSource(c));
    }
    for (int c = 0; c < kInstances * kChainsPerInstance; ++c) {
      BlockStored e;
      e.token_ids = MakeChain(rng, c % kSharedPrompts);
      uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(c);
      for (int b = 0; b < kChainBlocks; ++b)
        e.block_hashes.push_back(EngineHash{h += 0x9e3779b97f4a7c15ULL});
      e.tier = Tier::Gpu();
      if (static_cast<size_t>(c) % 40 == 0 && x->queries.size() < kQueries)
        x->queries.push_back(e.token_ids);
      EventBatch batch;
      batch.dp_rank = 0;
      batch.events.push_back(std::move(e));
      (void)x->backend.Apply(ids[static_cast<size_t>(c) % kInstances], batch);
    }
    for (const auto& q : x->queries) x->bodies.push_back(BodyFor(q));
    QueryServerOptions options;
    options.listen = false;
    auto started = QueryServer::Start(x->index, x->backend, options);
    x->server = std::move(*started);
    return x;
  }();
  return *f;
}

void ReportP50(benchmark::State& state, std::vector<double>& ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
}

template <typename F>
void Timed(benchmark::State& state, F&& f) {
  std::vector<double> ns;
  ns.reserve(1 << 16);
  size_t i = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    f(i++ % kQueries);
    if (ns.size() < (1u << 20)) {
      ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
  }
  state.SetItemsProcessed(state.iterations());
  ReportP50(state, ns);
}

void BM_NlohmannParse(benchmark::State& state) {
  const Fixture& f = GetFixture();
  state.counters["body_bytes"] = static_cast<double>(f.bodies[0].size());
  Timed(state, [&](size_t q) {
    auto j = nlohmann::json::parse(f.bodies[q]);
    benchmark::DoNotOptimize(j);
  });
}
BENCHMARK(BM_NlohmannParse)->Arg(2048);

void BM_ParseQueryRequest(benchmark::State& state) {
  const Fixture& f = GetFixture();
  Timed(state, [&](size_t q) {
    auto r = ParseQueryRequest(f.bodies[q]);
    if (!r.ok() || r->tokens.size() != 2048) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_ParseQueryRequest)->Arg(2048);

void BM_PrefixIndex_MatchTokens(benchmark::State& state) {
  const Fixture& f = GetFixture();
  MatchQuery mq;
  mq.model = "m";
  state.counters["presences"] = static_cast<double>(f.index.stats().presences);
  Timed(state, [&](size_t q) {
    auto m = f.index.MatchTokens(mq, f.queries[q]);
    benchmark::DoNotOptimize(m);
  });
}
BENCHMARK(BM_PrefixIndex_MatchTokens)->Arg(2048);

void BM_RenderQueryAnswer(benchmark::State& state) {
  const Fixture& f = GetFixture();
  MatchQuery mq;
  mq.model = "m";
  std::vector<PrefixMatch> matches;
  for (const auto& q : f.queries) matches.push_back(*f.index.MatchTokens(mq, q));
  state.counters["answer_bytes"] =
      static_cast<double>(RenderQueryAnswer(matches[0], "default").size());
  Timed(state, [&](size_t q) {
    auto s = RenderQueryAnswer(matches[q], mq.tenant);
    benchmark::DoNotOptimize(s);
  });
}
BENCHMARK(BM_RenderQueryAnswer)->Arg(2048);

void BM_QueryServer_Handle(benchmark::State& state) {
  const Fixture& f = GetFixture();
  std::string out;
  std::string content_type;
  Timed(state, [&](size_t q) {
    const int code = f.server->Handle("POST", "/query", f.bodies[q], out, content_type);
    if (code != 200) state.SkipWithError("query failed");
    benchmark::DoNotOptimize(out);
  });
}
BENCHMARK(BM_QueryServer_Handle)->Arg(2048);

}  // namespace

BENCHMARK_MAIN();
