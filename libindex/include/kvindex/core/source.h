// SourceConfig: everything a user can say about one source (docs/cli.md "Sources").
//
// A *source* is one ZeroMQ endpoint publishing for one instance and one DP rank. Several sources
// may share an instance name (one per DP rank). A Mooncake store source may additionally *serve*
// other instances: its CPU/DISK blocks then count for them in queries (docs/index-rules.md
// "Mooncake store sources"). This header is the plain vocabulary; parsing
// `--source NAME=FORMAT@ENDPOINT[,key=value...]` and `--config FILE` lives elsewhere.
//
// Thread safety: plain values.
#ifndef KVINDEX_CORE_SOURCE_H_
#define KVINDEX_CORE_SOURCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/scope.h"

namespace kvindex {

struct SourceConfig {
  // The instance this source publishes for (the NAME of `--source NAME=...`).
  std::string name;
  // "vllm", "sglang", "mooncake" or "auto": a hint, the era is detected per message.
  std::string format = "auto";
  std::string endpoint;
  std::string replay_endpoint;  // empty: no replay
  std::string model;            // vLLM/SGLang events do not carry it
  // Tokens per block as the index keys them. 0 = unknown: taken from the events. When the events
  // use a smaller block size that divides it (SGLang page size 1), pages accumulate into blocks.
  uint32_t block_size = 0;
  // The DP rank label of this source; a batch's or event's own rank wins (a mismatch is counted).
  // nullopt: rank 0 for engine sources, no rank for a Mooncake store.
  std::optional<DpRank> dp_rank;
  // `dp-size=N`: shorthand for N sources on port + r (expanded by the `--source` parser; the index
  // takes one source per rank).
  uint32_t dp_size = 1;
  std::string tenant{kDefaultTenant};
  std::string lora;  // the LoRA name all this source's blocks are in, unless events say otherwise
  std::string salt;  // the source's salt (scope), unless a request's cache_salt overrides it
  std::string topic;
  // Instances whose queries count this store's blocks: names, or the single entry "*" for every
  // instance of the same scope. Empty: serves nobody but itself.
  std::vector<std::string> serves;
  bool bind = false;  // the subscriber binds instead of connecting
  // `hash=standard`: the publisher's block hashes are already kvindex prefix hashes (RFC #1527
  // seq_hashes computed with the standard chain and `hash_seed`); no token ids are needed.
  bool hash_standard = false;
  uint64_t hash_seed = kDefaultHashSeed;

  // True when `serves` is the single entry "*".
  bool serves_all() const { return serves.size() == 1 && serves.front() == "*"; }
  // True for a Mooncake store source (format "mooncake" or a non-empty `serves`).
  bool is_store() const { return format == "mooncake" || !serves.empty(); }
};

}  // namespace kvindex

#endif  // KVINDEX_CORE_SOURCE_H_
