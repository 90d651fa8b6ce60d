// FlatTable (libindex/src/flat_table.h, the index's open-addressing table) against
// std::unordered_map over seeded random inserts, lookups and erases. Besides a well-mixed hash, two
// degenerate hashes put every key at the same home: the last bucket (every probe run goes into the
// tail past the nominal capacity and must append slots there) and the first bucket (one long run).
// After each operation the sizes agree; every few operations every key of the map is found at a
// slot holding it, and ForEach visits exactly the map's keys. The seed is printed on failure.
// The same runs with every next slot array built ahead on the helper thread (a threshold of 0
// bytes) check growth into a prepared array, through Insert / FindOrSlot and BuildGrown / Adopt.
#include "../libindex/src/index/flat_table.h"

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include <doctest/doctest.h>

namespace kvindex::internal {
namespace {

struct Slot {
  uint64_t key;
  uint32_t value;
};
constexpr uint32_t kEmpty = UINT32_MAX;

// kMode: how keys hash (0: mixed; 1: every key at the last bucket; 2: every key at the
// first bucket).
template <int kMode>
struct Traits {
  static uint64_t HashOf(uint64_t key) {
    if (kMode == 1) return (uint64_t{0xFFFFFFFF} << 32) | (key & 0xFFFFFFFF);
    if (kMode == 2) return key & 0xFFFFFFFF;
    return Mix64(key);
  }
  static bool Empty(const Slot& s) { return s.value == kEmpty; }
  static Slot MakeEmpty() { return {0, kEmpty}; }
  static uint64_t Hash(const Slot& s) { return HashOf(s.key); }
};

// Returns how many growths used an array built ahead.
template <int kMode>
size_t RunAgainstMap(uint64_t seed, int ops, uint64_t key_range,
                     size_t prepare_min_bytes = size_t{4} << 20,
                     size_t parallel_min_slots = size_t{1} << 20) {
  using Table = FlatTable<Slot, Traits<kMode>>;
  INFO("seed ", seed, " mode ", kMode, " prepare_min_bytes ", prepare_min_bytes,
       " parallel_min_slots ", parallel_min_slots);
  std::mt19937_64 rng(seed);
  Table table;
  table.set_prepare_min_bytes(prepare_min_bytes);
  table.set_parallel_min_slots(parallel_min_slots);
  std::unordered_map<uint64_t, uint32_t> map;
  auto match = [](uint64_t key) { return [key](const Slot& s) { return s.key == key; }; };
  for (int op = 0; op < ops; ++op) {
    const uint64_t key = rng() % key_range;
    const uint64_t h = Traits<kMode>::HashOf(key);
    const uint32_t value = static_cast<uint32_t>(rng() % 1000);
    switch (rng() % 4) {
      case 0:
      case 1: {  // insert or overwrite, the way PrefixIndex uses FindOrSlot / InsertAt
        const auto [pos, found] = table.FindOrSlot(h, match(key));
        REQUIRE(pos < table.capacity());
        if (found) {
          REQUIRE(map.count(key) == 1);
          table.at(pos).value = value;
        } else {
          REQUIRE(map.count(key) == 0);
          table.InsertAt(pos, {key, value});
        }
        map[key] = value;
        break;
      }
      case 2: {  // erase
        const size_t pos = table.Find(h, match(key));
        REQUIRE((pos != Table::kNotFound) == (map.count(key) == 1));
        if (pos != Table::kNotFound) {
          table.EraseAt(pos);
          map.erase(key);
        }
        break;
      }
      default: {  // lookup, or an insert through Insert() of an absent key
        const size_t pos = table.Find(h, match(key));
        auto it = map.find(key);
        REQUIRE((pos != Table::kNotFound) == (it != map.end()));
        if (it != map.end()) {
          REQUIRE(table.at(pos).value == it->second);
        } else {
          const size_t at = table.Insert(h, {key, value});
          REQUIRE(table.at(at).key == key);
          map[key] = value;
        }
        break;
      }
    }
    REQUIRE(table.size() == map.size());
    if (op % 64 == 0 || op + 1 == ops) {
      for (const auto& [k, v] : map) {
        const size_t pos = table.Find(Traits<kMode>::HashOf(k), match(k));
        REQUIRE(pos != Table::kNotFound);
        REQUIRE(table.at(pos).value == v);
      }
      size_t visited = 0;
      table.ForEach([&](const Slot& s) {
        ++visited;
        REQUIRE(map.count(s.key) == 1);
      });
      REQUIRE(visited == map.size());
    }
  }
  // Growth in two steps (BuildGrown / Adopt) keeps every member.
  while (!table.NeedsGrow()) {
    const uint64_t key = key_range + rng() % key_range;
    if (map.count(key) != 0) continue;
    table.Insert(Traits<kMode>::HashOf(key), {key, 7});
    map[key] = 7;
  }
  auto fresh = table.BuildGrown();
  table.Adopt(fresh);
  REQUIRE(table.size() == map.size());
  for (const auto& [k, v] : map) {
    const size_t pos = table.Find(Traits<kMode>::HashOf(k), match(k));
    REQUIRE(pos != Table::kNotFound);
    REQUIRE(table.at(pos).value == v);
  }
  return table.prepared_growths();
}

TEST_CASE("FlatTable agrees with std::unordered_map under a mixed hash") {
  for (uint64_t seed = 1; seed <= 6; ++seed) CHECK(RunAgainstMap<0>(seed, 20000, 3000) == 0);
}

TEST_CASE("FlatTable: growth into arrays built ahead on the helper thread") {
  size_t prepared = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) prepared += RunAgainstMap<0>(seed, 20000, 3000, 0);
  for (uint64_t seed = 1; seed <= 3; ++seed) prepared += RunAgainstMap<1>(seed, 3000, 200, 0);
  for (uint64_t seed = 1; seed <= 3; ++seed) prepared += RunAgainstMap<2>(seed, 3000, 200, 0);
  CHECK(prepared >= 12 * 5);  // each run grows several times
}

TEST_CASE("FlatTable: slots placed on two threads when a large table grows") {
  // From 32 slots on, every growth splits the old slots at an empty one and places the two
  // halves on two threads (members whose run crosses the split are placed afterwards).
  for (uint64_t seed = 1; seed <= 6; ++seed) RunAgainstMap<0>(seed, 20000, 3000, 0, 32);
  for (uint64_t seed = 7; seed <= 9; ++seed) {
    RunAgainstMap<0>(seed, 20000, 3000, size_t{4} << 20, 32);
  }
  for (uint64_t seed = 1; seed <= 3; ++seed) RunAgainstMap<1>(seed, 3000, 200, 0, 32);
  for (uint64_t seed = 1; seed <= 3; ++seed) RunAgainstMap<2>(seed, 3000, 200, 0, 32);
}

TEST_CASE("FlatTable: the bound between the two placing threads") {
  // Against a direct search: every 32-bit hash prefix t with an old home above p has a new home
  // at or above the bound; every one with an old home below p has a new home at or below it.
  std::mt19937_64 rng(3);
  auto home = [](uint64_t t, size_t cap) { return static_cast<size_t>((t * cap) >> 32); };
  for (int round = 0; round < 20000; ++round) {
    const size_t old_cap = 32 + rng() % (round % 2 == 0 ? 5000 : 50'000'000);
    const size_t new_cap = old_cap + old_cap / 2;
    const size_t p = rng() % old_cap;
    const size_t bound = FlatTable<Slot, Traits<0>>::SplitBound(p, old_cap, new_cap);
    INFO("old_cap ", old_cap, " p ", p, " bound ", bound);
    // The smallest t whose old home exceeds p, by bisection.
    uint64_t lo = 0, hi = uint64_t{1} << 32;
    while (lo < hi) {
      const uint64_t mid = (lo + hi) / 2;
      if (home(mid, old_cap) > p) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    if (lo < (uint64_t{1} << 32)) REQUIRE(home(lo, new_cap) >= bound);
    if (lo > 0) REQUIRE(home(lo - 1, new_cap) <= bound);  // old home p or below
    REQUIRE(bound <= new_cap);
  }
}

TEST_CASE("FlatTable: Reserve drops an array built ahead of another capacity") {
  // Below the threshold nothing is built ahead; a Reserve() to another capacity drops a prepared
  // array (it waits for it) and builds its own.
  using Table = FlatTable<Slot, Traits<0>>;
  Table small;
  for (uint64_t k = 0; k < 5000; ++k) small.Insert(Traits<0>::HashOf(k), {k, 1});
  CHECK(small.prepared_growths() == 0);
  Table table;
  table.set_prepare_min_bytes(0);
  uint64_t k = 0;
  for (; k < 1000; ++k) table.Insert(Traits<0>::HashOf(k), {k, 2});
  while (!table.NeedsGrow()) {
    table.Insert(Traits<0>::HashOf(k), {k, 2});
    ++k;
  }
  const size_t before = table.prepared_growths();
  CHECK(before > 0);
  table.Reserve(table.capacity() * 3);
  CHECK(table.prepared_growths() == before);
  for (uint64_t j = 0; j < k; ++j) {
    const size_t pos = table.Find(Traits<0>::HashOf(j), [j](const Slot& s) { return s.key == j; });
    REQUIRE(pos != Table::kNotFound);
  }
  for (uint64_t j = k; j < 4 * k; ++j) table.Insert(Traits<0>::HashOf(j), {j, 3});
  CHECK(table.size() == 4 * k);
  CHECK(table.prepared_growths() > before);
}

TEST_CASE("FlatTable: runs at the last bucket continue into an appended tail") {
  for (uint64_t seed = 1; seed <= 4; ++seed) RunAgainstMap<1>(seed, 3000, 200);
}

TEST_CASE("FlatTable: one long run from the first bucket") {
  for (uint64_t seed = 1; seed <= 4; ++seed) RunAgainstMap<2>(seed, 3000, 200);
}

TEST_CASE(
    "FlatTable: an erase in a tail run moves back only members whose home is at or before "
    "the hole") {
  // Every key at the last bucket: the run starts at capacity - 1 and spills into the tail.
  using Table = FlatTable<Slot, Traits<1>>;
  Table table;
  auto match = [](uint64_t key) { return [key](const Slot& s) { return s.key == key; }; };
  for (uint64_t k = 0; k < 10; ++k)
    table.Insert(Traits<1>::HashOf(k), {k, static_cast<uint32_t>(k)});
  const size_t first = table.Find(Traits<1>::HashOf(0), match(0));
  REQUIRE(first != Table::kNotFound);
  table.EraseAt(first);
  for (uint64_t k = 1; k < 10; ++k) {
    const size_t pos = table.Find(Traits<1>::HashOf(k), match(k));
    REQUIRE(pos != Table::kNotFound);
    CHECK(pos == first + k - 1);  // shifted back by one, in order
  }
  CHECK(table.Find(Traits<1>::HashOf(0), match(0)) == Table::kNotFound);
}

}  // namespace
}  // namespace kvindex::internal
