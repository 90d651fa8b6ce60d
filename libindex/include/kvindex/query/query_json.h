// The JSON of a query (docs/http-api.md): request bodies of /query, /query_by_hash and /cache as
// the HTTP server, `replay --queries` and `query` read them, and the /query answer shape they all
// print.
//
//   /query          {model, token_ids, lora_name?, lora_id?, tenant_id?, cache_salt?,
//                    instance_id?, instances?, block_size?}
//   /query_by_hash  {model, block_hash: [engine hashes] | seq_hashes: [prefix hashes], ...}
//   /cache          {instances, token_ids, model_name, lora_id}   (the upstream proxy's body)
//   answer          {"data": {"<tenant>": {"<instance>": {"longest_matched": n, "GPU": n,
//                    "CPU": n, "DISK": n, "DP": {"<rank>": n}, "state": s}}}} (other tiers as
//                    own keys; a degraded instance also has "lost_batches" and "since")
//
// Every JSON text these functions write is valid UTF-8: names are written through
// core/utf8.h's policy (ToValidUtf8).
//
// Thread safety: pure functions (each thread parses with its own reader).
#ifndef KVINDEX_QUERY_QUERY_JSON_H_
#define KVINDEX_QUERY_QUERY_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/index/prefix_match.h"
#include "kvindex/ingest/source_trust.h"

namespace kvindex {

// Request limits (docs/http-api.md "Rules common to every endpoint").
inline constexpr size_t kMaxQueryBodyBytes = size_t{16} << 20;  // 16 MiB
inline constexpr size_t kMaxQueryTokens = size_t{1} << 20;      // 1 M token ids (or hashes)

enum class QueryKind : uint8_t { kTokens, kEngineHashes, kPrefixHashes };

struct QueryRequest {
  QueryKind kind = QueryKind::kTokens;
  MatchQuery match;  // tenant, model, lora, salt, block size, instances
  std::vector<TokenId> tokens;
  std::vector<EngineHash> engine_hashes;
  std::vector<PrefixHash> prefix_hashes;
  // `"explain": true`: also say why each instance matched nothing (match_explain.h).
  bool explain = false;
};

// Parses a /query or /query_by_hash body (whichever keys it has: `token_ids`, `block_hash` or
// `seq_hashes`). Errors are kInvalidArgument (a 400) with one line naming the field: bad JSON,
// a missing or mistyped field, a token id outside u32, block_size 0, lora_id together with
// lora_name, more than kMaxQueryTokens ids. kLimitExceeded (a 413) for a body over
// kMaxQueryBodyBytes. `tenant_id` and `cache_salt` may be strings or integers; `explain` a boolean.
Result<QueryRequest> ParseQueryRequest(std::string_view body);

// Parses the upstream proxy's /cache body: {"instances": [...], "token_ids": [...],
// "model_name": ..., "lora_id": ...}. Same errors.
Result<QueryRequest> ParseCacheRequest(std::string_view body);

// The same two into `request`, whose buffers are reused (whatever it held is replaced; after an
// error its content is unspecified): with one QueryRequest kept per thread, a body parses without
// allocating once the buffers have grown to its size.
Status ParseQueryRequest(std::string_view body, QueryRequest& request);
Status ParseCacheRequest(std::string_view body, QueryRequest& request);

// The reference writer behind RenderQueryAnswer, over a full nlohmann::json DOM: RenderQueryAnswer
// writes the common answer directly and hands the rest (names that need escaping or are not
// UTF-8, tiers beyond GPU/CPU/DISK, names that collide) to it. Both give byte-identical answers
// (tests/query_json_diff_test.cpp); the DOM form is public for that check and for benches.
std::string RenderQueryAnswerWithDom(const PrefixMatch& match, std::string_view tenant,
                                     bool conductor_compat = false,
                                     const InstanceTrustMap* trust = nullptr);

// Answers `request` from `index` with the Match* call its kind names (any thread, as Match*).
Result<PrefixMatch> MatchRequest(const PrefixIndex& index, const QueryRequest& request);
// The same into `out`, whose storage is reused (PrefixIndex's Match* with an output).
Status MatchRequest(const PrefixIndex& index, const QueryRequest& request, PrefixMatch& out);

// Renders the /query answer: {"data": {"<tenant>": {...}}}, or {"data": {}} when `match` has no
// instance (an unknown model or scope). With `conductor_compat`, without the "data" wrapper, as
// the upstream Go conductor answers. With `trust`, each instance also says how far to trust it:
// "state" ("exact" for an instance `trust` does not name), and for a degraded one
// "lost_batches" and "since" (RFC 3339 UTC).
std::string RenderQueryAnswer(const PrefixMatch& match, std::string_view tenant,
                              bool conductor_compat = false,
                              const InstanceTrustMap* trust = nullptr);
// The same into `out` (replaced, its storage reused: no allocation once it has grown, for the
// common answer that needs no escaping).
void RenderQueryAnswer(const PrefixMatch& match, std::string_view tenant, bool conductor_compat,
                       const InstanceTrustMap* trust, std::string& out);

// Renders the /cache answer: {"HitStatus": {"<instance>": longest_matched}}, and with `trust`
// a sibling "InstanceState": {"<instance>": {"state": s, ...}} for the instances it names.
std::string RenderCacheAnswer(const PrefixMatch& match, const InstanceTrustMap* trust = nullptr);

}  // namespace kvindex

#endif  // KVINDEX_QUERY_QUERY_JSON_H_
