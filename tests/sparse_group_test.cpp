// Sparse KV-cache groups (vLLM block_offsets and skipped context) end to end: the oracle's vector of what
// `publish-fake --format vllm-hybrid-sparse` writes (tests/data/event_codec_vectors.json) decoded,
// applied to the index and queried. A chunk the group did not hash ends every walk: a hashed chunk
// after it never extends the prefix. Expected answers are worked out by hand (block size 2).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/block_hash.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"

#include "codec_test_util.h"
#include "hybrid_test_util.h"
#include "test_util.h"

namespace kvindex {
namespace {

using test::AddHybrid;
using test::Longest;

// The decoded oracle vector whose name starts with `prefix`.
EventBatch OracleVector(const std::string& prefix) {
  const auto doc =
      nlohmann::json::parse(test::ReadFile(test::TestDataDir() / "event_codec_vectors.json"));
  for (const auto& v : doc["vectors"]) {
    if (v["name"].get<std::string>().rfind(prefix, 0) != 0) continue;
    auto batch = DecodeEventBatch(test::FromHex(v["payload_hex"].get<std::string>()));
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    REQUIRE(batch->errors.empty());
    return *batch;
  }
  FAIL("no vector " << prefix);
  return {};
}
EventBatch SparseVector() { return OracleVector("vllm hybrid sparse map era"); }

std::string Join(const std::vector<uint64_t>& values) {
  std::string out;
  for (uint64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

TEST_CASE("A sparse group's walk stops at the first chunk it did not hash") {
  PrefixIndex index;
  const SourceId id = AddHybrid(index);
  Result<ApplyResult> applied = index.Apply(id, SparseVector());
  REQUIRE(applied.ok());
  CHECK(applied->rejected == 0);
  CHECK(applied->orphans == 0);

  // After the batch, group 0 holds chunks 0-4 of tokens 1..10; group 1 holds chunks 0, 1, 3, 4
  // (never chunk 2).
  const std::string tokens = R"("token_ids": [1,2,3,4,5,6,7,8,9,10])";
  CHECK(Longest(index, R"({"model": "m", )" + tokens + "}") == 10);
  CHECK(Longest(index, R"({"model": "m", "group": 1, )" + tokens + "}") == 4);
  // Cut at the prefix both groups hold, the answers agree.
  CHECK(Longest(index, R"({"model": "m", "token_ids": [1,2,3,4]})") == 4);
  CHECK(Longest(index, R"({"model": "m", "group": 1, "token_ids": [1,2,3,4]})") == 4);

  // By prefix hashes: chunks 3 and 4 are held under the chain of every chunk before them (the
  // same keys as group 0's), yet the prompt's chain stops at chunk 2.
  std::vector<uint64_t> chain;
  for (PrefixHash h : ChainPrefixHashes(std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2)) {
    chain.push_back(h.value);
  }
  REQUIRE(chain.size() == 5);
  CHECK(Longest(index, R"({"model": "m", "group": 1, "seq_hashes": [)" + Join(chain) + "]}") == 4);
  CHECK(Longest(index, R"({"model": "m", "seq_hashes": [)" + Join(chain) + "]}") == 10);
  CHECK(Longest(index, R"({"model": "m", "group": 1, "seq_hashes": [)" +
                           Join({chain[3], chain[4]}) + "]}") == 4);

  // By engine hashes: the group's hashes of the prompt, one per chunk in order. The group has no
  // hash for chunk 2 (a group-0 hash is another scope), so the walk stops there.
  CHECK(Longest(index, R"({"model": "m", "group": 1, "block_hash": [911,912,903,914,915]})") == 4);
  CHECK(Longest(index, R"({"model": "m", "block_hash": [901,902,903,904,905]})") == 10);
}

// Group 1's blocks of tokens `first`.. (block size 2) after `parent`, as one dense event.
EventBatch Dense(std::vector<uint64_t> hashes, std::optional<uint64_t> parent,
                 std::vector<TokenId> tokens, std::optional<std::string> salt = std::nullopt,
                 std::vector<std::vector<MultimodalKey>> multimodal = {}) {
  BlockStored s;
  for (uint64_t h : hashes) s.block_hashes.push_back(EngineHash{h});
  if (parent) s.parent = EngineHash{*parent};
  s.token_ids = std::move(tokens);
  s.scope.block_size = 2;
  s.scope.group = 1;
  s.scope.salt = std::move(salt);
  s.multimodal = std::move(multimodal);
  EventBatch b;
  b.events.push_back(std::move(s));
  return b;
}

TEST_CASE("Skipped context: a run after unannounced chunks is keyed by the whole chain") {
  PrefixIndex index;
  const SourceId id = AddHybrid(index);
  // Group 1 holds chunk 0 (921) and chunk 3 (924, after skipped chunks 1-2) of tokens 1..8.
  Result<ApplyResult> applied = index.Apply(id, OracleVector("vllm skipped context: a sparse"));
  REQUIRE(applied.ok());
  CHECK(applied->rejected == 0);
  CHECK(applied->orphans == 0);
  const std::string tokens = R"("token_ids": [1,2,3,4,5,6,7,8])";
  CHECK(Longest(index, R"({"model": "m", "group": 1, )" + tokens + "}") == 2);
  // Chunks 1-2 announced later (another request): chunk 3 was keyed under the same chain.
  REQUIRE(index.Apply(id, Dense({922, 923}, 921, {3, 4, 5, 6})).ok());
  CHECK(Longest(index, R"({"model": "m", "group": 1, )" + tokens + "}") == 8);
  CHECK(Longest(index, R"({"model": "m", "group": 1, "block_hash": [921,922,923,924]})") == 8);
}

TEST_CASE("Skipped context from the root: the skipped chunks' salt and image keys") {
  PrefixIndex index;
  const SourceId id = AddHybrid(index);
  // Group 1 holds chunks 2-3 (933, 934) after skipped chunks 0-1; chunk 1 holds image "img"
  // from offset 1; the request's salt is "tenant".
  REQUIRE(index.Apply(id, OracleVector("vllm skipped context from the root")).ok());
  const std::vector<MultimodalKey> image = {{"img", 1}};
  REQUIRE(index.Apply(id, Dense({931, 932}, std::nullopt, {1, 2, 3, 4}, "tenant", {{}, image}))
              .ok());
  // The prompt's prefix hashes with the image mixed into chunk 1, worked out with the public
  // hash functions: all four chunks match only when the skipped chunk's image was kept.
  const uint64_t seed = kDefaultHashSeed;
  auto chain = [&](bool with_image) {
    std::vector<uint64_t> out;
    std::optional<PrefixHash> prev;
    const std::vector<TokenId> all = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t c = 0; c < 4; ++c) {
      LocalBlockHash local = HashBlockTokens(std::span(all).subspan(c * 2, 2), seed);
      if (c == 1 && with_image) local = MixMultimodalKeys(local, image, seed);
      prev = ChainPrefixHash(prev, local, seed);
      out.push_back(prev->value);
    }
    return out;
  };
  const std::string salted = R"({"model": "m", "group": 1, "cache_salt": "tenant", )";
  CHECK(Longest(index, salted + R"("seq_hashes": [)" + Join(chain(true)) + "]}") == 8);
  CHECK(Longest(index, salted + R"("seq_hashes": [)" + Join(chain(false)) + "]}") == 2);
  CHECK(Longest(index, salted + R"("block_hash": [931,932,933,934]})") == 8);
  CHECK(Longest(index, R"({"model": "m", "group": 1, "block_hash": [931,932,933,934]})") == 0);
}

}  // namespace
}  // namespace kvindex
