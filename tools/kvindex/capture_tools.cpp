#include "capture_tools.h"

#include <variant>

#include "kvindex/ingest/source_counters.h"
#include "report.h"

namespace kvindex::cli {
namespace {

std::string TierName(const std::optional<Tier>& tier) {
  return std::string(tier.value_or(Tier::Gpu()).name());
}

}  // namespace

std::unique_ptr<LoadedCapture> LoadedCapture::Create(IndexOptions index_options,
                                                    AppliedHook on_applied) {
  std::unique_ptr<LoadedCapture> loaded(new LoadedCapture());
  loaded->index_ = std::make_unique<PrefixIndex>(index_options);
  loaded->ingestor_ = std::make_unique<Ingestor>(loaded->index_.get(), loaded.get());
  loaded->replayer_ = std::make_unique<CaptureReplayer>(*loaded->ingestor_);
  loaded->on_applied_ = std::move(on_applied);
  return loaded;
}

Result<std::unique_ptr<LoadedCapture>> LoadedCapture::Load(const std::vector<std::string>& paths,
                                                           IndexOptions index_options,
                                                           AppliedHook on_applied) {
  auto loaded = Create(index_options, std::move(on_applied));
  KVINDEX_RETURN_IF_ERROR(loaded->Read(paths));
  return loaded;
}

Status LoadedCapture::Read(const std::vector<std::string>& paths) {
  KVINDEX_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(paths));
  const Status status = replayer_->ApplyAll(*reader);
  problems_.insert(problems_.end(), reader->problems().begin(), reader->problems().end());
  records_ += reader->records_read();
  return status;
}

void LoadedCapture::OnApplied(SourceId source, uint64_t seq, int64_t recv_ns,
                              const EventBatch& batch) {
  const SourceConfig& config = ingestor_->config(source);
  for (const Event& event : batch.events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      tally_[{config.name, TierName(stored->tier)}].stored += stored->block_hashes.size();
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      tally_[{config.name, TierName(removed->tier)}].removed += removed->block_hashes.size();
    }
  }
  if (on_applied_) on_applied_(config, seq, recv_ns, batch);
}

nlohmann::json LoadedCapture::SummaryJson() const {
  using nlohmann::json;
  const IndexStats stats = index_->stats();
  json tiers = json::array();
  std::map<std::pair<std::string, std::string>, uint64_t> resident;
  for (const InstanceStats& instance : stats.instances) {
    for (const TierPresences& tier : instance.tiers) {
      resident[{instance.instance, tier.tier}] = tier.presences;
    }
  }
  std::map<std::pair<std::string, std::string>, TierTally> rows = tally_;
  for (const auto& [key, count] : resident) rows[key];  // resident without events (none today)
  for (const auto& [key, tally] : rows) {
    const auto it = resident.find(key);
    tiers.push_back({{"instance", key.first},
                     {"tier", key.second},
                     {"stored", tally.stored},
                     {"removed", tally.removed},
                     {"resident", it == resident.end() ? 0 : it->second}});
  }
  json sources = json::array();
  for (uint32_t i = 0; i < ingestor_->source_count(); ++i) {
    const SourceId id{i};
    const SourceCounters& c = ingestor_->counters(id);
    json source = {{"source", SourceDisplayName(ingestor_->config(id))},
                   {"instance", ingestor_->config(id).name}};
    AddSourceCounters(source, c, TransportCounters{});  // offline: no transport counters
    sources.push_back(std::move(source));
  }
  json problems = json::array();
  for (const CaptureProblem& p : problems_) {
    problems.push_back({{"file", p.file},
                        {"offset", p.offset},
                        {"skipped_bytes", p.skipped_bytes},
                        {"tail", p.tail},
                        {"problem", p.status.message()}});
  }
  const CaptureReplayStats& r = replayer_->stats();
  return json{{"records", records_},
              {"messages", r.messages},
              {"replayed", r.replayed},
              {"blocks", stats.blocks},
              {"presences", stats.presences},
              {"orphans", stats.orphans},
              {"tokenless", stats.tokenless},
              {"unmapped", stats.unmapped},
              {"evictions", stats.evictions},
              {"tiers", std::move(tiers)},
              {"sources", std::move(sources)},
              {"problems", std::move(problems)}};
}

std::string LoadedCapture::RenderSummary() const {
  const nlohmann::json summary = SummaryJson();
  std::string out;
  TextTable tiers({"instance", "tier", "stored", "removed", "resident"});
  for (const auto& row : summary["tiers"]) {
    tiers.AddRow({row["instance"].get<std::string>(), row["tier"].get<std::string>(),
                  FormatCount(row["stored"].get<uint64_t>()),
                  FormatCount(row["removed"].get<uint64_t>()),
                  FormatCount(row["resident"].get<uint64_t>())});
  }
  out += tiers.Render();
  out += "\n";
  TextTable sources({"source", "received", "applied", "malformed", "gaps", "recovered", "lost",
                     "restarts", "orphans", "tokenless"});
  for (const auto& row : summary["sources"]) {
    sources.AddRow({row["source"].get<std::string>(), FormatCount(row["received"].get<uint64_t>()),
                    FormatCount(row["applied"].get<uint64_t>()),
                    // The table's malformed column adds the frame errors (docs/cli.md).
                    FormatCount(row["malformed"].get<uint64_t>() +
                                row["frame_errors"].get<uint64_t>()),
                    FormatCount(row["gaps"].get<uint64_t>()),
                    FormatCount(row["recovered"].get<uint64_t>()),
                    FormatCount(row["lost"].get<uint64_t>()),
                    FormatCount(row["restarts"].get<uint64_t>()),
                    FormatCount(row["orphans"].get<uint64_t>()),
                    FormatCount(row["tokenless"].get<uint64_t>())});
  }
  out += sources.Render();
  out += "\n" + FormatCount(summary["records"].get<uint64_t>()) + " records, " +
         FormatCount(summary["blocks"].get<uint64_t>()) + " resident blocks, " +
         FormatCount(summary["presences"].get<uint64_t>()) + " presences, " +
         FormatCount(summary["unmapped"].get<uint64_t>()) + " unmapped, " +
         FormatCount(summary["evictions"].get<uint64_t>()) + " evictions\n";
  return out;
}

}  // namespace kvindex::cli
