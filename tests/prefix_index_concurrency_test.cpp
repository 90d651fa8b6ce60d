// Concurrency stress: one writer applies a seeded event stream while reader threads query and read
// statistics (docs/architecture.md "Index concurrency"). Each answer must be internally consistent,
// and the final index must answer exactly like one built from the same stream on a single thread
// (no lost or torn updates). scripts/check-all.sh runs it under TSan (clang,
// -DKVINDEX_SANITIZE=thread), which
// reports any data race between the writer and the readers.
#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/prefix_index.h"
#include "prefix_index_builders.h"

namespace kvindex {
namespace {

constexpr uint32_t kBlockSize = 4;
constexpr int kInstances = 6;

struct Stream {
  std::vector<std::pair<int, EventBatch>> batches;  // (source index, batch)
  std::vector<std::vector<TokenId>> prompts;
};

// Prompts share prefixes (8 roots x 4 blocks each, random tails) so queries hit.
Stream MakeStream(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  Stream s;
  for (int p = 0; p < 64; ++p) {
    std::vector<TokenId> t;
    for (int i = 0; i < 16; ++i) t.push_back(static_cast<TokenId>((p % 8) * 100 + i));
    const int tail = 4 + static_cast<int>(rng() % 12);
    for (int i = 0; i < tail * static_cast<int>(kBlockSize); ++i) {
      t.push_back(static_cast<TokenId>(rng() % 5000));
    }
    s.prompts.push_back(std::move(t));
  }
  auto engine_hash = [](const std::vector<TokenId>& t, size_t blocks) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < blocks * kBlockSize; ++i) h = (h ^ t[i]) * 0x100000001b3ULL;
    return h;
  };
  for (int i = 0; i < count; ++i) {
    const int source = static_cast<int>(rng() % (kInstances * 2));
    const auto& prompt = s.prompts[rng() % s.prompts.size()];
    const size_t blocks = prompt.size() / kBlockSize;
    const uint64_t op = rng() % 100;
    EventBatch b;
    b.dp_rank = source % 2;
    if (op < 70) {
      std::vector<uint64_t> hashes;
      for (size_t k = 1; k <= blocks; ++k) hashes.push_back(engine_hash(prompt, k));
      b.events.push_back(test::Stored(hashes, std::nullopt, prompt,
                                      rng() % 4 == 0 ? Tier::Cpu() : Tier::Gpu()));
    } else if (op < 97) {
      const size_t from = rng() % blocks;
      std::vector<uint64_t> hashes;
      for (size_t k = from + 1; k <= blocks; ++k) hashes.push_back(engine_hash(prompt, k));
      b.events.push_back(test::Removed(hashes));
    } else {
      b.events.push_back(AllCleared{});
    }
    s.batches.emplace_back(source, std::move(b));
  }
  return s;
}

std::vector<SourceId> AddSources(PrefixIndex& index) {
  std::vector<SourceId> ids;
  for (int i = 0; i < kInstances * 2; ++i) {
    SourceConfig c;
    c.name = "inst-" + std::to_string(i / 2);
    c.model = "m";
    c.block_size = kBlockSize;
    c.dp_rank = i % 2;
    auto id = index.AddSource(c);
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  return ids;
}

// Returns the number of inconsistent answers seen.
int QueryUntil(const PrefixIndex& index, const Stream& s, const std::atomic<bool>& stop,
               uint64_t seed) {
  std::mt19937_64 rng(seed);
  MatchQuery q;
  q.model = "m";
  int bad = 0;
  int rounds = 0;
  while (!stop.load(std::memory_order_acquire) || rounds < 10) {
    ++rounds;
    const auto& prompt = s.prompts[rng() % s.prompts.size()];
    auto m = index.MatchTokens(q, prompt);
    if (!m.ok()) {
      ++bad;
      continue;
    }
    for (const InstanceMatch& im : m->instances) {
      const uint64_t full = prompt.size() / kBlockSize * kBlockSize;
      if (im.longest_matched > full || im.gpu > im.longest_matched ||
          im.cpu > im.longest_matched || im.longest_matched % kBlockSize != 0) {
        ++bad;
      }
      for (const DpTokens& d : im.dp) {
        if (d.tokens > im.longest_matched) ++bad;
      }
    }
    if (m->instances.size() != kInstances) ++bad;
    if (rounds % 16 == 0) {
      const IndexStats st = index.stats();
      if (st.presences < st.blocks) ++bad;
    }
  }
  return bad;
}

TEST_SUITE("prefix_index") {
  TEST_CASE("Concurrency: one writer and three readers, final state equals a sequential build") {
    const Stream s = MakeStream(7, 6000);
    PrefixIndex live;
    const auto live_ids = AddSources(live);
    std::atomic<bool> stop{false};
    std::vector<int> bad(3, 0);
    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r) {
      readers.emplace_back([&, r] { bad[static_cast<size_t>(r)] = QueryUntil(live, s, stop, 100 + r); });
    }
    int apply_failures = 0;
    for (const auto& [source, batch] : s.batches) {
      if (!live.Apply(live_ids[static_cast<size_t>(source)], batch).ok()) ++apply_failures;
    }
    stop.store(true, std::memory_order_release);
    for (auto& t : readers) t.join();
    CHECK(apply_failures == 0);
    for (int b : bad) CHECK(b == 0);

    PrefixIndex sequential;
    const auto seq_ids = AddSources(sequential);
    for (const auto& [source, batch] : s.batches) {
      REQUIRE(sequential.Apply(seq_ids[static_cast<size_t>(source)], batch).ok());
    }
    MatchQuery q;
    q.model = "m";
    for (const auto& prompt : s.prompts) {
      auto a = live.MatchTokens(q, prompt);
      auto b = sequential.MatchTokens(q, prompt);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(a->instances.size() == b->instances.size());
      for (size_t i = 0; i < a->instances.size(); ++i) {
        CHECK(a->instances[i].longest_matched == b->instances[i].longest_matched);
        CHECK(a->instances[i].gpu == b->instances[i].gpu);
        CHECK(a->instances[i].cpu == b->instances[i].cpu);
        CHECK(a->instances[i].dp == b->instances[i].dp);
      }
    }
    CHECK(live.stats().presences == sequential.stats().presences);
  }

  TEST_CASE("Concurrency: queries touching blocks race with max_blocks eviction") {
    const Stream s = MakeStream(11, 6000);
    PrefixIndex live(IndexOptions{.max_blocks = 500});
    const auto ids = AddSources(live);
    std::atomic<bool> stop{false};
    std::vector<int> bad(2, 0);
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&, r] { bad[static_cast<size_t>(r)] = QueryUntil(live, s, stop, 200 + r); });
    }
    for (const auto& [source, batch] : s.batches) {
      REQUIRE(live.Apply(ids[static_cast<size_t>(source)], batch).ok());
    }
    stop.store(true, std::memory_order_release);
    for (auto& t : readers) t.join();
    for (int b : bad) CHECK(b == 0);
    const IndexStats st = live.stats();
    CHECK(st.blocks <= 500);
    CHECK(st.evictions > 0);
  }

  TEST_CASE("Concurrency: queries while the index grows across record chunks") {
    // Block records come in chunks of 65,536, mapped ahead by a helper thread and taken over by
    // the writer with the exclusive lock released; tables whose next slot array reaches 4 MiB
    // have it built ahead too (docs/architecture.md, "Index concurrency"). 6 x 65,536 fresh
    // 1-block stores cross six chunk boundaries and take the block table (8-byte slots) and the
    // engine map (12) past that size while readers query prompts stored before them: each answer
    // must still hold the whole prompt, and the block count a reader sees never goes down.
    PrefixIndex index;
    const auto ids = AddSources(index);
    const Stream s = MakeStream(11, 0);
    constexpr size_t kHeld = 8;
    for (size_t p = 0; p < kHeld; ++p) {
      const auto& prompt = s.prompts[p];
      std::vector<uint64_t> hashes;
      for (size_t k = 1; k <= prompt.size() / kBlockSize; ++k) hashes.push_back((p << 32) | k);
      EventBatch b;
      b.events.push_back(test::Stored(hashes, std::nullopt, prompt));
      REQUIRE(index.Apply(ids[0], b).ok());
    }
    const uint64_t held_blocks = index.stats().blocks;
    std::atomic<bool> stop{false};
    std::vector<int> bad(2, 0);
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&, r] {
        MatchQuery q;
        q.model = "m";
        uint64_t last_blocks = 0;
        for (uint64_t round = 0; !stop.load(std::memory_order_acquire) || round < 10; ++round) {
          const auto& prompt = s.prompts[(round + static_cast<uint64_t>(r)) % kHeld];
          auto m = index.MatchTokens(q, prompt);
          uint64_t longest = 0;
          if (m.ok()) {
            for (const InstanceMatch& im : m->instances)
              longest = std::max(longest, im.longest_matched);
          }
          if (!m.ok() || longest != prompt.size() / kBlockSize * kBlockSize)
            ++bad[static_cast<size_t>(r)];
          const uint64_t blocks = index.stats().blocks;
          if (blocks < last_blocks) ++bad[static_cast<size_t>(r)];
          last_blocks = blocks;
        }
      });
    }
    constexpr uint32_t kFresh = 6 * 65536;
    constexpr uint32_t kPerBatch = 50;
    TokenId token = 1u << 20;  // above every prompt's token ids: nothing fresh matches a prompt
    int apply_failures = 0;
    for (uint32_t done = 0; done < kFresh; done += kPerBatch) {
      EventBatch b;
      for (uint32_t e = 0; e < kPerBatch && done + e < kFresh; ++e) {
        std::vector<TokenId> tokens;
        for (uint32_t t = 0; t < kBlockSize; ++t) tokens.push_back(token++);
        b.events.push_back(test::Stored({(uint64_t{1} << 63) | (done + e)}, std::nullopt, tokens));
      }
      if (!index.Apply(ids[2], b).ok()) ++apply_failures;
    }
    stop.store(true, std::memory_order_release);
    for (auto& t : readers) t.join();
    CHECK(apply_failures == 0);
    for (int b : bad) CHECK(b == 0);
    CHECK(index.stats().blocks == held_blocks + kFresh);
  }
}

}  // namespace
}  // namespace kvindex
