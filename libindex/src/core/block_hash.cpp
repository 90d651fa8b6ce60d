#include "kvindex/core/block_hash.h"

#include <bit>
#include <cstring>

// The xxHash functions are compiled inline here (same algorithm, same values as the shared
// library): a block hash is 64 bytes and a chain step 16, so the call through the library's PLT
// and its length dispatch cost about as much as the hashing (BM_PrefixIndex_Apply,
// docs/benchmarks.md "Index"). XXH_INLINE_ALL also gives XXH3_state_t.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvindex {
namespace {

// The chain hashes token ids and hashes as little-endian bytes; on a little-endian host the
// in-memory representation is already that, so no copy is needed.
static_assert(std::endian::native == std::endian::little,
              "kvindex hashes assume a little-endian host");

uint64_t HashPair(uint64_t first, uint64_t second, uint64_t seed) {
  uint64_t buffer[2] = {first, second};
  return XXH3_64bits_withSeed(buffer, sizeof(buffer), seed);
}

}  // namespace

LocalBlockHash HashBlockTokens(std::span<const TokenId> tokens, uint64_t seed) {
  return LocalBlockHash{XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), seed)};
}

LocalBlockHash MixMultimodalKeys(LocalBlockHash local, std::span<const MultimodalKey> keys,
                                 uint64_t seed) {
  if (keys.empty()) return local;
  XXH3_state_t state{};  // zeroed: GCC 12 sees the inlined reset read fields it then sets
  XXH3_64bits_reset_withSeed(&state, seed);
  for (const MultimodalKey& key : keys) {
    const uint32_t length = static_cast<uint32_t>(key.id.size());
    XXH3_64bits_update(&state, &length, sizeof(length));
    XXH3_64bits_update(&state, key.id.data(), key.id.size());
    XXH3_64bits_update(&state, &key.offset, sizeof(key.offset));
  }
  return LocalBlockHash{HashPair(local.value, XXH3_64bits_digest(&state), seed)};
}

PrefixHash ChainPrefixHash(std::optional<PrefixHash> parent, LocalBlockHash local, uint64_t seed) {
  if (!parent) return PrefixHash{local.value};
  return PrefixHash{HashPair(parent->value, local.value, seed)};
}

void AppendPrefixHashes(std::span<const TokenId> tokens, uint32_t block_size,
                        std::optional<PrefixHash> parent, uint64_t seed,
                        std::vector<PrefixHash>& out) {
  if (block_size == 0) return;
  const size_t blocks = tokens.size() / block_size;
  out.reserve(out.size() + blocks);
  for (size_t i = 0; i < blocks; ++i) {
    const LocalBlockHash local = HashBlockTokens(tokens.subspan(i * block_size, block_size), seed);
    parent = ChainPrefixHash(parent, local, seed);
    out.push_back(*parent);
  }
}

std::vector<PrefixHash> ChainPrefixHashes(std::span<const TokenId> tokens, uint32_t block_size,
                                          uint64_t seed) {
  std::vector<PrefixHash> out;
  AppendPrefixHashes(tokens, block_size, std::nullopt, seed, out);
  return out;
}

}  // namespace kvindex
