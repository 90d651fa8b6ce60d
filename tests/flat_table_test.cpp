// FlatTable (libindex/src/flat_table.h, the index's open-addressing table) against
// std::unordered_map over seeded random inserts, lookups and erases. Besides a well-mixed hash, two
// degenerate hashes put every key at the same home: the last bucket (every probe run goes into the
// tail past the nominal capacity and must append slots there) and the first bucket (one long run).
// After each operation the sizes agree; every few operations every key of the map is found at a
// slot holding it, and ForEach visits exactly the map's keys. The seed is printed on failure.
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

template <int kMode>
void RunAgainstMap(uint64_t seed, int ops, uint64_t key_range) {
  using Table = FlatTable<Slot, Traits<kMode>>;
  INFO("seed ", seed, " mode ", kMode);
  std::mt19937_64 rng(seed);
  Table table;
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
}

TEST_CASE("FlatTable agrees with std::unordered_map under a mixed hash") {
  for (uint64_t seed = 1; seed <= 6; ++seed) RunAgainstMap<0>(seed, 20000, 3000);
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
