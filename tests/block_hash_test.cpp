#include "kvindex/core/block_hash.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kvindex {
namespace {

TEST_SUITE("block_hash") {

TEST_CASE("Prefix hash chain matches the independent python3-xxhash vectors") {
  // tests/data/prefix_hash_vectors.json is produced by prefix_hash_vectors.py from the definition
  // alone; the oracle_prefix_hash_vectors ctest keeps the two in sync.
  const auto vectors = nlohmann::json::parse(test::ReadFile(test::TestDataDir() / "prefix_hash_vectors.json"));
  REQUIRE(vectors["cases"].size() >= 10);
  for (const auto& c : vectors["cases"]) {
    CAPTURE(c["name"].get<std::string>());
    const auto tokens = c["tokens"].get<std::vector<TokenId>>();
    const auto block_size = c["block_size"].get<uint32_t>();
    const auto seed = c["seed"].get<uint64_t>();
    const auto expected_prefix = c["prefix_hashes"].get<std::vector<uint64_t>>();
    const auto expected_local = c["local_hashes"].get<std::vector<uint64_t>>();

    // The chain step by step, with multimodal keys where the case has them.
    std::optional<PrefixHash> parent;
    std::vector<uint64_t> prefix;
    std::vector<uint64_t> locals;
    for (size_t i = 0; block_size != 0 && i < tokens.size() / block_size; ++i) {
      LocalBlockHash local = HashBlockTokens(
          std::span<const TokenId>(tokens).subspan(i * block_size, block_size), seed);
      if (c.contains("multimodal") && c["multimodal"].contains(std::to_string(i))) {
        std::vector<MultimodalKey> keys;
        for (const auto& k : c["multimodal"][std::to_string(i)]) {
          keys.push_back({k[0].get<std::string>(), k[1].get<int64_t>()});
        }
        local = MixMultimodalKeys(local, keys, seed);
      }
      locals.push_back(local.value);
      parent = ChainPrefixHash(parent, local, seed);
      prefix.push_back(parent->value);
    }
    CHECK(locals == expected_local);
    CHECK(prefix == expected_prefix);

    // The bulk function agrees for token-only cases.
    if (!c.contains("multimodal")) {
      std::vector<uint64_t> bulk;
      for (PrefixHash h : ChainPrefixHashes(tokens, block_size, seed)) bulk.push_back(h.value);
      CHECK(bulk == expected_prefix);
    }
  }
}

TEST_CASE("Only full blocks are hashed") {
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6, 7};
  CHECK(ChainPrefixHashes(tokens, 4).size() == 1);
  CHECK(ChainPrefixHashes(tokens, 8).empty());
  CHECK(ChainPrefixHashes(tokens, 0).empty());
  CHECK(ChainPrefixHashes({}, 4).empty());
}

TEST_CASE("The chain depends on the seed and on every earlier block") {
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<TokenId> b = {9, 2, 3, 4, 5, 6, 7, 8};
  CHECK(ChainPrefixHashes(a, 4, 1337)[1] != ChainPrefixHashes(b, 4, 1337)[1]);
  CHECK(ChainPrefixHashes(a, 4, 1337)[0] != ChainPrefixHashes(a, 4, 0)[0]);
  // The second block alone, as a root, differs from the same block after a parent.
  const std::vector<TokenId> second = {5, 6, 7, 8};
  CHECK(ChainPrefixHashes(second, 4)[0] != ChainPrefixHashes(a, 4)[1]);
}

TEST_CASE("AppendPrefixHashes continues a chain and keeps what the vector held") {
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto whole = ChainPrefixHashes(tokens, 4);
  std::vector<PrefixHash> out = {PrefixHash{99}};
  AppendPrefixHashes(std::span<const TokenId>(tokens).subspan(4), 4, whole[0], kDefaultHashSeed, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == PrefixHash{99});
  CHECK(out[1] == whole[1]);
}

TEST_CASE("Multimodal keys change the block's hash; no keys leave it unchanged") {
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const LocalBlockHash plain = HashBlockTokens(tokens);
  CHECK(MixMultimodalKeys(plain, {}) == plain);
  const std::vector<MultimodalKey> image = {{"img-0001", 0}};
  const std::vector<MultimodalKey> other_image = {{"img-0002", 0}};
  const std::vector<MultimodalKey> shifted = {{"img-0001", 1}};
  CHECK(MixMultimodalKeys(plain, image) != plain);
  CHECK(MixMultimodalKeys(plain, image) != MixMultimodalKeys(plain, other_image));
  CHECK(MixMultimodalKeys(plain, image) != MixMultimodalKeys(plain, shifted));
}

TEST_CASE("Engine and prefix hashes are distinct types") {
  static_assert(!std::is_convertible_v<EngineHash, PrefixHash>);
  static_assert(!std::is_convertible_v<PrefixHash, EngineHash>);
  static_assert(!std::is_convertible_v<uint64_t, EngineHash>);
  CHECK(EngineHash{1} < EngineHash{2});
  CHECK(std::hash<PrefixHash>()(PrefixHash{5}) == std::hash<PrefixHash>()(PrefixHash{5}));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
