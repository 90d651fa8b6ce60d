// The /query and /cache answers: MatchRequest; RenderQueryAnswer, which writes the common answer
// directly and hands the rest to RenderQueryAnswerWithDom (nlohmann::json); RenderCacheAnswer.
// Names are written through core/utf8.h's policy (ToValidUtf8), so every answer is valid UTF-8;
// the direct writer takes only printable ASCII names, which are valid as they stand.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/utf8.h"
#include "kvindex/query/query_json.h"

namespace kvindex {
namespace {

using nlohmann::json;

// The replacing error handler keeps dump() from throwing; with names made valid beforehand it
// has nothing to replace.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

InstanceTrust TrustOf(const InstanceTrustMap& trust, std::string_view instance) {
  const auto it = trust.find(instance);
  return it == trust.end() ? InstanceTrust{} : it->second;
}

// The trust fields of one instance's answer ("state"; "lost_batches", "since" when degraded).
json TrustJson(const InstanceTrust& t) {
  json out = {{"state", std::string(TrustStateName(t.state))}};
  if (t.state == TrustState::kDegraded) {
    out["lost_batches"] = t.lost_batches;
    out["since"] = Rfc3339Utc(t.since_ns);
  }
  return out;
}

json AnswerFor(const InstanceMatch& m, const InstanceTrustMap* trust) {
  json answer = {
      {"longest_matched", m.longest_matched}, {"GPU", m.gpu}, {"CPU", m.cpu}, {"DISK", m.disk}};
  for (const auto& [tier, tokens] : m.other_tiers) answer[ToValidUtf8(tier)] = tokens;
  json dp = json::object();
  for (const DpTokens& d : m.dp) dp[std::to_string(d.rank)] = d.tokens;
  answer["DP"] = std::move(dp);
  if (trust != nullptr) answer.update(TrustJson(TrustOf(*trust, m.instance)));
  return answer;
}

// Writes the answer nlohmann's dump() would (keys in byte order, no spaces) for the common case:
// names of printable ASCII without '"' or '\\', distinct instance names and DP ranks, no tier
// beyond GPU/CPU/DISK. Anything else returns false (RenderQueryAnswerWithDom answers).
bool PlainName(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

// Appends to a buffer sized beforehand: a raw write pointer (no capacity check or strlen per
// piece, which were most of the renderer's time).
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  template <size_t N>
  void Lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void Str(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Ch(char c) { *p_++ = c; }
  template <typename Int>
  void Num(Int v) {
    p_ = std::to_chars(p_, p_ + 21, v).ptr;  // 20 digits and a sign at most
  }
  char* pos() const { return p_; }

 private:
  char* p_;
};

// The render buffer is released after an answer larger than this.
constexpr size_t kKeptScratchBytes = size_t{1} << 20;

bool RenderDirect(const PrefixMatch& match, std::string_view tenant, bool conductor_compat,
                  const InstanceTrustMap* trust, std::string& out) {
  if (!PlainName(tenant)) return false;
  thread_local std::vector<const InstanceMatch*> sorted;  // reused: no allocation per answer
  sorted.clear();
  // Worst case of every piece: names, 5 numbers of 20 digits and the keys per instance, a
  // rank (10 digits) and a number per DP entry.
  size_t bound = 32 + tenant.size();
  for (const InstanceMatch& m : match.instances) {
    if (!m.other_tiers.empty() || !PlainName(m.instance)) return false;
    sorted.push_back(&m);
    bound += m.instance.size() + 160 + m.dp.size() * 40 + (trust != nullptr ? 120 : 0);
  }
  // The index answers in name order: one pass checks the order and finds repeated names.
  bool in_order = true;
  for (size_t i = 1; i < sorted.size() && in_order; ++i) {
    const int c = sorted[i - 1]->instance.compare(sorted[i]->instance);
    if (c == 0) return false;
    in_order = c < 0;
  }
  if (!in_order) {
    std::sort(sorted.begin(), sorted.end(), [](const InstanceMatch* a, const InstanceMatch* b) {
      return a->instance < b->instance;
    });
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i - 1]->instance == sorted[i]->instance) return false;
    }
  }
  // The trust map is in name order too: walked beside the instances, not searched per instance.
  InstanceTrustMap::const_iterator trust_at;
  if (trust != nullptr) trust_at = trust->begin();
  // Written into a per-thread buffer that only grows (an answer string sized to the bound would
  // zero it all again on every answer, its size having shrunk to the last answer's), then
  // copied: a reused `out` keeps its storage.
  thread_local std::string scratch;
  if (scratch.size() < bound) scratch.resize(bound);
  Writer w(scratch.data());
  if (!conductor_compat) w.Lit("{\"data\":");
  w.Ch('{');
  if (!sorted.empty()) {
    w.Ch('"');
    w.Str(tenant);
    w.Lit("\":{");
    thread_local std::vector<std::pair<std::string, uint64_t>> dp;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const InstanceMatch& m = *sorted[i];
      if (i > 0) w.Ch(',');
      w.Ch('"');
      w.Str(m.instance);
      w.Lit("\":{\"CPU\":");
      w.Num(m.cpu);
      w.Lit(",\"DISK\":");
      w.Num(m.disk);
      w.Lit(",\"DP\":{");
      if (m.dp.size() == 1) {
        w.Ch('"');
        w.Num(m.dp[0].rank);
        w.Lit("\":");
        w.Num(m.dp[0].tokens);
      } else if (m.dp.size() > 1) {
        // Keys in byte order, as nlohmann's dump() ("10" before "2").
        dp.clear();
        for (const DpTokens& d : m.dp) dp.emplace_back(std::to_string(d.rank), d.tokens);
        std::sort(dp.begin(), dp.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        for (size_t r = 0; r < dp.size(); ++r) {
          if (r > 0) {
            if (dp[r - 1].first == dp[r].first) return false;
            w.Ch(',');
          }
          w.Ch('"');
          w.Str(dp[r].first);
          w.Lit("\":");
          w.Num(dp[r].second);
        }
      }
      w.Lit("},\"GPU\":");
      w.Num(m.gpu);
      w.Lit(",\"longest_matched\":");
      w.Num(m.longest_matched);
      if (trust != nullptr) {  // keys after "longest_matched" in byte order, as dump() writes
        int c = 1;
        while (trust_at != trust->end() && (c = trust_at->first.compare(m.instance)) < 0) {
          ++trust_at;
        }
        const InstanceTrust t =
            trust_at != trust->end() && c == 0 ? trust_at->second : InstanceTrust{};
        if (t.state == TrustState::kDegraded) {
          w.Lit(",\"lost_batches\":");
          w.Num(t.lost_batches);
          w.Lit(",\"since\":\"");
          w.Str(Rfc3339Utc(t.since_ns));  // 20 characters (int64 ns: years 1677-2262)
          w.Ch('"');
        }
        w.Lit(",\"state\":\"");
        w.Str(TrustStateName(t.state));
        w.Ch('"');
      }
      w.Ch('}');
    }
    w.Ch('}');
  }
  w.Ch('}');
  if (!conductor_compat) w.Ch('}');
  out.assign(scratch.data(), static_cast<size_t>(w.pos() - scratch.data()));
  if (scratch.size() > kKeptScratchBytes) std::string().swap(scratch);
  return true;
}

}  // namespace

Status MatchRequest(const PrefixIndex& index, const QueryRequest& request, PrefixMatch& out) {
  switch (request.kind) {
    case QueryKind::kTokens:
      return index.MatchTokens(request.match, request.tokens, out);
    case QueryKind::kEngineHashes:
      return index.MatchEngineHashes(request.match, request.engine_hashes, out);
    case QueryKind::kPrefixHashes:
      return index.MatchPrefixHashes(request.match, request.prefix_hashes, out);
  }
  return Status::Internal("unknown query kind");
}

Result<PrefixMatch> MatchRequest(const PrefixIndex& index, const QueryRequest& request) {
  PrefixMatch out;
  KVINDEX_RETURN_IF_ERROR(MatchRequest(index, request, out));
  return out;
}

std::string RenderQueryAnswerWithDom(const PrefixMatch& match, std::string_view tenant,
                                     bool conductor_compat, const InstanceTrustMap* trust) {
  json instances = json::object();
  for (const InstanceMatch& m : match.instances) {
    instances[ToValidUtf8(m.instance)] = AnswerFor(m, trust);
  }
  json by_tenant = json::object();
  if (!match.instances.empty()) by_tenant[ToValidUtf8(tenant)] = std::move(instances);
  if (conductor_compat) return Dump(by_tenant);
  return Dump(json{{"data", std::move(by_tenant)}});
}

std::string RenderCacheAnswer(const PrefixMatch& match, const InstanceTrustMap* trust) {
  json hits = json::object();
  for (const InstanceMatch& m : match.instances) hits[ToValidUtf8(m.instance)] = m.longest_matched;
  json answer = {{"HitStatus", std::move(hits)}};
  if (trust != nullptr) {
    json states = json::object();
    for (const auto& [name, t] : *trust) states[ToValidUtf8(name)] = TrustJson(t);
    answer["InstanceState"] = std::move(states);
  }
  return Dump(answer);
}

void RenderQueryAnswer(const PrefixMatch& match, std::string_view tenant, bool conductor_compat,
                       const InstanceTrustMap* trust, std::string& out) {
  if (!RenderDirect(match, tenant, conductor_compat, trust, out)) {
    out = RenderQueryAnswerWithDom(match, tenant, conductor_compat, trust);
  }
}

std::string RenderQueryAnswer(const PrefixMatch& match, std::string_view tenant,
                              bool conductor_compat, const InstanceTrustMap* trust) {
  std::string out;
  RenderQueryAnswer(match, tenant, conductor_compat, trust, out);
  return out;
}

}  // namespace kvindex
