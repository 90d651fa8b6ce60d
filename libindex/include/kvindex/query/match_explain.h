// Why an instance matched nothing: a slow diagnostic beside the query path (`query --explain`,
// the `"explain": true` key of /query and /query_by_hash). It re-asks the index with the query's
// scope relaxed one field at a time and reports the first field that made the difference; it
// never touches the index's match path and costs a few extra Match* calls per silent instance.
//
// Reasons, in the order they are tested:
//   unknown-instance    the index lists no such instance (never seen, or unregistered)
//   unknown-scope       the instance holds nothing of this model for this tenant
//   block-size          the query's block_size differs from the instance's
//   short-prompt        the prompt is shorter than one of the instance's blocks
//   salt                the cache_salt differs: dropping it, the source's configured salt, or a
//                       salt the stored events carry (PrefixIndex::scopes(); the first 64 of the
//                       query's tenant and model) would match; the detail names the value to use
//   lora                the LoRA differs (likewise: configured, or carried by events)
//   first-block-absent  the scope is right but the prompt's first block is not cached there
//
// Thread safety: as PrefixIndex::Match* (any thread).
#ifndef KVINDEX_QUERY_MATCH_EXPLAIN_H_
#define KVINDEX_QUERY_MATCH_EXPLAIN_H_

#include <span>
#include <string>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/index/prefix_match.h"
#include "kvindex/query/query_json.h"

namespace kvindex {

struct MatchExplanation {
  std::string instance;
  std::string reason;  // one of the reasons above
  std::string detail;  // one line for people
};

// For every instance that `match` (the answer to `request`) gives 0 tokens or leaves out — the
// instances the request names, else every instance of the index and of `sources` — why it
// matched nothing, sorted by instance. `sources` (the process's source definitions, may be empty)
// only add candidate salts and LoRAs and describe a scope mismatch.
Result<std::vector<MatchExplanation>> ExplainMatch(const PrefixIndex& index,
                                                   const QueryRequest& request,
                                                   const PrefixMatch& match,
                                                   std::span<const SourceConfig> sources);

// Renders explanations as the `explain` member of a /query answer:
// {"<instance>": {"reason": "...", "detail": "..."}}.
std::string RenderExplanations(const std::vector<MatchExplanation>& explanations);

}  // namespace kvindex

#endif  // KVINDEX_QUERY_MATCH_EXPLAIN_H_
