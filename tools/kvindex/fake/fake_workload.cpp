#include "fake/fake_workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "kvindex/core/json_depth.h"

namespace kvindex::cli {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string ObjectKey(EngineHash h) {
  static const char* kHex = "0123456789abcdef";
  std::string key = "fake-";
  for (int i = 15; i >= 0; --i) key.push_back(kHex[(h.value >> (4 * i)) & 0xf]);
  return key;
}

}  // namespace

EngineHash FakeEngineHash(PrefixHash prefix) { return EngineHash{SplitMix64(prefix.value ^ 0x6b76696e646578ULL)}; }

std::vector<TokenId> TraceBlockTokens(uint64_t hash_id, uint32_t block_size) {
  std::vector<TokenId> tokens(block_size);
  for (uint32_t j = 0; j < block_size; ++j) {
    tokens[j] = static_cast<TokenId>((hash_id * block_size + j) & 0x7fffffffULL);
  }
  return tokens;
}

namespace {

// vllm-hybrid's sliding-window group: group 1, under the same engine hashes as group 0's blocks
// (vLLM hashes a chunk alike in every group; the group keeps them apart).
constexpr uint32_t kSlidingGroup = 1;
BlockStored InSlidingGroup(BlockStored e, uint32_t block_size) {
  e.scope.group = kSlidingGroup;
  e.wire.spec_kind = "sliding_window";
  e.wire.sliding_window = int64_t{4} * block_size;
  return e;
}
BlockRemoved InSlidingGroup(BlockRemoved e) {
  e.scope.group = kSlidingGroup;
  return e;
}

bool SparseHashes(size_t chunk, size_t run_end) {
  return chunk % kSparseSkipEvery != kSparseSkipEvery - 1 || chunk + 1 == run_end;
}

}  // namespace

BlockStored FakeCache::MambaEvent(const std::vector<TokenId>& tokens,
                                  const std::vector<PrefixHash>& chain, size_t begin,
                                  size_t end) const {
  const uint32_t bs = style_.block_size;
  BlockStored m;
  // The Mamba group's chunks carry group 0's engine hashes, as vLLM publishes them.
  if (begin > 0) m.parent = FakeEngineHash(chain[begin - 1]);
  m.token_ids.assign(tokens.begin() + static_cast<ptrdiff_t>(begin * bs),
                     tokens.begin() + static_cast<ptrdiff_t>(end * bs));
  m.tier = style_.tier;
  m.scope.block_size = bs;
  m.scope.model = style_.model;
  m.scope.group = kSparseGroup;
  m.wire.spec_kind = "mamba";
  return m;
}

void FakeCache::SparseMirror(const std::vector<TokenId>& tokens,
                             const std::vector<PrefixHash>& chain, size_t from, size_t to,
                             std::vector<bool>& held, std::vector<Event>& out) const {
  // The context starts right after the last chunk the group holds (its parent).
  size_t start = from;
  while (start > 0 && !held[start - 1]) --start;
  if (!style_.skipped_context) {
    // block_offsets: one event whose token_ids cover every chunk from there on.
    BlockStored m = MambaEvent(tokens, chain, start, to);
    for (size_t c = from; c < to; ++c) {
      if (!SparseHashes(c, to)) continue;
      m.block_hashes.push_back(FakeEngineHash(chain[c]));
      m.block_offsets.push_back(static_cast<uint32_t>(c - start));
      held[c] = true;
    }
    out.push_back(std::move(m));
    return;
  }
  // Skipped context: one event per run of consecutive kept chunks; the chunks between the last one
  // announced and the run travel as skipped context, chained from the last one announced.
  size_t announced = start;
  for (size_t c = from; c < to;) {
    if (!SparseHashes(c, to)) {
      ++c;
      continue;
    }
    size_t e = c;
    while (e < to && SparseHashes(e, to)) ++e;
    BlockStored m = MambaEvent(tokens, chain, announced, e);
    for (size_t k = c; k < e; ++k) {
      m.block_hashes.push_back(FakeEngineHash(chain[k]));
      if (announced < c) m.block_offsets.push_back(static_cast<uint32_t>(k - announced));
      held[k] = true;
    }
    if (announced < c) {
      m.wire.skipped_context = true;
      m.wire.run_parent = FakeEngineHash(chain[c - 1]);
    }
    out.push_back(std::move(m));
    announced = e;
    c = e;
  }
}

void FakeCache::Reset() {
  lru_.clear();
  entries_.clear();
}

void FakeCache::Serve(const std::vector<TokenId>& tokens, std::vector<Event>& out) {
  const uint32_t bs = style_.block_size;
  std::vector<PrefixHash> chain = ChainPrefixHashes(tokens, bs);
  // EAGLE keys a block by the pairs of its tokens and the next one: the last full block waits.
  if (style_.eagle && !tokens.empty() && chain.size() > (tokens.size() - 1) / bs) {
    chain.resize((tokens.size() - 1) / bs);
  }
  const size_t n = chain.size();
  if (n == 0) return;
  std::vector<bool> present(n);
  std::vector<bool> held(n);  // vllm-hybrid-sparse/-skipped: the chunks the Mamba group holds
  std::unordered_set<uint64_t> prompt;
  size_t missing = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto it = entries_.find(chain[i].value);
    present[i] = it != entries_.end();
    held[i] = present[i] && it->second.sparse_held;
    prompt.insert(chain[i].value);
    if (!present[i]) ++missing;
  }
  // Evict LRU victims that are not part of this prompt (capacity >= prompt blocks is checked).
  const size_t need = lru_.size() + missing > capacity_ ? lru_.size() + missing - capacity_ : 0;
  std::vector<EngineHash> victims;
  std::vector<EngineHash> sparse_victims;  // those the Mamba group holds too
  for (auto it = lru_.end(); victims.size() < need && it != lru_.begin();) {
    --it;
    if (prompt.count(*it)) continue;
    const Entry& victim = entries_[*it];
    victims.push_back(victim.engine);
    if (victim.sparse_held) sparse_victims.push_back(victim.engine);
    entries_.erase(*it);
    it = lru_.erase(it);
  }
  if (!victims.empty()) {
    if (style_.store_objects) {
      for (EngineHash v : victims) out.push_back(StoreUpdate{ObjectKey(v), {}});
    } else {
      BlockRemoved removed;
      removed.block_hashes = std::move(victims);
      removed.tier = style_.tier;
      removed.scope.model = style_.model;
      if (style_.sparse) {
        removed.scope.group = 0;
        BlockRemoved mamba = removed;
        out.push_back(std::move(removed));
        if (!sparse_victims.empty()) {
          mamba.block_hashes = std::move(sparse_victims);
          mamba.scope.group = kSparseGroup;
          out.push_back(std::move(mamba));
        }
      } else if (style_.hybrid) {
        removed.scope.group = 0;
        out.push_back(removed);
        out.push_back(InSlidingGroup(std::move(removed)));
      } else {
        out.push_back(std::move(removed));
      }
    }
  }
  // Store each run of missing blocks.
  for (size_t i = 0; i < n;) {
    if (present[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && !present[j]) ++j;
    auto make = [&](size_t from, size_t to) {
      BlockStored stored;
      for (size_t k = from; k < to; ++k) stored.block_hashes.push_back(FakeEngineHash(chain[k]));
      if (from > 0) stored.parent = FakeEngineHash(chain[from - 1]);
      stored.token_ids.assign(tokens.begin() + static_cast<ptrdiff_t>(from * bs),
                              tokens.begin() + static_cast<ptrdiff_t>(to * bs));
      stored.tier = style_.tier;
      if (style_.eagle) stored.wire.eagle_next = tokens[to * bs];
      stored.scope.block_size = bs;
      stored.scope.model = style_.model;
      if (style_.store_objects) {
        // Mooncake seed era: a BlockStoreEvent is the stored block plus its object's replica set.
        stored.tier.reset();
        const std::string key = ObjectKey(stored.block_hashes.back());
        stored.wire.object_key = key;
        out.push_back(std::move(stored));
        Replica replica{
            .tier = Tier::Cpu(), .location = "tcp://fake-store:0", .tier_spelling = "memory"};
        out.push_back(StoreUpdate{key, {replica}});
        return;
      }
      if (style_.hybrid) {
        stored.scope.group = 0;
        stored.wire.spec_kind = "full_attention";
        out.push_back(stored);
        if (style_.sparse) {
          SparseMirror(tokens, chain, from, to, held, out);
        } else {
          out.push_back(InSlidingGroup(std::move(stored), bs));
        }
        return;
      }
      out.push_back(std::move(stored));
    };
    if (style_.store_objects) {
      for (size_t k = i; k < j; ++k) make(k, k + 1);  // one object per block
    } else {
      make(i, j);
    }
    i = j;
  }
  // Refresh: the tail first, the root last (most recent), so tails are evicted before roots.
  for (size_t r = n; r-- > 0;) {
    const uint64_t key = chain[r].value;
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.erase(it->second.pos);
      lru_.push_front(key);
      it->second.pos = lru_.begin();
    } else {
      lru_.push_front(key);
      entries_.emplace(key, Entry{FakeEngineHash(chain[r]), lru_.begin(), held[r]});
    }
  }
}

SyntheticPrompts::SyntheticPrompts(SyntheticOptions options, size_t sources) : options_(options) {
  std::mt19937_64 shared(options_.seed);
  std::uniform_int_distribution<uint32_t> token(0, std::max<uint32_t>(options_.vocab, 1) - 1);
  const size_t prefix_tokens = size_t{options_.prefix_blocks} * options_.block_size;
  for (uint32_t p = 0; p < options_.prefixes; ++p) {
    std::vector<TokenId> t(prefix_tokens);
    for (auto& x : t) x = token(shared);
    prefixes_.push_back(std::move(t));
  }
  double total = 0;
  for (uint32_t p = 0; p < options_.prefixes; ++p) {
    total += 1.0 / std::pow(static_cast<double>(p + 1), options_.zipf);
    cdf_.push_back(total);
  }
  for (double& c : cdf_) c /= total;
  for (size_t s = 0; s < sources; ++s) rngs_.emplace_back(options_.seed * 1000003ULL + s + 1);
}

std::vector<TokenId> SyntheticPrompts::Next(size_t source) {
  std::mt19937_64& rng = rngs_[source];
  std::vector<TokenId> tokens;
  if (!prefixes_.empty() && options_.prefix_blocks > 0) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    size_t p = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    p = std::min(p, prefixes_.size() - 1);
    tokens = prefixes_[p];
  }
  std::uniform_int_distribution<uint32_t> token(0, std::max<uint32_t>(options_.vocab, 1) - 1);
  const size_t total = size_t{options_.prompt_blocks} * options_.block_size;
  while (tokens.size() < total) tokens.push_back(token(rng));
  return tokens;
}

Result<TracePrompts> TracePrompts::Load(const std::string& path, uint32_t block_size,
                                        size_t sources) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open trace");
  TracePrompts t;
  t.block_size_ = block_size;
  t.per_source_.resize(sources);
  t.next_.assign(sources, 0);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto doc = JsonTooDeepAt(line) == std::string::npos ? nlohmann::json::parse(line, nullptr, false)
                                                        : nlohmann::json(nlohmann::json::value_t::discarded);
    if (doc.is_discarded() || !doc.is_object()) {
      return Status::Malformed(path + ": line " + std::to_string(line_no) + ": not a JSON object");
    }
    auto it = doc.find("hash_ids");
    if (it == doc.end() || !it->is_array()) {
      return Status::Malformed(path + ": line " + std::to_string(line_no) +
                               ": hash_ids: expected an array");
    }
    std::vector<uint64_t> ids;
    for (const auto& v : *it) {
      if (!v.is_number_unsigned()) {  // 0 .. 2^64 - 1 (2^63 and above included)
        return Status::Malformed(path + ": line " + std::to_string(line_no) +
                                 ": hash_ids: expected non-negative integers");
      }
      ids.push_back(v.get<uint64_t>());
    }
    if (t.requests_ == 0) {
      if (static_cast<double>(ids.size()) * block_size > static_cast<double>(kMaxGeneratedTokens)) {
        return Status::InvalidArgument(path + ": line " + std::to_string(line_no) + ": " +
                                       std::to_string(ids.size()) + " hash ids x --block-size " +
                                       std::to_string(block_size) +
                                       " exceed the 200000000 token ids publish-fake generates");
      }
      for (uint64_t id : ids) {
        auto b = TraceBlockTokens(id, block_size);
        t.first_.insert(t.first_.end(), b.begin(), b.end());
      }
    }
    t.per_source_[t.requests_ % sources].push_back(std::move(ids));
    ++t.requests_;
  }
  if (t.requests_ == 0) return Status::Malformed(path + ": no requests in trace");
  return t;
}

uint64_t TracePrompts::NextTokens(size_t source) const {
  const auto& list = per_source_[source];
  if (next_[source] >= list.size()) return 0;
  return static_cast<uint64_t>(list[next_[source]].size()) * block_size_;
}

std::optional<std::vector<TokenId>> TracePrompts::Next(size_t source) {
  auto& list = per_source_[source];
  if (next_[source] >= list.size()) return std::nullopt;
  std::vector<TokenId> tokens;
  for (uint64_t id : list[next_[source]++]) {
    auto b = TraceBlockTokens(id, block_size_);
    tokens.insert(tokens.end(), b.begin(), b.end());
  }
  return tokens;
}

}  // namespace kvindex::cli
