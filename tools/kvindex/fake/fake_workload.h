// publish-fake's workloads: where prompts come from (a seeded synthetic mix of shared prefixes
// with Zipf popularity, or a Mooncake / Bailian request trace) and FakeCache, the per-source
// engine cache that turns prompts into the KV events an engine would publish (stores of the
// missing blocks, removals of LRU victims when the capacity is reached).
//
// Thread safety: none (one thread).
#ifndef KVINDEX_TOOLS_FAKE_FAKE_WORKLOAD_H_
#define KVINDEX_TOOLS_FAKE_FAKE_WORKLOAD_H_

#include <cstdint>
#include <list>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

namespace kvindex::cli {

// How a FakeCache spells its events (depends on the wire format).
struct FakeEventStyle {
  uint32_t block_size = 16;
  std::optional<Tier> tier;             // nullopt: no medium sent (vllm-v0.9, early SGLang)
  std::optional<std::string> model;     // set on every event (Mooncake formats carry it)
  bool store_objects = false;           // Mooncake seed era: one object per block, removal by key
  // SGLang EAGLE: token ids go out as bigram pairs, so a block is stored only when the prompt has
  // the token after it (wire.eagle_next).
  bool eagle = false;
  // A hybrid model (vllm-hybrid): every event of the full-attention group 0 is mirrored by one of
  // a sliding-window group 1, under that group's own engine hashes.
  bool hybrid = false;
  // vllm-hybrid-sparse: group 1 is a Mamba group that keeps state only at some chunks, and its
  // events announce them with block_offsets (kSparseSkipEvery).
  bool sparse = false;
  // vllm-hybrid-skipped: the same Mamba group, announcing each run of consecutive chunks it keeps
  // as its own event, with the chunks before it as skipped context (event.h).
  bool skipped_context = false;
};

// vllm-hybrid-sparse's Mamba group: group 1. It hashes every chunk of a stored run except each
// kSparseSkipEvery-th chunk of the prompt (chunks 2, 5, 8, ...), and always the run's last chunk
// (the next event continues from it).
inline constexpr uint32_t kSparseGroup = 1;
inline constexpr size_t kSparseSkipEvery = 3;

// The engine hash publish-fake publishes for a block with prefix hash `prefix`: a fixed mix of it,
// so engine and prefix hashes differ (as they do for real engines) but every instance agrees.
EngineHash FakeEngineHash(PrefixHash prefix);

// Token ids of trace hash id `hash_id`, block position `block_size` tokens: hash_id * block_size + j
// (mod 2^31), so equal hash ids give equal blocks and distinct ids distinct blocks.
std::vector<TokenId> TraceBlockTokens(uint64_t hash_id, uint32_t block_size);

// One source's engine cache: an LRU of at most `capacity` blocks.
class FakeCache {
 public:
  FakeCache(uint32_t capacity, FakeEventStyle style) : capacity_(capacity), style_(std::move(style)) {}

  // Serves one prompt (its full blocks): evicts LRU victims for the missing blocks (one
  // BlockRemoved, or one StoreUpdate per object), stores each run of missing blocks (one
  // BlockStored per run, parent = the block before it), then refreshes the prompt's blocks (the
  // root last, so tails are evicted first, as vLLM does). Appends the events to `out`.
  void Serve(const std::vector<TokenId>& tokens, std::vector<Event>& out);
  // Forgets everything (an engine restart).
  void Reset();
  size_t size() const { return lru_.size(); }

 private:
  struct Entry {
    EngineHash engine;
    std::list<uint64_t>::iterator pos;
    bool sparse_held = false;  // vllm-hybrid-sparse/-skipped: the Mamba group holds this chunk too
  };
  // vllm-hybrid-sparse/-skipped: the Mamba group's mirror of group 0's run [from, to) of `chain`
  // (one event, or one per run of kept chunks), appended to `out`; `held` says which chunks the
  // group holds (updated for the chunks the events hash).
  void SparseMirror(const std::vector<TokenId>& tokens, const std::vector<PrefixHash>& chain,
                    size_t from, size_t to, std::vector<bool>& held, std::vector<Event>& out) const;
  // A Mamba-group event whose tokens start after chunk `begin - 1` (its parent) and end at `end`.
  BlockStored MambaEvent(const std::vector<TokenId>& tokens, const std::vector<PrefixHash>& chain,
                         size_t begin, size_t end) const;
  uint32_t capacity_;
  FakeEventStyle style_;
  std::list<uint64_t> lru_;  // prefix hashes, most recent first
  std::unordered_map<uint64_t, Entry> entries_;
};

// Knobs of `--synthetic`.
struct SyntheticOptions {
  uint32_t block_size = 16;
  uint32_t prompt_blocks = 8;   // full blocks per prompt
  uint32_t prefix_blocks = 4;   // of which shared-prefix blocks
  uint32_t prefixes = 16;       // distinct shared prefixes
  double zipf = 1.0;            // popularity exponent of the prefixes (0 = uniform)
  uint32_t vocab = 32000;       // token ids are drawn from [0, vocab)
  uint64_t seed = 1;
};

// Seeded synthetic prompts: a shared prefix picked by Zipf popularity, then unique blocks.
class SyntheticPrompts {
 public:
  SyntheticPrompts(SyntheticOptions options, size_t sources);
  std::vector<TokenId> Next(size_t source);
  // The shared prefix `i` (prefix_blocks blocks).
  const std::vector<TokenId>& prefix(size_t i) const { return prefixes_[i]; }
  size_t prefix_count() const { return prefixes_.size(); }

 private:
  SyntheticOptions options_;
  std::vector<std::vector<TokenId>> prefixes_;
  std::vector<double> cdf_;
  std::vector<std::mt19937_64> rngs_;
};

// A request trace (Mooncake FAST'25 or Bailian JSONL: only `hash_ids` is needed) as prompts,
// request i going to source i mod sources.
// The most token ids a run of publish-fake generates before its first send (all sources, all
// prompts): about 2 GB with their hashes and encoded payloads. A larger workload is refused.
inline constexpr uint64_t kMaxGeneratedTokens = 200'000'000;

class TracePrompts {
 public:
  // Reads `path`; errors name the file and line.
  static Result<TracePrompts> Load(const std::string& path, uint32_t block_size, size_t sources);
  // The next prompt of `source`, or nullopt when its share of the trace is exhausted.
  std::optional<std::vector<TokenId>> Next(size_t source);
  // The token count of the prompt Next(source) returns (hash ids x block size), 0 at the end.
  uint64_t NextTokens(size_t source) const;
  size_t requests() const { return requests_; }
  // The first request's prompt (for queries).
  const std::vector<TokenId>& first() const { return first_; }

 private:
  std::vector<std::vector<std::vector<uint64_t>>> per_source_;  // source -> requests -> hash ids
  std::vector<size_t> next_;
  uint32_t block_size_ = 16;
  size_t requests_ = 0;
  std::vector<TokenId> first_;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAKE_WORKLOAD_H_
