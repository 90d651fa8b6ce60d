// Block identities and kvindex's prefix hash.
//
// Two kinds of 64-bit block identity exist and are never mixed up (distinct types):
//  - EngineHash: opaque, whatever a publisher put in its events (vLLM, SGLang, Mooncake); only
//    meaningful within one source instance.
//  - PrefixHash: kvindex's own engine-independent key of a block, computed from the token ids of
//    the block and every block before it with the standard chain of Mooncake RFC #1527 and NVIDIA
//    Dynamo (docs/prefix-hash.md):
//        local_i = XXH3_64(tokens of block i as u32 little-endian, seed)
//        seq_0   = local_0
//        seq_i   = XXH3_64(le64(seq_{i-1}) || le64(local_i), seed)      seed = 1337 by default
//    Blocks carrying multimodal extra keys mix them into local_i (MixMultimodalKeys).
//
// Thread safety: pure functions and plain values.
#ifndef KVINDEX_CORE_BLOCK_HASH_H_
#define KVINDEX_CORE_BLOCK_HASH_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvindex {

// A token id as hashed: 32 bits, little-endian on the wire of the hash.
using TokenId = uint32_t;

// The seed of the standard chain (NVIDIA Dynamo's); a source may declare another (`hash-seed=`).
inline constexpr uint64_t kDefaultHashSeed = 1337;

// A block hash as a publisher sent it, normalised to unsigned 64 bits.
struct EngineHash {
  uint64_t value = 0;
  friend auto operator<=>(const EngineHash&, const EngineHash&) = default;
};

// The hash of one block's own tokens (local_i above), before chaining.
struct LocalBlockHash {
  uint64_t value = 0;
  friend auto operator<=>(const LocalBlockHash&, const LocalBlockHash&) = default;
};

// kvindex's chained key of a block: identifies the block and its whole prefix.
struct PrefixHash {
  uint64_t value = 0;
  friend auto operator<=>(const PrefixHash&, const PrefixHash&) = default;
};

// One multimodal item touching a block (vLLM `extra_keys`): its identifier (e.g. an image hash)
// and the token offset of the item relative to the block.
struct MultimodalKey {
  std::string id;
  int64_t offset = 0;
  friend bool operator==(const MultimodalKey&, const MultimodalKey&) = default;
};

// Returns local_i for one block's tokens. An empty span hashes like XXH3_64 of no bytes.
LocalBlockHash HashBlockTokens(std::span<const TokenId> tokens, uint64_t seed = kDefaultHashSeed);

// Returns `local` with the block's multimodal keys mixed in, so a token-only query never matches
// an image prompt: XXH3_64(le64(local) || le64(XXH3_64(keys, seed)), seed), where `keys` is, for
// each key in order, le32(id length) || id bytes || le64(offset). An empty `keys` returns `local`.
LocalBlockHash MixMultimodalKeys(LocalBlockHash local, std::span<const MultimodalKey> keys,
                                 uint64_t seed = kDefaultHashSeed);

// Returns seq_i from seq_{i-1} (nullopt for the first block) and local_i.
PrefixHash ChainPrefixHash(std::optional<PrefixHash> parent, LocalBlockHash local,
                           uint64_t seed = kDefaultHashSeed);

// Appends the prefix hashes of every *full* block of `tokens` (block_size tokens each; a partial
// tail is ignored) to `out`, continuing the chain after `parent` (nullopt = from the root).
// block_size 0 appends nothing. `out` is not cleared, so callers can reuse its capacity.
void AppendPrefixHashes(std::span<const TokenId> tokens, uint32_t block_size,
                        std::optional<PrefixHash> parent, uint64_t seed,
                        std::vector<PrefixHash>& out);

// Returns the prefix hashes of every full block of `tokens`, from the root.
std::vector<PrefixHash> ChainPrefixHashes(std::span<const TokenId> tokens, uint32_t block_size,
                                          uint64_t seed = kDefaultHashSeed);

}  // namespace kvindex

template <>
struct std::hash<kvindex::EngineHash> {
  size_t operator()(const kvindex::EngineHash& h) const noexcept { return h.value; }
};
template <>
struct std::hash<kvindex::PrefixHash> {
  size_t operator()(const kvindex::PrefixHash& h) const noexcept { return h.value; }
};

#endif  // KVINDEX_CORE_BLOCK_HASH_H_
