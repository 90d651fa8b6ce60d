// `kvindex query`: one question — how many leading tokens of this prompt (or these hashes) does
// each instance hold, in which tier and DP rank — asked of a capture (the index is rebuilt from
// it), of a snapshot, or of a running server (`--server URL`: kvindex's HTTP API or the upstream conductor's).
// A readable table on stdout; `--json FILE` writes the /query answer shape; `--explain` says why
// each silent instance matched nothing (match_explain.h; from a server, its "explain" member).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kvindex/core/address.h"
#include "kvindex/core/json_depth.h"
#include "kvindex/core/utf8.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/query/match_explain.h"
#include "kvindex/query/query_json.h"

#include "capture_tools.h"
#include "cli_validators.h"
#include "commands.h"
#include "report.h"
#include "snapshot_tools.h"

namespace kvindex::cli {
namespace {

struct QueryOptions {
  std::vector<std::string> capture;  // the files of one capture
  std::string snapshot;              // or a snapshot file
  std::string server;                // or a server's URL
  bool explain = false;
  std::string model;
  std::vector<TokenId> tokens;   // --tokens 1,2,3
  std::string tokens_file;       // whitespace/comma separated ids, or a JSON array
  std::vector<uint64_t> hashes;  // engine hashes
  std::vector<uint64_t> prefix_hashes;
  uint32_t block_size = 0;
  std::string tenant;
  std::string lora_name;
  std::string salt;
  std::vector<std::string> instances;
  std::string json;
};

// The token ids of a --tokens-file: decimal numbers separated by commas, whitespace or the
// brackets of a JSON array. kInvalidArgument naming `path` for anything else or an id beyond
// 32 bits.
Result<std::vector<TokenId>> ParseTokenFile(std::string_view text, const std::string& path) {
  std::vector<TokenId> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find_first_of(", \n\t\r[]", start);
    const std::string_view item =
        text.substr(start, end == std::string_view::npos ? end : end - start);
    start = end == std::string_view::npos ? text.size() : end + 1;
    if (item.empty()) continue;
    uint64_t id = 0;
    const auto [stop, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (error != std::errc() || stop != item.data() + item.size()) {
      return Status::InvalidArgument(path + ": '" + std::string(item) + "' is not a number");
    }
    if (id > 0xffffffffu) {
      return Status::InvalidArgument(path + ": token id " + std::to_string(id) +
                                     " exceeds 32 bits");
    }
    out.push_back(static_cast<TokenId>(id));
  }
  return out;
}

Result<QueryRequest> BuildRequest(const QueryOptions& options) {
  const int given = !options.tokens.empty() + !options.tokens_file.empty() +
                    !options.hashes.empty() + !options.prefix_hashes.empty();
  if (given != 1) {
    return Status::InvalidArgument(
        "give exactly one of --tokens, --tokens-file, --hashes or --prefix-hashes");
  }
  QueryRequest request;
  request.match.model = options.model;
  request.match.tenant = std::string(TenantOrDefault(options.tenant));
  request.match.lora = options.lora_name;
  request.match.salt = options.salt;
  if (options.block_size != 0) request.match.block_size = options.block_size;
  request.match.instances = options.instances;
  if (!options.tokens.empty()) {
    request.tokens = options.tokens;
    request.kind = QueryKind::kTokens;
  } else if (!options.tokens_file.empty()) {
    std::ifstream in(options.tokens_file);
    if (!in) return Status::NotFound(options.tokens_file + ": cannot open");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    KVINDEX_ASSIGN_OR_RETURN(request.tokens, ParseTokenFile(buffer.str(), options.tokens_file));
    request.kind = QueryKind::kTokens;
  } else if (!options.hashes.empty()) {
    for (uint64_t h : options.hashes) request.engine_hashes.push_back(EngineHash{h});
    request.kind = QueryKind::kEngineHashes;
  } else {
    for (uint64_t h : options.prefix_hashes) request.prefix_hashes.push_back(PrefixHash{h});
    request.kind = QueryKind::kPrefixHashes;
  }
  return request;
}

// One row of the answer table, from a PrefixMatch or from a server's JSON answer.
struct Row {
  std::string instance;
  std::string block = "-";  // the block size used (a server does not say)
  uint64_t longest = 0, gpu = 0, cpu = 0, disk = 0;
  std::string other = "-";
  std::string dp = "-";
  std::string state = "-";  // how far to trust it: "exact", "stale", "degraded (N lost since T)"
};

std::string StateText(std::string_view state, uint64_t lost, std::string_view since) {
  if (state != "degraded") return std::string(state);
  return "degraded (" + std::to_string(lost) + " lost since " + std::string(since) + ")";
}

Row RowFor(const InstanceMatch& m, const InstanceTrustMap& trust) {
  Row row;
  const auto t = trust.find(m.instance);
  const InstanceTrust it = t == trust.end() ? InstanceTrust{} : t->second;
  row.state = StateText(TrustStateName(it.state), it.lost_batches, Rfc3339Utc(it.since_ns));
  row.instance = std::string(m.instance);
  row.block = std::to_string(m.block_size);
  row.longest = m.longest_matched;
  row.gpu = m.gpu;
  row.cpu = m.cpu;
  row.disk = m.disk;
  std::string other;
  for (const auto& [tier, tokens] : m.other_tiers) {
    other += (other.empty() ? "" : " ") + tier + ":" + std::to_string(tokens);
  }
  if (!other.empty()) row.other = other;
  std::string dp;
  for (const DpTokens& d : m.dp) {
    dp += (dp.empty() ? "" : " ") + std::to_string(d.rank) + ":" + std::to_string(d.tokens);
  }
  if (!dp.empty()) row.dp = dp;
  return row;
}

void PrintAnswer(const QueryRequest& request, const std::vector<Row>& rows) {
  if (rows.empty()) {
    std::printf("no instance holds model '%s' in scope tenant=%s%s%s\n",
                request.match.model.c_str(), request.match.tenant.c_str(),
                request.match.lora.empty() ? "" : (" lora=" + request.match.lora).c_str(),
                request.match.salt.empty() ? "" : " (salted)");
    return;
  }
  TextTable table({"instance", "block", "longest", "GPU", "CPU", "DISK", "other", "DP", "state"});
  for (const Row& r : rows) {
    table.AddRow({r.instance, r.block, std::to_string(r.longest), std::to_string(r.gpu),
                  std::to_string(r.cpu), std::to_string(r.disk), r.other, r.dp, r.state});
  }
  std::fputs(table.Render().c_str(), stdout);
}

void PrintExplanations(const std::vector<MatchExplanation>& explanations) {
  for (const MatchExplanation& e : explanations) {
    std::printf("%s matched nothing: %s: %s\n", e.instance.c_str(), e.reason.c_str(),
                e.detail.c_str());
  }
}

// The /query or /query_by_hash body that asks `request`.
nlohmann::json RequestBody(const QueryRequest& request, bool explain) {
  nlohmann::json body = {{"model", request.match.model}, {"tenant_id", request.match.tenant}};
  if (!request.match.lora.empty()) body["lora_name"] = request.match.lora;
  if (!request.match.salt.empty()) body["cache_salt"] = request.match.salt;
  if (request.match.block_size) body["block_size"] = *request.match.block_size;
  if (request.match.instances.size() == 1) {
    body["instance_id"] = request.match.instances.front();
  } else if (!request.match.instances.empty()) {
    body["instances"] = request.match.instances;
  }
  switch (request.kind) {
    case QueryKind::kTokens:
      body["token_ids"] = request.tokens;
      break;
    case QueryKind::kEngineHashes: {
      nlohmann::json hashes = nlohmann::json::array();
      for (EngineHash h : request.engine_hashes) hashes.push_back(h.value);
      body["block_hash"] = std::move(hashes);
      break;
    }
    case QueryKind::kPrefixHashes: {
      nlohmann::json hashes = nlohmann::json::array();
      for (PrefixHash h : request.prefix_hashes) hashes.push_back(h.value);
      body["seq_hashes"] = std::move(hashes);
      break;
    }
  }
  if (explain) body["explain"] = true;
  return body;
}

struct ServerUrl {
  std::string host;
  int port = 80;
  std::string text;
};

// "http://HOST[:PORT][/]" (port 80 by default) or "HOST:PORT", parsed by ParseNetAddress().
// kInvalidArgument naming --server for another scheme, no host, a path, or a port that is
// missing (without a scheme) or not in 1-65535.
Result<ServerUrl> ParseServerUrl(const std::string& url) {
  const std::string flag = "--server '" + url + "': ";
  auto parsed = ParseNetAddress(url);
  if (!parsed.ok()) {
    return Status::InvalidArgument(flag + "expected http://HOST:PORT (" +
                                   parsed.status().message() + ")");
  }
  const NetAddress& address = *parsed;
  if (!address.scheme.empty() && address.scheme != "http") {
    return Status::InvalidArgument(flag + "only http:// URLs are supported");
  }
  if (address.host.empty() || address.host.find_first_of("?#") != std::string::npos ||
      (!address.path.empty() && address.path != "/") || (address.scheme.empty() && !address.port)) {
    return Status::InvalidArgument(flag + "expected http://HOST:PORT");
  }
  if (address.port && *address.port == 0) return Status::InvalidArgument(flag + "bad port '0'");
  ServerUrl out;
  out.host = address.host;
  out.port = address.port.value_or(80);
  out.text = url;
  return out;
}

// A server's answer, in kvindex's shape ({"data": {tenant: {instance: {...}}}}) or the upstream
// conductor's ({tenant: {instance: {...}}}), as rows of `tenant`.
Result<std::vector<Row>> RowsFromAnswer(const nlohmann::json& answer, const std::string& tenant,
                                        const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Status::Malformed(where + ": unexpected answer: " + what);
  };
  if (!answer.is_object()) return bad("not a JSON object");
  const nlohmann::json* by_tenant = &answer;
  if (auto it = answer.find("data"); it != answer.end()) {
    if (!it->is_object()) return bad("\"data\" is not an object");
    by_tenant = &*it;
  }
  std::vector<Row> rows;
  auto it = by_tenant->find(tenant);
  if (it == by_tenant->end()) return rows;
  if (!it->is_object()) return bad("tenant '" + tenant + "' is not an object");
  auto number = [](const nlohmann::json& m, const char* key) -> uint64_t {
    auto f = m.find(key);
    return f != m.end() && f->is_number_unsigned() ? f->get<uint64_t>() : 0;
  };
  for (const auto& [name, m] : it->items()) {
    if (!m.is_object()) return bad("instance '" + name + "' is not an object");
    Row row;
    row.instance = name;
    row.longest = number(m, "longest_matched");
    row.gpu = number(m, "GPU");
    row.cpu = number(m, "CPU");
    row.disk = number(m, "DISK");
    // The trust fields (kvindex only; the upstream conductor sends none: "-").
    if (auto state = m.find("state"); state != m.end() && state->is_string()) {
      auto since = m.find("since");
      row.state = StateText(
          state->get<std::string>(), number(m, "lost_batches"),
          since != m.end() && since->is_string() ? since->get<std::string>() : std::string("?"));
      MakeValidUtf8(row.state);
    }
    std::string other;
    for (const auto& [key, value] : m.items()) {
      if (key == "longest_matched" || key == "GPU" || key == "CPU" || key == "DISK" ||
          key == "DP" || key == "lost_batches" || !value.is_number_unsigned()) {
        continue;
      }
      other += (other.empty() ? "" : " ") + key + ":" + std::to_string(value.get<uint64_t>());
    }
    if (!other.empty()) row.other = other;
    if (auto dp = m.find("DP"); dp != m.end() && dp->is_object()) {
      std::vector<std::pair<long long, uint64_t>> ranks;
      for (const auto& [rank, tokens] : dp->items()) {
        char* end = nullptr;
        const long long r = std::strtoll(rank.c_str(), &end, 10);
        ranks.emplace_back(r, tokens.is_number_unsigned() ? tokens.get<uint64_t>() : 0);
      }
      std::sort(ranks.begin(), ranks.end());
      std::string text;
      for (const auto& [r, tokens] : ranks) {
        text += (text.empty() ? "" : " ") + std::to_string(r) + ":" + std::to_string(tokens);
      }
      if (!text.empty()) row.dp = text;
    }
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.instance < b.instance; });
  return rows;
}

Status RunServerQuery(const QueryOptions& options, const QueryRequest& request) {
  KVINDEX_ASSIGN_OR_RETURN(ServerUrl url, ParseServerUrl(options.server));
  httplib::Client client(url.host, url.port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  client.set_tcp_nodelay(true);
  const std::string path = request.kind == QueryKind::kTokens ? "/query" : "/query_by_hash";
  const std::string body = DumpJson(RequestBody(request, options.explain));
  httplib::Result res = client.Post(path.c_str(), body, "application/json");
  const std::string where = url.text + path;
  if (!res) {
    const httplib::Error error = res.error();
    return Status::Unavailable(where + ": " +
                               (error == httplib::Error::Connection
                                    ? std::string("cannot connect (is the server running?)")
                                    : "request failed: " + httplib::to_string(error)));
  }
  // An answer nested too deep reads as no JSON at all (the body is then quoted as the message).
  const nlohmann::json answer = JsonTooDeepAt(res->body) == std::string::npos
                                    ? nlohmann::json::parse(res->body, nullptr, false)
                                    : nlohmann::json(nlohmann::json::value_t::discarded);
  if (res->status != 200) {
    std::string message = res->body;
    if (!answer.is_discarded() && answer.is_object() && answer.contains("error") &&
        answer["error"].is_string()) {
      message = answer["error"].get<std::string>();
    }
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r'))
      message.pop_back();
    // One stderr line, valid UTF-8, whatever the server sent.
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::replace(message.begin(), message.end(), '\r', ' ');
    if (message.size() > 1000) message = message.substr(0, 1000) + "...";
    MakeValidUtf8(message);
    return Status::Unavailable(where + ": HTTP " + std::to_string(res->status) + ": " + message);
  }
  if (answer.is_discarded()) return Status::Malformed(where + ": the answer is not JSON");
  KVINDEX_ASSIGN_OR_RETURN(std::vector<Row> rows,
                           RowsFromAnswer(answer, request.match.tenant, where));
  if (!options.json.empty()) {
    // Always kvindex's shape, whichever the server answered in.
    nlohmann::json out = answer;
    if (!answer.contains("data")) out = nlohmann::json{{"data", answer}};
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, out));
    if (options.json == "-") return Status::Ok();
  }
  PrintAnswer(request, rows);
  if (options.explain) {
    auto it = answer.find("explain");
    if (it == answer.end() || !it->is_object()) {
      std::fprintf(stderr,
                   "kvindex query: %s gave no explanation (the upstream conductor, and kvindex "
                   "under --compat conductor, give none)\n",
                   where.c_str());
      return Status::Ok();
    }
    std::vector<MatchExplanation> explanations;
    for (const auto& [name, why] : it->items()) {
      MatchExplanation e;
      e.instance = name;
      // A member of another type reads as absent (value() would throw on it).
      e.reason = "?";
      if (why.is_object()) {
        if (auto r = why.find("reason"); r != why.end() && r->is_string()) e.reason = *r;
        if (auto d = why.find("detail"); d != why.end() && d->is_string()) e.detail = *d;
      }
      explanations.push_back(std::move(e));
    }
    PrintExplanations(explanations);
  }
  return Status::Ok();
}

}  // namespace

Status RunQuery(const QueryOptions& options) {
  const int given = (options.capture.empty() ? 0 : 1) + (options.server.empty() ? 0 : 1) +
                    (options.snapshot.empty() ? 0 : 1);
  if (given != 1) {
    return Status::InvalidArgument("give exactly one of --capture, --snapshot or --server");
  }
  KVINDEX_ASSIGN_OR_RETURN(QueryRequest request, BuildRequest(options));
  if (!options.server.empty()) return RunServerQuery(options, request);
  // The index answering, and the source definitions --explain reads.
  std::unique_ptr<LoadedCapture> capture;
  LoadedSnapshot snapshot;
  PrefixIndex* index = nullptr;
  std::vector<SourceConfig> sources;
  if (!options.snapshot.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(snapshot, LoadedSnapshot::Load(options.snapshot));
    index = snapshot.index.get();
    sources = snapshot.info.sources;
  } else {
    KVINDEX_ASSIGN_OR_RETURN(capture, LoadedCapture::Load(options.capture, IndexOptions{}));
    for (const CaptureProblem& p : capture->problems()) {
      std::fprintf(stderr, "kvindex query: %s: byte %llu: %s\n", p.file.c_str(),
                   static_cast<unsigned long long>(p.offset), p.status.message().c_str());
    }
    index = &capture->index();
    for (size_t i = 0; i < capture->ingestor().source_count(); ++i) {
      sources.push_back(capture->ingestor().config(SourceId{static_cast<uint32_t>(i)}));
    }
  }
  const Result<PrefixMatch> match = MatchRequest(*index, request);
  if (!match.ok()) return match.status();
  // States from what the capture held (its losses, late joins, restarts) or the snapshot stored;
  // never stale offline.
  const InstanceTrustMap trust =
      capture != nullptr ? InstanceTrusts(capture->ingestor()) : SnapshotTrusts(snapshot.info);
  std::vector<MatchExplanation> explanations;
  if (options.explain) {
    ExplainContext context;  // offline: the token forms the capture showed, never a silence
    if (capture != nullptr) {
      for (size_t i = 0; i < capture->ingestor().source_count(); ++i) {
        const SourceId id{static_cast<uint32_t>(i)};
        const SourceConfig& config = capture->ingestor().config(id);
        const SourceCounters& counters = capture->ingestor().counters(id);
        context.sources.push_back({.instance = config.name,
                                   .name = SourceDisplayName(config),
                                   .format = config.format,
                                   .bigram_events = counters.bigram_events,
                                   .token_form_mismatches = counters.token_form_mismatches});
      }
    }
    KVINDEX_ASSIGN_OR_RETURN(explanations, ExplainMatch(*index, request, *match, sources, context));
  }
  if (!options.json.empty()) {
    nlohmann::json out = nlohmann::json::parse(
        RenderQueryAnswer(*match, request.match.tenant, false, &trust), nullptr, false);
    const nlohmann::json explain =
        options.explain ? nlohmann::json::parse(RenderExplanations(explanations), nullptr, false)
                        : nlohmann::json();
    if (!out.is_object() || explain.is_discarded()) {
      return Status::Internal("the answer did not render as JSON");
    }
    if (options.explain) out["explain"] = explain;
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, out));
    if (options.json == "-") return Status::Ok();
  }
  std::vector<Row> rows;
  for (const InstanceMatch& m : match->instances) rows.push_back(RowFor(m, trust));
  PrintAnswer(request, rows);
  if (options.explain) PrintExplanations(explanations);
  return Status::Ok();
}

void AddQueryCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<QueryOptions>();
  CLI::App* cmd = app.add_subcommand(
      "query",
      "How many leading tokens of a prompt each instance holds, per tier and DP rank, "
      "answered from a capture or by a running server");
  auto* capture =
      cmd->add_option("--capture", options->capture, "The files of one capture (.kvcap), in order")
          ->check(cli::InputFile());
  cmd->add_option("--server", options->server,
                  "Ask a running server instead (http://HOST:PORT): kvindex subscribe --http, or "
                  "the upstream conductor")
      ->excludes(capture);
  cmd->add_option("--snapshot", options->snapshot,
                  "Answer from a snapshot file (.kvsnap: subscribe --snapshot-dir, replay "
                  "--write-snapshot) instead")
      ->check(cli::InputFile())
      ->excludes(capture);
  cmd->add_flag("--explain", options->explain,
                "Also say why each instance that matched nothing did (unknown model or scope, "
                "block size, salt, LoRA, first block absent)");
  cmd->add_option("--model", options->model, "Model name of the query's scope")
      ->required()
      ->check(cli::Utf8());
  // A token list may hold thousands of ids; CLI11 splits, checks and converts them item by item.
  CommaList(cmd->add_option("--tokens", options->tokens, "Prompt token ids, comma separated"))
      ->transform(Decimal())
      ->check(CLI::Range(TokenId{0}, std::numeric_limits<TokenId>::max()).description(""));
  cmd->add_option("--tokens-file", options->tokens_file,
                  "File of prompt token ids (comma/whitespace separated, or a JSON array)")
      ->check(cli::InputFile());
  CommaList(cmd->add_option("--hashes", options->hashes,
                            "Engine block hashes instead of tokens, comma separated (decimal, 0x "
                            "hex, or negative for SGLang)"))
      ->transform(Hash());
  CommaList(cmd->add_option("--prefix-hashes", options->prefix_hashes,
                            "kvindex prefix hashes instead of tokens, comma separated"))
      ->transform(Hash());
  cmd->add_option("--block-size", options->block_size,
                  "Tokens per block (default: each instance's own)")
      ->check(cli::Positive());
  cmd->add_option("--tenant", options->tenant, "Tenant (default: default)")->check(cli::Utf8());
  cmd->add_option("--lora-name", options->lora_name, "LoRA adapter name (default: none)")
      ->check(cli::Utf8());
  cmd->add_option("--salt", options->salt, "The request's cache_salt (default: none)")
      ->check(cli::Utf8());
  cmd->add_option("--instance", options->instances, "Answer only for this instance (repeatable)")
      ->check(cli::Utf8());
  cmd->add_option("--json", options->json, "Write the /query answer to FILE ('-' = stdout)");
  cmd->callback([options, &outcome] {
    outcome.command = "query";
    outcome.status = RunQuery(*options);
  });
}

}  // namespace kvindex::cli
