// The HTTP /query path minus the socket, at fixed sizes (docs/benchmarks-http.md), each step beside
// the baseline it should approach, in the same binary. Every bench runs at 512, 2,048 and 8,192
// token ids against 64 instances:
//
//  BM_NlohmannParse/N            baseline: nlohmann::json::parse of a /query body with N token ids
//                                ({"model":"m","token_ids":[...]}, 11,596 bytes at 2,048; ids <
//                                151,936).
//  BM_ParseQueryRequest/N        kvindex::ParseQueryRequest of the same body.
//  BM_ParseQueryRequest_Spaced/N the same ids in the body Python's json.dumps writes (", " and
//                                ": " between the items; 13,642 bytes at 2,048), as the clients
//                                of scripts/bench-http.sh send them.
//  BM_PrefixIndex_MatchTokens/N  baseline: PrefixIndex::MatchTokens alone on the same tokens
//                                (prefix hashing included) against the index below.
//  BM_RenderQueryAnswer/N        RenderQueryAnswer of that match (64 instances).
//  BM_QueryServer_Handle/N       QueryServer::Handle("POST", "/query", body): parse + match +
//                                render + the server's own metrics, as the HTTP worker runs it.
//  BM_QueryService_Handle/N      QueryService::Handle of the same body into one reused
//                                ServiceAnswer (the transport-free service, buffers reused).
//
// The index: 64 instances (block size 16) x 163 chains of 128 blocks, the first 32 blocks one of 8
// shared prompts: 64 x (32 + 163 x 96) = 1,003,520 presences. Queries cycle over 256 stored chains
// (fully matched by one instance, 32 blocks by 1/8 of the others): at 512 tokens the chain's first
// 512, at 2,048 the whole chain, at 8,192 the chain followed by 6,144 tokens no instance holds.
// Counters: p50_ns and p99_ns from per-iteration timings (two clock reads included in each).
//
// With QUERY_PATH_ITERATIONS=n in the environment each bench runs exactly n iterations once (no
// calibration runs), so that a run under `valgrind --tool=callgrind` counts a known number of
// requests (scripts/query-path-instructions.sh).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "kvindex/http/query_server.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"
#include "kvindex/query/query_service.h"

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

// spaced: as Python's json.dumps writes it (", " and ": " between the items).
std::string BodyFor(const std::vector<TokenId>& tokens, bool spaced = false) {
  std::string body =
      spaced ? "{\"model\": \"m\", \"token_ids\": [" : "{\"model\":\"m\",\"token_ids\":[";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) body += spaced ? ", " : ",";
    body += std::to_string(tokens[i]);
  }
  body += "]}";
  return body;
}

struct Fixture {
  PrefixIndex index;
  LocalBackend backend{&index};
  std::unique_ptr<QueryServer> server;
  std::vector<std::vector<TokenId>> chains;  // kQueries stored chains of 2,048 tokens
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
      if (static_cast<size_t>(c) % 40 == 0 && x->chains.size() < kQueries)
        x->chains.push_back(e.token_ids);
      EventBatch batch;
      batch.dp_rank = 0;
      batch.events.push_back(std::move(e));
      (void)x->backend.Apply(ids[static_cast<size_t>(c) % kInstances], batch);
    }
    QueryServerOptions options;
    options.listen = false;
    auto started = QueryServer::Start(x->index, x->backend, options);
    x->server = std::move(*started);
    return x;
  }();
  return *f;
}

// The kQueries queries of `n` tokens and their /query bodies (see the header comment).
struct QuerySet {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::string> bodies;
  std::vector<std::string> spaced_bodies;  // the same as json.dumps writes them
};

const QuerySet& QueriesAt(size_t n) {
  static std::map<size_t, QuerySet> sets;
  auto [it, fresh] = sets.try_emplace(n);
  if (!fresh) return it->second;
  std::mt19937_64 rng(n);
  for (const std::vector<TokenId>& chain : GetFixture().chains) {
    std::vector<TokenId> q(chain.begin(), chain.begin() + static_cast<ptrdiff_t>(
                                                             std::min(n, chain.size())));
    while (q.size() < n) q.push_back(static_cast<TokenId>(rng() % 151936));
    it->second.bodies.push_back(BodyFor(q));
    it->second.spaced_bodies.push_back(BodyFor(q, true));
    it->second.tokens.push_back(std::move(q));
  }
  return it->second;
}

size_t TokensArg(const benchmark::State& state) { return static_cast<size_t>(state.range(0)); }

void ReportPercentiles(benchmark::State& state, std::vector<double>& ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p99_ns"] = ns[ns.size() * 99 / 100];
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
  ReportPercentiles(state, ns);
}

void BM_NlohmannParse(benchmark::State& state) {
  const QuerySet& qs = QueriesAt(TokensArg(state));
  state.counters["body_bytes"] = static_cast<double>(qs.bodies[0].size());
  Timed(state, [&](size_t q) {
    auto j = nlohmann::json::parse(qs.bodies[q]);
    benchmark::DoNotOptimize(j);
  });
}

void BM_ParseQueryRequest(benchmark::State& state) {
  const size_t n = TokensArg(state);
  const QuerySet& qs = QueriesAt(n);
  Timed(state, [&](size_t q) {
    auto r = ParseQueryRequest(qs.bodies[q]);
    if (!r.ok() || r->tokens.size() != n) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  });
}

void BM_ParseQueryRequest_Spaced(benchmark::State& state) {
  const size_t n = TokensArg(state);
  const QuerySet& qs = QueriesAt(n);
  state.counters["body_bytes"] = static_cast<double>(qs.spaced_bodies[0].size());
  Timed(state, [&](size_t q) {
    auto r = ParseQueryRequest(qs.spaced_bodies[q]);
    if (!r.ok() || r->tokens.size() != n) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  });
}

void BM_PrefixIndex_MatchTokens(benchmark::State& state) {
  const Fixture& f = GetFixture();
  const QuerySet& qs = QueriesAt(TokensArg(state));
  MatchQuery mq;
  mq.model = "m";
  state.counters["presences"] = static_cast<double>(f.index.stats().presences);
  Timed(state, [&](size_t q) {
    auto m = f.index.MatchTokens(mq, qs.tokens[q]);
    benchmark::DoNotOptimize(m);
  });
}

void BM_RenderQueryAnswer(benchmark::State& state) {
  const Fixture& f = GetFixture();
  const QuerySet& qs = QueriesAt(TokensArg(state));
  MatchQuery mq;
  mq.model = "m";
  std::vector<PrefixMatch> matches;
  for (const auto& q : qs.tokens) matches.push_back(*f.index.MatchTokens(mq, q));
  state.counters["answer_bytes"] =
      static_cast<double>(RenderQueryAnswer(matches[0], "default").size());
  Timed(state, [&](size_t q) {
    auto s = RenderQueryAnswer(matches[q], mq.tenant);
    benchmark::DoNotOptimize(s);
  });
}

void BM_QueryServer_Handle(benchmark::State& state) {
  const Fixture& f = GetFixture();
  const QuerySet& qs = QueriesAt(TokensArg(state));
  std::string out;
  std::string content_type;
  Timed(state, [&](size_t q) {
    const int code = f.server->Handle("POST", "/query", qs.bodies[q], out, content_type);
    if (code != 200) state.SkipWithError("query failed");
    benchmark::DoNotOptimize(out);
  });
}

// QueryService::Handle into one reused ServiceAnswer: the answer path as a transport that keeps
// its answer buffer per thread runs it (no allocation in steady state).
void BM_QueryService_Handle(benchmark::State& state) {
  Fixture& f = const_cast<Fixture&>(GetFixture());
  const QuerySet& qs = QueriesAt(TokensArg(state));
  static QueryService service(f.index, f.backend);
  ServiceAnswer answer;
  Timed(state, [&](size_t q) {
    service.Handle("POST", "/query", qs.bodies[q], answer);
    if (answer.status != 200) state.SkipWithError("query failed");
    benchmark::DoNotOptimize(answer.body);
  });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* fixed = std::getenv("QUERY_PATH_ITERATIONS");
  const int64_t iterations = fixed != nullptr ? std::atoll(fixed) : 0;
  const std::pair<const char*, void (*)(benchmark::State&)> benches[] = {
      {"BM_NlohmannParse", BM_NlohmannParse},
      {"BM_ParseQueryRequest", BM_ParseQueryRequest},
      {"BM_ParseQueryRequest_Spaced", BM_ParseQueryRequest_Spaced},
      {"BM_PrefixIndex_MatchTokens", BM_PrefixIndex_MatchTokens},
      {"BM_RenderQueryAnswer", BM_RenderQueryAnswer},
      {"BM_QueryServer_Handle", BM_QueryServer_Handle},
      {"BM_QueryService_Handle", BM_QueryService_Handle},
  };
  for (const auto& [name, fn] : benches) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Arg(512)->Arg(2048)->Arg(8192);
    if (iterations > 0) b->Iterations(iterations);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
