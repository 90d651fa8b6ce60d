// Engine hashes are per KV-cache group: vLLM gives a chunk the same block hash in every group of a
// hybrid model, so a BlockRemoved of one group must leave the other group's block alone, a child
// must find its parent in its own group, `block_hash` queries must resolve in the group they name,
// and a snapshot must keep the groups apart when it is loaded again. Expected answers by hand
// (block size 2: tokens 1..4 are two blocks).
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"
#include "kvindex/snapshot/snapshot.h"

#include "hybrid_test_util.h"

namespace kvindex {
namespace {

using test::AddHybrid;
using test::Longest;

EventBatch Stored(uint32_t group, std::vector<uint64_t> hashes, std::vector<TokenId> tokens,
                  std::optional<uint64_t> parent = std::nullopt) {
  BlockStored ev;
  for (uint64_t h : hashes) ev.block_hashes.push_back(EngineHash{h});
  if (parent) ev.parent = EngineHash{*parent};
  ev.token_ids = std::move(tokens);
  ev.scope.group = group;
  EventBatch b;
  b.events.emplace_back(std::move(ev));
  return b;
}

EventBatch Removed(uint32_t group, std::vector<uint64_t> hashes) {
  BlockRemoved ev;
  for (uint64_t h : hashes) ev.block_hashes.push_back(EngineHash{h});
  ev.scope.group = group;
  EventBatch b;
  b.events.emplace_back(std::move(ev));
  return b;
}

uint64_t ByTokens(const PrefixIndex& index, uint32_t group, const std::string& tokens) {
  return Longest(index, R"({"model": "m", "group": )" + std::to_string(group) +
                            R"(, "token_ids": [)" + tokens + "]}");
}

uint64_t ByHash(const PrefixIndex& index, uint32_t group, const std::string& hashes) {
  return Longest(index, R"({"model": "m", "group": )" + std::to_string(group) +
                            R"(, "block_hash": [)" + hashes + "]}");
}

void Apply(PrefixIndex& index, SourceId id, const EventBatch& batch) {
  Result<ApplyResult> r = index.Apply(id, batch);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->rejected == 0);
  CHECK(r->orphans == 0);
  CHECK(r->unmapped == 0);
}

// Both groups store tokens 1..4 under engine hashes 11, 12; group 1 goes on with 13 (tokens 5, 6)
// under its parent 12.
void StoreBothGroups(PrefixIndex& index, SourceId id) {
  Apply(index, id, Stored(0, {11, 12}, {1, 2, 3, 4}));
  Apply(index, id, Stored(1, {11, 12}, {1, 2, 3, 4}));
  Apply(index, id, Stored(1, {13}, {5, 6}, 12));
}

TEST_SUITE("index") {
  TEST_CASE("The same engine hash in two KV-cache groups names two blocks") {
    PrefixIndex index;
    const SourceId id = AddHybrid(index);
    StoreBothGroups(index, id);
    CHECK(ByTokens(index, 0, "1,2,3,4,5,6") == 4);
    CHECK(ByTokens(index, 1, "1,2,3,4,5,6") == 6);
    CHECK(ByHash(index, 0, "11,12,13") == 4);
    CHECK(ByHash(index, 1, "11,12,13") == 6);

    // Group 1 drops its blocks; group 0's stay (they were removed with them before).
    Apply(index, id, Removed(1, {12, 13}));
    CHECK(ByTokens(index, 0, "1,2,3,4") == 4);
    CHECK(ByTokens(index, 1, "1,2,3,4") == 2);
    CHECK(ByHash(index, 0, "11,12") == 4);
    CHECK(ByHash(index, 1, "11,12") == 2);
    // And the other way round.
    Apply(index, id, Removed(0, {11}));
    CHECK(ByTokens(index, 0, "1,2") == 0);
    CHECK(ByTokens(index, 1, "1,2") == 2);
  }

  TEST_CASE("A snapshot keeps the groups' engine hashes apart when loaded") {
    PrefixIndex original;
    const SourceId id = AddHybrid(original);
    StoreBothGroups(original, id);
    std::string bytes;
    Result<uint64_t> written =
        WriteSnapshot(original.CopyState(), {}, 1, [&](std::string_view c) {
          bytes.append(c);
          return true;
        });
    REQUIRE(written.ok());

    PrefixIndex restored;
    SnapshotReader reader("mem.kvsnap", &restored);
    REQUIRE(reader.Feed(bytes).ok());
    REQUIRE(reader.Finish().ok());
    CHECK(ByHash(restored, 0, "11,12,13") == 4);
    CHECK(ByHash(restored, 1, "11,12,13") == 6);
    // The snapshot defined the source first, so it has the same id; removals still find the
    // right group's blocks, and a child still finds its parent in its group.
    Apply(restored, id, Removed(1, {12}));
    CHECK(ByTokens(restored, 0, "1,2,3,4") == 4);
    CHECK(ByTokens(restored, 1, "1,2,3,4") == 2);
    Apply(restored, id, Stored(0, {14}, {7, 8}, 12));
    CHECK(ByTokens(restored, 0, "1,2,3,4,7,8") == 6);
  }
}

}  // namespace
}  // namespace kvindex
