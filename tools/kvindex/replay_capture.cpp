#include "replay_capture.h"
#include "snapshot_tools.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include "kvindex/core/json_depth.h"
#include "kvindex/query/query_json.h"

#include "capture_tools.h"
#include "report.h"
#include "trace_export.h"

namespace kvindex::cli {
namespace {

using Json = nlohmann::json;

Json HashList(const std::vector<EngineHash>& hashes) {
  Json out = Json::array();
  for (EngineHash h : hashes) out.push_back(h.value);
  return out;
}

Json OptionalText(const std::optional<std::string>& text) {
  return text ? Json(*text) : Json(nullptr);
}

// One applied event as a --dump line (docs/cli.md "The --dump line").
Json DumpLine(const SourceConfig& source, uint64_t seq, int64_t recv_ns, const EventBatch& batch,
              const Event& event) {
  Json line = {{"source", SourceDisplayName(source)}, {"instance", source.name}};
  const EventScopeFields* scope = std::visit(
      [](const auto& e) -> const EventScopeFields* {
        if constexpr (requires { e.scope; }) {
          return &e.scope;
        } else {
          return nullptr;
        }
      },
      event);
  std::optional<DpRank> rank = batch.dp_rank;
  if (scope != nullptr && scope->dp_rank) rank = scope->dp_rank;
  if (!rank) rank = source.dp_rank;
  line["dp_rank"] = rank ? Json(*rank) : Json(nullptr);
  line["seq"] = seq;
  line["ts"] = batch.ts;
  line["recv_ns"] = recv_ns;
  line["parent_block_hash"] = nullptr;
  line["token_ids"] = Json::array();
  line["block_size"] = nullptr;
  line["tier"] = nullptr;
  line["lora_name"] = scope != nullptr ? OptionalText(scope->lora_name) : Json(nullptr);
  line["lora_id"] = scope != nullptr && scope->lora_id ? Json(*scope->lora_id) : Json(nullptr);
  if (const auto* stored = std::get_if<BlockStored>(&event)) {
    line["type"] = "stored";
    line["block_hashes"] = HashList(stored->block_hashes);
    if (stored->parent) line["parent_block_hash"] = stored->parent->value;
    line["token_ids"] = stored->token_ids;
    line["block_size"] = stored->scope.block_size
                             ? Json(*stored->scope.block_size)
                             : (source.block_size ? Json(source.block_size) : Json(nullptr));
    line["tier"] = std::string(stored->tier.value_or(Tier::Gpu()).name());
    if (stored->wire.object_key) line["key"] = *stored->wire.object_key;
    if (stored->scope.group) line["group"] = *stored->scope.group;
    // A sparse event: token_ids run from the parent on, block_offsets name each hash's chunk.
    if (!stored->block_offsets.empty()) line["block_offsets"] = stored->block_offsets;
  } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
    line["type"] = "removed";
    line["block_hashes"] = HashList(removed->block_hashes);
    line["tier"] = std::string(removed->tier.value_or(Tier::Gpu()).name());
    if (removed->scope.group) line["group"] = *removed->scope.group;
  } else if (const auto* cleared = std::get_if<AllCleared>(&event)) {
    line["type"] = "cleared";
    line["block_hashes"] = Json::array();
    if (cleared->tier) line["tier"] = std::string(cleared->tier->name());
  } else if (const auto* update = std::get_if<StoreUpdate>(&event)) {
    // A Mooncake store object's full replica set: an empty set removed the object.
    line["type"] = update->replicas.empty() ? "removed" : "stored";
    line["block_hashes"] = Json::array();
    line["key"] = update->key;
    Json tiers = Json::array();
    for (const Replica& replica : update->replicas)
      tiers.push_back(std::string(replica.tier.name()));
    line["tiers"] = std::move(tiers);
  }
  return line;
}

struct PendingQuery {
  Json id_json;  // as given (string or number)
  QueryRequest request;
  std::optional<Json> expect;
  size_t line = 0;
  bool answered = false;
};

Result<std::vector<PendingQuery>> ReadQueries(
    const std::string& path, std::multimap<std::pair<std::string, uint64_t>, size_t>& after) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open queries file");
  std::vector<PendingQuery> queries;
  std::string text;
  size_t line_number = 0;
  while (std::getline(in, text)) {
    ++line_number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ": line " + std::to_string(line_number);
    if (const size_t at = JsonTooDeepAt(text); at != std::string::npos) {
      return Status::InvalidArgument(where + ": byte " + std::to_string(at) +
                                     ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                                     " levels");
    }
    Json line;
    try {
      line = Json::parse(text);
    } catch (const Json::exception&) {
      return Status::InvalidArgument(where + ": invalid JSON");
    }
    if (!line.is_object() || !line.contains("query") || !line["query"].is_object()) {
      return Status::InvalidArgument(
          where + ": expected {\"id\", \"query\": {...}, \"after\"?, \"expect\"?}");
    }
    PendingQuery q;
    q.line = line_number;
    q.id_json = line.value("id", Json(line_number));
    auto request = ParseQueryRequest(line["query"].dump());
    if (!request.ok()) return request.status().WithContext(where + ": query");
    q.request = std::move(request).value();
    if (line.contains("expect") && !line["expect"].is_null()) {
      if (!line["expect"].is_object())
        return Status::InvalidArgument(where + ": expect must be an object");
      q.expect = line["expect"];
    }
    if (line.contains("after") && !line["after"].is_null()) {
      const Json& a = line["after"];
      if (!a.is_object() || !a.contains("source") || !a["source"].is_string() ||
          !a.contains("seq") || !a["seq"].is_number_unsigned()) {
        return Status::InvalidArgument(where + ": after must be {\"source\": name, \"seq\": n}");
      }
      after.emplace(std::make_pair(a["source"].get<std::string>(), a["seq"].get<uint64_t>()),
                    queries.size());
    }
    queries.push_back(std::move(q));
  }
  return queries;
}

// Aggregates over the answered queries (stderr and --json).
struct QueryTotals {
  uint64_t answered = 0;
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  uint64_t tokens = 0;        // full-block tokens asked about (best instance's block size)
  uint64_t best_matched = 0;  // Σ over queries of the best instance's longest_matched
};

// The stdout of a capture replay (buffered, written in chunks) and the answers to its queries
// with their checks.
struct ReplayOutput {
  std::string out;
  std::vector<std::string> differences;
  QueryTotals totals;

  void Flush(bool force) {
    if (out.size() >= (1u << 16) || (force && !out.empty())) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }

  // Answers `q` from `index` as it is now: one {"id", "data"} line, and a difference for every
  // instance whose answer is not the expected one.
  void Answer(PendingQuery& q, PrefixIndex& index) {
    q.answered = true;
    ++totals.answered;
    auto match = MatchRequest(index, q.request);
    Json data = Json::object();
    if (match.ok()) {
      data = Json::parse(RenderQueryAnswer(*match, q.request.match.tenant))["data"];
      uint64_t best = 0;
      for (const InstanceMatch& m : match->instances) best = std::max(best, m.longest_matched);
      totals.best_matched += best;
      if (q.request.kind == QueryKind::kTokens && !match->instances.empty()) {
        const uint32_t bs = match->instances.front().block_size;
        totals.tokens += bs == 0 ? 0 : q.request.tokens.size() / bs * bs;
      }
    } else {
      differences.push_back("query " + q.id_json.dump() + " (line " + std::to_string(q.line) +
                            "): " + match.status().message());
    }
    out += Json{{"id", q.id_json}, {"data", data}}.dump();
    out += '\n';
    if (q.expect) {
      ++totals.checked;
      const Json tenant_answers =
          data.contains(q.request.match.tenant) ? data[q.request.match.tenant] : Json::object();
      bool differs = false;
      for (const auto& [instance, expected] : q.expect->items()) {
        const Json actual =
            tenant_answers.contains(instance) ? tenant_answers[instance] : Json(nullptr);
        if (actual != expected) {
          differs = true;
          differences.push_back("query " + q.id_json.dump() + " (line " + std::to_string(q.line) +
                                "): instance " + instance + ": expected " + expected.dump() +
                                ", got " + actual.dump());
        }
      }
      if (differs) ++totals.mismatches;
    }
    Flush(false);
  }
};

// The batches lost to damaged stretches of the capture (docs/cli.md "Damaged captures"): one
// stderr line per source and stretch, one line of totals, and the same as JSON.
Json DamageReport(const LoadedCapture& result, const std::vector<std::string>& files) {
  const CaptureReplayStats& stats = result.replay_stats();
  Json losses = Json::array();
  for (const CaptureDamageLoss& loss : stats.damage_losses) {
    const std::string source = SourceDisplayName(result.ingestor().config(loss.source));
    const std::string& file =
        loss.file_index < files.size() ? files[loss.file_index] : files.back();
    std::fprintf(stderr,
                 "kvindex replay: %s: byte %llu: damage: source '%s': %llu batch(es) lost, seq "
                 "%llu..%llu\n",
                 file.c_str(), static_cast<unsigned long long>(loss.offset), source.c_str(),
                 static_cast<unsigned long long>(loss.count),
                 static_cast<unsigned long long>(loss.first_seq),
                 static_cast<unsigned long long>(loss.first_seq + loss.count - 1));
    losses.push_back({{"file", file},
                      {"offset", loss.offset},
                      {"source", source},
                      {"first_seq", loss.first_seq},
                      {"count", loss.count}});
  }
  if (stats.damaged_stretches != 0) {
    std::fprintf(stderr,
                 "kvindex replay: %llu damaged stretch(es) read around, %llu batch(es) lost to "
                 "them\n",
                 static_cast<unsigned long long>(stats.damaged_stretches),
                 static_cast<unsigned long long>(stats.damage_lost));
  }
  return {{"stretches", stats.damaged_stretches},
          {"lost", stats.damage_lost},
          {"losses", std::move(losses)}};
}

// After the capture is read: the --to-trace summary, the index summary (when nothing else went to
// stdout), the damage found, the query totals, --json, and every difference.
Status Report(const CaptureReplayArgs& args, const LoadedCapture& result, TraceExporter* exporter,
              bool has_queries, const ReplayOutput& output) {
  if (exporter) {
    KVINDEX_RETURN_IF_ERROR(exporter->Finish());
    std::fprintf(stderr, "kvindex replay: --to-trace %s: %s\n", args.to_trace.c_str(),
                 exporter->SummaryLine().c_str());
  }
  if (!args.dump && args.queries.empty() && !exporter && args.json != "-") {
    std::fputs(result.RenderSummary().c_str(), stdout);
  }
  for (const CaptureProblem& p : result.problems()) {
    std::fprintf(stderr, "kvindex replay: %s: byte %llu: %s (%llu bytes skipped)\n", p.file.c_str(),
                 static_cast<unsigned long long>(p.offset), p.status.message().c_str(),
                 static_cast<unsigned long long>(p.skipped_bytes));
  }
  Json summary = result.SummaryJson();
  summary["damage"] = DamageReport(result, args.inputs);
  if (exporter) summary["to_trace"] = exporter->StatsJson();
  const QueryTotals& totals = output.totals;
  if (has_queries) {
    const double hit = totals.tokens == 0 ? 0.0
                                          : static_cast<double>(totals.best_matched) /
                                                static_cast<double>(totals.tokens);
    summary["queries"] = {{"answered", totals.answered},
                          {"checked", totals.checked},
                          {"mismatches", totals.mismatches},
                          {"tokens", totals.tokens},
                          {"best_matched_tokens", totals.best_matched},
                          {"hit_rate", hit}};
    std::fprintf(stderr,
                 "kvindex replay: %llu queries, %llu checked, %llu differ; best-instance hit rate "
                 "%s\n",
                 static_cast<unsigned long long>(totals.answered),
                 static_cast<unsigned long long>(totals.checked),
                 static_cast<unsigned long long>(totals.mismatches), FormatPercent(hit).c_str());
  }
  if (!args.json.empty()) KVINDEX_RETURN_IF_ERROR(WriteJson(args.json, summary));
  for (const std::string& d : output.differences) {
    std::fprintf(stderr, "kvindex replay: %s\n", d.c_str());
  }
  if (totals.mismatches != 0 || !output.differences.empty()) {
    return Status::Malformed(std::to_string(totals.mismatches) +
                             " queries differ from their expectation (listed above)");
  }
  return Status::Ok();
}

}  // namespace

Status RunCaptureReplay(const CaptureReplayArgs& args) {
  std::multimap<std::pair<std::string, uint64_t>, size_t> after;
  std::vector<PendingQuery> queries;
  if (!args.queries.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(queries, ReadQueries(args.queries, after));
  }
  std::unique_ptr<TraceExporter> exporter;
  if (!args.to_trace.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(exporter, TraceExporter::Open(args.to_trace));
  }
  ReplayOutput output;
  LoadedCapture* loaded_ptr = nullptr;
  auto hook = [&](const SourceConfig& source, uint64_t seq, int64_t recv_ns,
                  const EventBatch& batch) {
    if (exporter) exporter->OnApplied(source, seq, recv_ns, batch);
    if (args.dump) {
      for (const Event& event : batch.events) {
        output.out += DumpJson(DumpLine(source, seq, recv_ns, batch, event));
        output.out += '\n';
      }
      output.Flush(false);
    }
    if (!after.empty()) {
      const auto range = after.equal_range({SourceDisplayName(source), seq});
      for (auto it = range.first; it != range.second; ++it) {
        if (!queries[it->second].answered) output.Answer(queries[it->second], loaded_ptr->index());
      }
    }
  };

  IndexOptions index_options;
  index_options.max_blocks = args.max_blocks;
  auto loaded = LoadedCapture::Create(index_options, hook);
  loaded_ptr = loaded.get();  // queries at positions are answered while the capture is read
  KVINDEX_RETURN_IF_ERROR(loaded->Read(args.inputs));
  for (PendingQuery& q : queries) {
    if (!q.answered) output.Answer(q, loaded->index());
  }
  output.Flush(true);
  std::fflush(stdout);
  if (!args.write_snapshot.empty()) {
    KVINDEX_RETURN_IF_ERROR(
        WriteIndexSnapshot(loaded->index(), &loaded->ingestor(), args.write_snapshot).status());
  }
  return Report(args, *loaded, exporter.get(), !queries.empty(), output);
}

}  // namespace kvindex::cli
