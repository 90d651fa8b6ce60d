// Why an instance matched nothing: a slow diagnostic beside the query path (`query --explain`,
// the `"explain": true` key of /query and /query_by_hash). It re-asks the index with the query's
// scope relaxed one field at a time and reports the first field that made the difference; it
// never touches the index's match path and costs a few extra Match* calls per silent instance.
//
// Reasons, in the order they are tested:
//   unknown-instance    the index lists no such instance (never seen, or unregistered)
//   group               the instance holds the prompt in another KV-cache group than the query's
//                       (`group` / `group_idx`; 0 when the query names none)
//   silent-publisher    (instance holds nothing, or not the prompt's first block) every live source
//                       of the instance is stale (its trust state) or has sent no message for
//                       ExplainContext::silent_after_ns
//   unknown-scope       the instance holds nothing of this model for this tenant
//   block-size          the query's block_size differs from the instance's
//   short-prompt        the prompt is shorter than one of the instance's blocks
//   salt                the cache_salt differs: dropping it, the source's configured salt, or a
//                       salt the stored events carry (PrefixIndex::scopes(); the first 64 of the
//                       query's tenant and model) would match; the detail names the value to use
//   lora                the LoRA differs (likewise: configured, or carried by events)
//   eagle-bigram        a source of the instance publishes EAGLE bigram pairs while configured
//                       plain (or plain tokens while configured sglang-eagle), or the query gives
//                       engine hashes of a bigram stream (those cover block_size + 1 tokens)
//   silent-publisher    (as above, tested again once the scope is known to be right)
//   first-block-absent  the scope is right but the prompt's first block is not cached there
//
// Thread safety: as PrefixIndex::Match* (any thread).
#ifndef KVINDEX_QUERY_MATCH_EXPLAIN_H_
#define KVINDEX_QUERY_MATCH_EXPLAIN_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/index/prefix_match.h"
#include "kvindex/query/query_json.h"

namespace kvindex {

// What a serving process knows about one source's stream beyond the index (the live subscriber's
// last message, the token forms it saw), for the reasons the index alone cannot give.
struct ExplainSource {
  std::string instance;  // SourceConfig::name
  std::string name;      // display name ("vllm-0/dp1")
  std::string format;    // SourceConfig::format
  // A live subscriber feeds the source: last_message_ns and watched_since_ns mean something.
  bool subscribed = false;
  int64_t last_message_ns = 0;   // realtime ns of the latest live message; 0: none yet
  int64_t watched_since_ns = 0;  // realtime ns since the subscriber listens to it
  bool stale = false;            // its trust state is stale (subscribe --stale-after)
  uint64_t bigram_events = 0;          // SourceCounters::bigram_events
  uint64_t token_form_mismatches = 0;  // SourceCounters::token_form_mismatches
};

struct ExplainContext {
  std::vector<ExplainSource> sources;
  int64_t now_ns = 0;  // realtime ns
  // A subscribed source that is stale, or has sent no message for this long, is silent.
  int64_t silent_after_ns = int64_t{30} * 1'000'000'000;
};

struct MatchExplanation {
  std::string instance;
  std::string reason;  // one of the reasons above
  std::string detail;  // one line for people
};

// For every instance that `match` (the answer to `request`) gives 0 tokens or leaves out — the
// instances the request names, else every instance of the index and of `sources` — why it
// matched nothing, sorted by instance. `sources` (the process's source definitions, may be empty)
// only add candidate salts and LoRAs and describe a scope mismatch.
// `context` (may be empty) adds the stream reasons (silent-publisher, eagle-bigram).
Result<std::vector<MatchExplanation>> ExplainMatch(const PrefixIndex& index,
                                                   const QueryRequest& request,
                                                   const PrefixMatch& match,
                                                   std::span<const SourceConfig> sources,
                                                   const ExplainContext& context = {});

// Renders explanations as the `explain` member of a /query answer:
// {"<instance>": {"reason": "...", "detail": "..."}}.
std::string RenderExplanations(const std::vector<MatchExplanation>& explanations);

}  // namespace kvindex

#endif  // KVINDEX_QUERY_MATCH_EXPLAIN_H_
