#include "kvindex/query/match_explain.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace kvindex {
namespace {

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string Quoted(const std::string& value) { return "'" + value + "'"; }

// Explains instance after instance. Everything that does not depend on the instance — which
// sources serve which instance, the salts and LoRAs the stored events carry, the answer to the
// query as asked of every instance — is computed once, so that explaining N instances costs
// O(N) probes and lookups, not O(N) scans of every source and scope each.
class Explainer {
 public:
  Explainer(const PrefixIndex& index, const QueryRequest& request,
            std::span<const SourceConfig> sources, const ExplainContext& context)
      : index_(index), request_(request), sources_(sources), context_(context) {
    for (size_t i = 0; i < context_.sources.size(); ++i) {
      streams_[context_.sources[i].instance].push_back(i);
    }
    for (size_t i = 0; i < sources_.size(); ++i) {
      const SourceConfig& s = sources_[i];
      named_[s.name].push_back(i);
      serving_[s.name].push_back(i);
      for (const std::string& served : s.serves) {
        if (served != s.name) serving_[served].push_back(i);
      }
    }
    // The carried values of the query's tenant and model, distinct, in first-seen order.
    const MatchQuery& q = request_.match;
    std::unordered_set<std::string> salts, loras;
    std::set<uint32_t> groups;
    for (const Scope& scope : index.scopes()) {
      if (scope.tenant == q.tenant && scope.model == q.model && scope.group != q.group) {
        groups.insert(scope.group);
      }
      if (scope.tenant != q.tenant || scope.model != q.model || scope.group != q.group) continue;
      if (salts.insert(scope.salt).second) carried_salts_.push_back(scope.salt);
      if (loras.insert(scope.lora).second) carried_loras_.push_back(scope.lora);
    }
    other_groups_.assign(groups.begin(), groups.end());
  }

  // The answer for `instance` alone under `query` (nullptr when the index leaves it out).
  Result<std::optional<InstanceMatch>> Probe(MatchQuery query, const std::string& instance) const {
    query.instances.assign(1, instance);
    KVINDEX_ASSIGN_OR_RETURN(PrefixMatch match, Ask(query));
    return Found(match, instance);
  }

  // The answer for `instance` in the query as asked of every instance (computed once).
  Result<std::optional<InstanceMatch>> Listed(const std::string& instance) {
    if (!listed_) {
      MatchQuery query = request_.match;
      query.instances.clear();
      KVINDEX_ASSIGN_OR_RETURN(PrefixMatch match, Ask(query));
      listed_ = std::move(match);
    }
    return Found(*listed_, instance);
  }

  Result<MatchExplanation> Explain(const std::string& instance) {
    MatchExplanation out;
    out.instance = instance;
    const MatchQuery& asked = request_.match;
    KVINDEX_ASSIGN_OR_RETURN(auto named, Probe(asked, instance));
    if (!named) {
      out.reason = "unknown-instance";
      out.detail = "the index lists no instance " + Quoted(instance) +
                   " (never seen, or unregistered)";
      return out;
    }
    KVINDEX_ASSIGN_OR_RETURN(bool grouped, TryGroups(instance, out));
    if (grouped) return out;
    KVINDEX_ASSIGN_OR_RETURN(auto listed, Listed(instance));
    if (!listed && Silent(instance, out)) return out;
    if (!listed) {
      out.reason = "unknown-scope";
      out.detail = "holds nothing of model " + Quoted(asked.model) + " for tenant " +
                   Quoted(asked.tenant) + SourcesScopeText(instance);
      return out;
    }
    MatchQuery query = asked;
    if (asked.block_size) {
      MatchQuery own = asked;
      own.block_size.reset();
      KVINDEX_ASSIGN_OR_RETURN(auto with_own, Probe(own, instance));
      if (with_own && with_own->block_size != 0 && with_own->block_size != *asked.block_size) {
        out.reason = "block-size";
        out.detail = "the query's block_size is " + std::to_string(*asked.block_size) +
                     " but the instance's blocks are " + std::to_string(with_own->block_size) +
                     " tokens";
        if (with_own->longest_matched > 0) {
          out.detail += " (with " + std::to_string(with_own->block_size) + " it matches " +
                        std::to_string(with_own->longest_matched) + " tokens)";
        }
        return out;
      }
    }
    const uint32_t bs = named->block_size;
    if (bs == 0) {
      out.reason = "first-block-absent";
      out.detail = "the instance has stored no block in this scope yet (no block size known)";
      return out;
    }
    const size_t length = request_.kind == QueryKind::kTokens ? request_.tokens.size() / bs
                          : request_.kind == QueryKind::kEngineHashes
                              ? request_.engine_hashes.size()
                              : request_.prefix_hashes.size();
    if (length == 0) {
      out.reason = "short-prompt";
      out.detail = request_.kind == QueryKind::kTokens
                       ? "the prompt has " + std::to_string(request_.tokens.size()) +
                             " tokens, fewer than one block of " + std::to_string(bs)
                       : std::string("the query gives no hash");
      return out;
    }
    // Salt and LoRA: the query's value dropped, or a value a source of the instance configures.
    KVINDEX_ASSIGN_OR_RETURN(bool scoped, TryScope(query, instance, out));
    if (scoped) return out;
    if (TokenForm(instance, out) || Silent(instance, out)) return out;
    out.reason = "first-block-absent";
    const std::string scope = " in scope tenant=" + asked.tenant + " model=" + asked.model +
                              (asked.lora.empty() ? "" : " lora=" + asked.lora) +
                              (asked.salt.empty() ? "" : " (salted)") +
                              " block_size=" + std::to_string(bs);
    switch (request_.kind) {
      case QueryKind::kTokens:
        out.detail = "the prompt's first block (tokens 0.." + std::to_string(bs - 1) +
                     ") is not cached on the instance" + scope;
        break;
      case QueryKind::kEngineHashes:
        out.detail = "block_hash[0] = " + Hex(request_.engine_hashes.front().value) +
                     " is not an engine hash the instance holds" + scope;
        break;
      case QueryKind::kPrefixHashes:
        out.detail = "seq_hashes[0] = " + Hex(request_.prefix_hashes.front().value) +
                     " is not cached on the instance" + scope;
        break;
    }
    return out;
  }

 private:
  // The query asked under each other KV-cache group of its tenant and model; true (and `out`
  // filled) when one of them matches.
  Result<bool> TryGroups(const std::string& instance, MatchExplanation& out) const {
    for (uint32_t group : other_groups_) {
      MatchQuery other = request_.match;
      other.group = group;
      KVINDEX_ASSIGN_OR_RETURN(auto m, Probe(other, instance));
      if (!m || m->longest_matched == 0) continue;
      out.reason = "group";
      out.detail = "the query asks KV-cache group " + std::to_string(request_.match.group) +
                   " but the instance holds the prompt in group " + std::to_string(group) +
                   " (" + std::to_string(m->longest_matched) + " tokens); name it with \"group\": " +
                   std::to_string(group);
      return true;
    }
    return false;
  }

  // True (and `out` filled) when every subscribed source of `instance` is silent.
  bool Silent(const std::string& instance, MatchExplanation& out) const {
    auto it = streams_.find(instance);
    if (it == streams_.end()) return false;
    std::string names;
    int64_t quiet_ns = -1;
    bool never = false;
    for (size_t i : it->second) {
      const ExplainSource& s = context_.sources[i];
      if (!s.subscribed) return false;
      const int64_t since = s.last_message_ns != 0 ? s.last_message_ns : s.watched_since_ns;
      const int64_t quiet = context_.now_ns - since;
      if (!s.stale && quiet < context_.silent_after_ns) return false;
      never |= s.last_message_ns == 0;
      quiet_ns = quiet_ns < 0 ? quiet : std::min(quiet_ns, quiet);
      names += (names.empty() ? "" : ", ") + Quoted(s.name);
    }
    out.reason = "silent-publisher";
    out.detail = "no message from " + names + " for " + std::to_string(quiet_ns / 1'000'000'000) +
                 " s" + (never ? " (none since the subscriber started: is the engine publishing "
                                 "KV events to this endpoint?)"
                               : "");
    return true;
  }

  // True (and `out` filled) when a source of `instance` publishes another token form than its
  // format says, or the query gives engine hashes of an EAGLE bigram stream.
  bool TokenForm(const std::string& instance, MatchExplanation& out) const {
    auto it = streams_.find(instance);
    if (it == streams_.end()) return false;
    for (size_t i : it->second) {
      const ExplainSource& s = context_.sources[i];
      const bool eagle = s.format == "sglang-eagle";
      if (s.token_form_mismatches > 0) {
        out.reason = "eagle-bigram";
        out.detail = "source " + Quoted(s.name) + " is configured as " + Quoted(s.format) + " but " +
                     std::to_string(s.token_form_mismatches) + " stored events came as " +
                     (eagle ? "plain token ids" : "EAGLE bigram pairs") + "; configure it as " +
                     (eagle ? "'sglang'" : "'sglang-eagle'");
        return true;
      }
      if (s.bigram_events > 0 && request_.kind == QueryKind::kEngineHashes) {
        out.reason = "eagle-bigram";
        out.detail = "source " + Quoted(s.name) +
                     " publishes EAGLE bigram blocks, whose engine hashes cover block_size + 1 "
                     "tokens: hashes computed from plain tokens differ; query with token_ids";
        return true;
      }
    }
    return false;
  }

  // A value to try for the salt or the LoRA, and where it comes from (for the detail line).
  struct Candidate {
    std::string value;
    const char* origin = "";
  };

  // Candidate values of one scope field: the query's own first, "" when the query set it, then
  // every value a source of `instance` configures, then every value the stored events of the
  // query's tenant and model carry (the index's scopes: a per-request cache_salt or LoRA that no
  // source configures). Probing the instance with each keeps only values it really holds.
  std::vector<Candidate> Candidates(const std::string& asked, const std::string& instance,
                                    std::string SourceConfig::*configured,
                                    const std::vector<std::string>& carried) const {
    std::vector<Candidate> out = {{asked, ""}};
    std::unordered_set<std::string> seen = {asked};
    auto add = [&out, &seen](const std::string& value, const char* origin) {
      if (seen.insert(value).second) out.push_back({value, origin});
    };
    if (!asked.empty()) add("", "");
    if (auto it = serving_.find(instance); it != serving_.end()) {
      for (size_t i : it->second)
        add(sources_[i].*configured, "the instance's source configures it");
    }
    const size_t limit = out.size() + kMaxCarried;
    for (const std::string& value : carried) {
      if (out.size() >= limit) break;  // per-request salts may be many: bound the probes
      add(value, "stored events carry it");
    }
    return out;
  }

  // Re-asks with the salt and the LoRA replaced by candidates, one field changed before both.
  // True (and `out` filled) when one of them matches.
  Result<bool> TryScope(const MatchQuery& query, const std::string& instance,
                        MatchExplanation& out) const {
    const std::vector<Candidate> salts =
        Candidates(query.salt, instance, &SourceConfig::salt, carried_salts_);
    const std::vector<Candidate> loras =
        Candidates(query.lora, instance, &SourceConfig::lora, carried_loras_);
    for (int changes = 1; changes <= 2; ++changes) {
      for (size_t si = 0; si < salts.size(); ++si) {
        for (size_t li = 0; li < loras.size(); ++li) {
          if ((si != 0) + (li != 0) != changes) continue;
          MatchQuery other = query;
          other.salt = salts[si].value;
          other.lora = loras[li].value;
          KVINDEX_ASSIGN_OR_RETURN(auto m, Probe(other, instance));
          if (!m || m->longest_matched == 0) continue;
          std::string how;
          if (si != 0) {
            out.reason = "salt";
            how = salts[si].value.empty()
                      ? "without the query's cache_salt"
                      : "with cache_salt " + Quoted(salts[si].value) + " (" + salts[si].origin + ")";
          }
          if (li != 0) {
            if (out.reason.empty()) out.reason = "lora";
            how += std::string(how.empty() ? "" : " and ") +
                   (loras[li].value.empty()
                        ? "without the query's LoRA"
                        : "with LoRA " + Quoted(loras[li].value) + " (" + loras[li].origin + ")");
          }
          out.detail = "the query's " + std::string(si != 0 ? "cache_salt" : "LoRA") +
                       (si != 0 && li != 0 ? " and LoRA differ" : " differs") + "; " + how +
                       " the prompt matches " + std::to_string(m->longest_matched) + " tokens";
          return true;
        }
      }
    }
    return false;
  }

  Result<PrefixMatch> Ask(const MatchQuery& query) const {
    return request_.kind == QueryKind::kTokens ? index_.MatchTokens(query, request_.tokens)
           : request_.kind == QueryKind::kEngineHashes
               ? index_.MatchEngineHashes(query, request_.engine_hashes)
               : index_.MatchPrefixHashes(query, request_.prefix_hashes);
  }

  static std::optional<InstanceMatch> Found(const PrefixMatch& match, const std::string& instance) {
    const InstanceMatch* found = match.Find(instance);
    if (found == nullptr) return std::nullopt;
    return *found;
  }

  // " (its sources: model 'x' tenant 'y'; ...)" from the source definitions, or "".
  std::string SourcesScopeText(const std::string& instance) const {
    std::set<std::pair<std::string, std::string>> seen;
    if (auto it = named_.find(instance); it != named_.end()) {
      for (size_t i : it->second) seen.emplace(sources_[i].model, sources_[i].tenant);
    }
    if (seen.empty()) return "";
    std::string text = " (its sources are configured for";
    bool first = true;
    for (const auto& [model, tenant] : seen) {
      text += first ? " " : "; ";
      first = false;
      text += "model " + Quoted(model) + " tenant " + Quoted(tenant);
    }
    return text + ")";
  }

  const PrefixIndex& index_;
  const QueryRequest& request_;
  std::span<const SourceConfig> sources_;
  const ExplainContext& context_;
  // Indices into context_.sources, by instance.
  std::unordered_map<std::string, std::vector<size_t>> streams_;
  // The KV-cache groups of the query's tenant and model other than the query's, ascending.
  std::vector<uint32_t> other_groups_;
  // Indices into sources_: the sources named after an instance, and those serving it (named
  // after it, or listing it in `serves`).
  std::unordered_map<std::string, std::vector<size_t>> named_;
  std::unordered_map<std::string, std::vector<size_t>> serving_;
  std::vector<std::string> carried_salts_;  // of the index's scopes (PrefixIndex::scopes())
  std::vector<std::string> carried_loras_;
  std::optional<PrefixMatch> listed_;  // the query as asked, of every instance
  // At most this many values per field are taken from the stored events' scopes (first seen
  // first), so that an index of many per-request salts keeps an explanation to a bounded number
  // of probes.
  static constexpr size_t kMaxCarried = 64;
};

}  // namespace

Result<std::vector<MatchExplanation>> ExplainMatch(const PrefixIndex& index,
                                                   const QueryRequest& request,
                                                   const PrefixMatch& match,
                                                   std::span<const SourceConfig> sources,
                                                   const ExplainContext& context) {
  std::set<std::string> candidates;
  if (!request.match.instances.empty()) {
    candidates.insert(request.match.instances.begin(), request.match.instances.end());
  } else {
    for (const InstanceStats& s : index.stats().instances) candidates.insert(s.instance);
    for (const SourceConfig& s : sources) candidates.insert(s.name);
    for (const InstanceMatch& m : match.instances) candidates.emplace(m.instance);
  }
  Explainer explainer(index, request, sources, context);
  std::vector<MatchExplanation> out;
  for (const std::string& instance : candidates) {
    const InstanceMatch* found = match.Find(instance);
    if (found != nullptr && found->longest_matched > 0) continue;
    KVINDEX_ASSIGN_OR_RETURN(MatchExplanation why, explainer.Explain(instance));
    out.push_back(std::move(why));
  }
  return out;
}

std::string RenderExplanations(const std::vector<MatchExplanation>& explanations) {
  nlohmann::json out = nlohmann::json::object();
  for (const MatchExplanation& e : explanations) {
    out[e.instance] = {{"reason", e.reason}, {"detail", e.detail}};
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvindex
