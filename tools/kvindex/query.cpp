// `kvindex query`: one question — how many leading tokens of this prompt (or these hashes) does
// each instance hold, in which tier and DP rank — asked of a capture (the index is rebuilt from
// it). A readable table on stdout; `--json FILE` writes the /query answer shape.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "capture_tools.h"
#include "commands.h"
#include "kvindex/query_json.h"
#include "report.h"

namespace kvindex::cli {
namespace {

struct QueryOptions {
  std::vector<std::string> capture;  // the files of one capture
  std::string model;
  std::string tokens;       // "1,2,3"
  std::string tokens_file;  // whitespace/comma separated ids, or a JSON array
  std::string hashes;       // engine hashes
  std::string prefix_hashes;
  uint32_t block_size = 0;
  std::string tenant;
  std::string lora_name;
  std::string salt;
  std::vector<std::string> instances;
  std::string json;
};

// Splits "1,2 3\n4" into its numbers; `what` names the flag in errors.
Result<std::vector<uint64_t>> ParseNumberList(const std::string& text, const std::string& what,
                                              bool allow_hex) {
  std::vector<uint64_t> out;
  std::string item;
  auto flush = [&]() -> Status {
    if (item.empty()) return Status::Ok();
    const bool hex = allow_hex && item.size() > 2 && item[0] == '0' && (item[1] == 'x' || item[1] == 'X');
    size_t used = 0;
    uint64_t value = 0;
    try {
      if (item[0] == '-') {
        if (!allow_hex) throw std::invalid_argument("negative");
        value = static_cast<uint64_t>(std::stoll(item, &used, 10));  // two's complement (SGLang)
      } else {
        value = std::stoull(item, &used, hex ? 16 : 10);
      }
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) {
      return Status::InvalidArgument(what + ": '" + item + "' is not a number");
    }
    out.push_back(value);
    item.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') {
      KVINDEX_RETURN_IF_ERROR(flush());
    } else {
      item.push_back(c);
    }
  }
  KVINDEX_RETURN_IF_ERROR(flush());
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
  if (!options.tokens.empty() || !options.tokens_file.empty()) {
    std::string text = options.tokens;
    std::string what = "--tokens";
    if (!options.tokens_file.empty()) {
      std::ifstream in(options.tokens_file);
      if (!in) return Status::NotFound(options.tokens_file + ": cannot open");
      std::ostringstream buffer;
      buffer << in.rdbuf();
      text = buffer.str();
      what = options.tokens_file;
    }
    KVINDEX_ASSIGN_OR_RETURN(auto ids, ParseNumberList(text, what, false));
    for (uint64_t id : ids) {
      if (id > 0xffffffffu) return Status::InvalidArgument(what + ": token id " + std::to_string(id) + " exceeds 32 bits");
      request.tokens.push_back(static_cast<TokenId>(id));
    }
    request.kind = QueryKind::kTokens;
  } else if (!options.hashes.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(auto hashes, ParseNumberList(options.hashes, "--hashes", true));
    for (uint64_t h : hashes) request.engine_hashes.push_back(EngineHash{h});
    request.kind = QueryKind::kEngineHashes;
  } else {
    KVINDEX_ASSIGN_OR_RETURN(auto hashes, ParseNumberList(options.prefix_hashes, "--prefix-hashes", true));
    for (uint64_t h : hashes) request.prefix_hashes.push_back(PrefixHash{h});
    request.kind = QueryKind::kPrefixHashes;
  }
  return request;
}

std::string DpText(const InstanceMatch& m) {
  std::string out;
  for (const DpTokens& d : m.dp) {
    if (!out.empty()) out += " ";
    out += std::to_string(d.rank) + ":" + std::to_string(d.tokens);
  }
  return out.empty() ? "-" : out;
}

std::string OtherTiersText(const InstanceMatch& m) {
  std::string out;
  for (const auto& [tier, tokens] : m.other_tiers) {
    if (!out.empty()) out += " ";
    out += tier + ":" + std::to_string(tokens);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

Status RunQuery(const QueryOptions& options) {
  KVINDEX_ASSIGN_OR_RETURN(QueryRequest request, BuildRequest(options));
  KVINDEX_ASSIGN_OR_RETURN(auto loaded, LoadedCapture::Load(options.capture, IndexOptions{}));
  for (const CaptureProblem& p : loaded->problems()) {
    std::fprintf(stderr, "kvindex query: %s: byte %llu: %s\n", p.file.c_str(),
                 static_cast<unsigned long long>(p.offset), p.status.message().c_str());
  }
  const Result<PrefixMatch> match = MatchRequest(loaded->index(), request);
  if (!match.ok()) return match.status();
  if (!options.json.empty()) {
    KVINDEX_RETURN_IF_ERROR(
        WriteJson(options.json, nlohmann::json::parse(RenderQueryAnswer(*match, request.match.tenant))));
    if (options.json == "-") return Status::Ok();
  }
  if (match->instances.empty()) {
    std::printf("no instance holds model '%s' in scope tenant=%s%s%s\n", request.match.model.c_str(),
                request.match.tenant.c_str(),
                request.match.lora.empty() ? "" : (" lora=" + request.match.lora).c_str(),
                request.match.salt.empty() ? "" : " (salted)");
    return Status::Ok();
  }
  TextTable table({"instance", "block", "longest", "GPU", "CPU", "DISK", "other", "DP"});
  for (const InstanceMatch& m : match->instances) {
    table.AddRow({std::string(m.instance), std::to_string(m.block_size),
                  std::to_string(m.longest_matched), std::to_string(m.gpu), std::to_string(m.cpu),
                  std::to_string(m.disk), OtherTiersText(m), DpText(m)});
  }
  std::fputs(table.Render().c_str(), stdout);
  return Status::Ok();
}

void AddQueryCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<QueryOptions>();
  CLI::App* cmd = app.add_subcommand(
      "query", "How many leading tokens of a prompt each instance holds, per tier and DP rank, "
               "answered from a capture");
  cmd->add_option("--capture", options->capture, "The files of one capture (.kvcap), in order")
      ->required();
  cmd->add_option("--model", options->model, "Model name of the query's scope")->required();
  cmd->add_option("--tokens", options->tokens, "Prompt token ids, comma separated");
  cmd->add_option("--tokens-file", options->tokens_file,
                  "File of prompt token ids (comma/whitespace separated, or a JSON array)");
  cmd->add_option("--hashes", options->hashes,
                  "Engine block hashes instead of tokens, comma separated (decimal, 0x hex, or "
                  "negative for SGLang)");
  cmd->add_option("--prefix-hashes", options->prefix_hashes,
                  "kvindex prefix hashes instead of tokens, comma separated");
  cmd->add_option("--block-size", options->block_size,
                  "Tokens per block (default: each instance's own)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tenant", options->tenant, "Tenant (default: default)");
  cmd->add_option("--lora-name", options->lora_name, "LoRA adapter name (default: none)");
  cmd->add_option("--salt", options->salt, "The request's cache_salt (default: none)");
  cmd->add_option("--instance", options->instances, "Answer only for this instance (repeatable)");
  cmd->add_option("--json", options->json, "Write the /query answer to FILE ('-' = stdout)");
  cmd->callback([options, &outcome] {
    outcome.command = "query";
    outcome.status = RunQuery(*options);
  });
}

}  // namespace kvindex::cli
