// The /query answer path allocates nothing in steady state: QueryService::Handle into a reused
// ServiceAnswer, and each of its steps (ParseQueryRequest into a reused request, Match* into a
// reused PrefixMatch, RenderQueryAnswer into a reused string), once their buffers have grown.
// Every allocation of this test binary goes through the counting operator new below; the
// returning forms of the same calls are counted too, so the counter is seen to count.
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"
#include "kvindex/query/query_service.h"
#include "kvindex/query/server_backend.h"

namespace {

std::atomic<long> g_allocations{0};

void* Allocate(std::size_t size, std::size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else {
    p = std::aligned_alloc(align, (size + align - 1) / align * align);
  }
  return p;
}

void* AllocateOrThrow(std::size_t size, std::size_t align) {
  void* p = Allocate(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return AllocateOrThrow(size, 0); }
void* operator new[](std::size_t size) { return AllocateOrThrow(size, 0); }
void* operator new(std::size_t size, std::align_val_t align) {
  return AllocateOrThrow(size, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return AllocateOrThrow(size, static_cast<std::size_t>(align));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return Allocate(size, 0);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kvindex {
namespace {

constexpr uint32_t kBlockSize = 16;
constexpr int kInstances = 64;
// Longer than any short-string buffer: a copy of it would allocate.
const char* const kModel = "org-name/a-model-name-of-some-length-v2";

struct World {
  PrefixIndex index;
  LocalBackend backend{&index};
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::string> bodies;

  World() {
    std::mt19937_64 rng(11);
    std::vector<SourceId> ids;
    for (int i = 0; i < kInstances; ++i) {
      SourceConfig c;
      c.name = "instance-" + std::to_string(i);
      c.model = kModel;
      c.block_size = kBlockSize;
      c.dp_rank = i % 2;
      ids.push_back(*backend.AddSource(c));
    }
    for (int p = 0; p < 16; ++p) {
      std::vector<TokenId> tokens;
      const size_t n = 512 + static_cast<size_t>(p) * 97;  // different sizes, partial tails
      for (size_t t = 0; t < n; ++t) tokens.push_back(static_cast<TokenId>(rng() % 151936));
      BlockStored e;
      e.token_ids.assign(tokens.begin(), tokens.begin() + (n / kBlockSize) * kBlockSize);
      for (size_t b = 0; b < n / kBlockSize; ++b) e.block_hashes.push_back(EngineHash{rng()});
      e.tier = p % 3 == 0 ? Tier::Cpu() : Tier::Gpu();
      EventBatch batch;
      batch.dp_rank = p % 2;
      batch.events.push_back(std::move(e));
      REQUIRE(backend.Apply(ids[static_cast<size_t>(p * 5) % ids.size()], batch).ok());
      std::string body = std::string("{\"model\":\"") + kModel + "\", \"token_ids\": [";
      for (size_t t = 0; t < tokens.size(); ++t) {
        body += (t > 0 ? ", " : "") + std::to_string(tokens[t]);
      }
      body += "]}";
      bodies.push_back(std::move(body));
      prompts.push_back(std::move(tokens));
    }
  }
};

// Allocations made by `f`.
template <typename F>
long AllocationsOf(F&& f) {
  const long before = g_allocations.load();
  f();
  return g_allocations.load() - before;
}

TEST_SUITE("query_alloc") {

TEST_CASE("QueryService::Handle into a reused answer allocates nothing once warm") {
  World w;
  QueryService service(w.index, w.backend);
  ServiceAnswer answer;
  // Warm: every buffer grows to the largest body and answer (each body twice: the parser and the
  // request trade their id buffers at every parse, so both see each size).
  for (int round = 0; round < 2; ++round) {
    for (const std::string& body : w.bodies) {
      service.Handle("POST", "/query", body, answer);
      service.Handle("POST", "/query", body, answer);
    }
  }
  long steady = 0;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& body : w.bodies) {
      steady += AllocationsOf([&] { service.Handle("POST", "/query", body, answer); });
      REQUIRE(answer.status == 200);
      // The same bytes as the returning form, which builds everything afresh.
      const ServiceAnswer fresh = service.Handle("POST", "/query", body);
      CHECK(fresh.body == answer.body);
    }
  }
  CHECK(steady == 0);
  // The counter counts: the returning form allocates at least its answer.
  CHECK(AllocationsOf([&] { (void)service.Handle("POST", "/query", w.bodies[0]); }) > 0);
}

TEST_CASE("Parse, match and render into reused buffers allocate nothing once warm") {
  World w;
  QueryRequest request;
  PrefixMatch match;
  std::string out;
  auto step = [&](const std::string& body) {
    REQUIRE(ParseQueryRequest(body, request).ok());
    REQUIRE(MatchRequest(w.index, request, match).ok());
    RenderQueryAnswer(match, request.match.tenant, false, nullptr, out);
  };
  for (int round = 0; round < 2; ++round) {
    for (const std::string& body : w.bodies) step(body);
  }
  long parse = 0;
  long matching = 0;
  long render = 0;
  for (size_t i = 0; i < w.bodies.size(); ++i) {
    const std::string& body = w.bodies[i];
    parse += AllocationsOf([&] { REQUIRE(ParseQueryRequest(body, request).ok()); });
    CHECK(request.tokens == w.prompts[i]);
    matching += AllocationsOf([&] { REQUIRE(MatchRequest(w.index, request, match).ok()); });
    CHECK(match.instances.size() == static_cast<size_t>(kInstances));
    render += AllocationsOf([&] { RenderQueryAnswer(match, request.match.tenant, false, nullptr, out); });
    CHECK(out == RenderQueryAnswerWithDom(match, request.match.tenant));
  }
  CHECK(parse == 0);
  CHECK(matching == 0);
  CHECK(render == 0);
  // The returning forms allocate (the request's ids, the match's instances, the answer).
  CHECK(AllocationsOf([&] { (void)ParseQueryRequest(w.bodies[0]); }) > 0);
  CHECK(AllocationsOf([&] { (void)MatchRequest(w.index, request); }) > 0);
  CHECK(AllocationsOf([&] { (void)RenderQueryAnswer(match, request.match.tenant); }) > 0);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
