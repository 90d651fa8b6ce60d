// Snapshot summaries and loading for the tool (snapshot_tools.h).
#include "snapshot_tools.h"

#include <fstream>
#include <span>
#include <string>
#include <utility>

#include <httplib.h>

#include "kvindex/core/address.h"
#include "kvindex/core/clock.h"
#include "kvindex/index/index_state.h"

#include "report.h"

namespace kvindex::cli {

Result<LoadedSnapshot> LoadedSnapshot::Load(const std::string& path, IndexOptions options) {
  LoadedSnapshot out;
  out.index = std::make_unique<PrefixIndex>(options);
  KVINDEX_ASSIGN_OR_RETURN(out.info, ReadSnapshotFile(path, out.index.get()));
  return out;
}

nlohmann::json SnapshotSummaryJson(const LoadedSnapshot& loaded) {
  using nlohmann::json;
  const IndexStats stats = loaded.index->stats();
  json tiers = json::array();
  for (const InstanceStats& instance : stats.instances) {
    for (const TierPresences& tier : instance.tiers) {
      tiers.push_back(
          {{"instance", instance.instance}, {"tier", tier.tier}, {"resident", tier.presences}});
    }
  }
  json sources = json::array();
  for (size_t i = 0; i < loaded.info.sources.size(); ++i) {
    const SourceSeqState& s = loaded.info.seq[i];
    json row = {{"source", SourceDisplayName(loaded.info.sources[i])},
                {"instance", loaded.info.sources[i].name},
                {"endpoint", loaded.info.sources[i].endpoint},
                {"publisher", s.publisher},
                {"exact", s.trust.exact},
                {"state", s.trust.exact ? "exact" : "degraded"},
                {"reason", std::string(TrustReasonName(s.trust.reason))},
                {"lost", s.lost},
                {"lost_batches", s.trust.lost_batches}};
    row["watermark"] = s.watermark ? json(*s.watermark) : json(nullptr);
    row["last_loss_ns"] = s.trust.last_loss_ns != 0 ? json(s.trust.last_loss_ns) : json(nullptr);
    sources.push_back(std::move(row));
  }
  return {{"snapshot_version", loaded.info.version},
          {"created_ns", loaded.info.created_ns},
          {"bytes", loaded.info.bytes},
          {"blocks", stats.blocks},
          {"presences", stats.presences},
          {"engine_hashes", stats.engine_hashes},
          {"scopes", stats.scopes},
          {"orphans", stats.orphans},
          {"unmapped", stats.unmapped},
          {"tiers", tiers},
          {"sources", sources}};
}

std::string RenderSnapshotSummary(const LoadedSnapshot& loaded) {
  const nlohmann::json summary = SnapshotSummaryJson(loaded);
  std::string out;
  TextTable tiers({"instance", "tier", "resident"});
  for (const auto& row : summary["tiers"]) {
    tiers.AddRow({row["instance"].get<std::string>(), row["tier"].get<std::string>(),
                  FormatCount(row["resident"].get<uint64_t>())});
  }
  out += tiers.Render() + "\n";
  TextTable sources({"source", "watermark", "exact", "lost", "publisher"});
  for (const auto& row : summary["sources"]) {
    const auto& w = row["watermark"];
    sources.AddRow({row["source"].get<std::string>(),
                    w.is_null() ? std::string("-") : std::to_string(w.get<uint64_t>()),
                    row["exact"].get<bool>() ? "yes" : "no", FormatCount(row["lost"].get<uint64_t>()),
                    row["publisher"].get<std::string>()});
  }
  out += sources.Render() + "\n";
  out += FormatCount(summary["sources"].size()) + " sources, " +
         FormatCount(summary["blocks"].get<uint64_t>()) + " resident blocks, " +
         FormatCount(summary["presences"].get<uint64_t>()) + " presences, " +
         FormatCount(summary["engine_hashes"].get<uint64_t>()) + " engine hashes, " +
         FormatCount(summary["bytes"].get<uint64_t>()) + " bytes\n";
  return out;
}

std::vector<SourceSeqState> SequenceStates(const Ingestor& ingestor) {
  std::vector<SourceSeqState> out;
  for (size_t i = 0; i < ingestor.source_count(); ++i) {
    out.push_back(ingestor.sequence_state(SourceId{static_cast<uint32_t>(i)}));
  }
  return out;
}

Result<uint64_t> WriteIndexSnapshot(const PrefixIndex& index, const Ingestor* ingestor,
                                    const std::string& path) {
  std::vector<SourceSeqState> seq;
  if (ingestor != nullptr) seq = SequenceStates(*ingestor);
  const IndexState state = index.CopyState();
  if (!seq.empty() && seq.size() != state.sources.size()) seq.clear();
  return WriteSnapshotFile(path, state, seq, RealtimeNs());
}

bool IsSnapshotWarmFrom(const std::vector<std::string>& warm_from) {
  if (warm_from.empty()) return false;
  const std::string& first = warm_from.front();
  if (first.rfind("http://", 0) == 0) return true;
  std::ifstream in(first, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  return LooksLikeSnapshot(
      std::as_bytes(std::span<const char>(head, static_cast<size_t>(in.gcount()))));
}

Result<SnapshotInfo> WarmFromSnapshot(const std::string& target, PrefixIndex& index) {
  if (target.rfind("http://", 0) != 0) return ReadSnapshotFile(target, &index);
  KVINDEX_ASSIGN_OR_RETURN(NetAddress address, ParseNetAddress(target));
  if (address.host.empty() || !address.port) {
    return Status::InvalidArgument("--warm-from " + target + ": needs http://HOST:PORT");
  }
  SnapshotReader reader(target + "/snapshot", &index);
  Status fed;
  httplib::Client client(address.host, *address.port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(30, 0);
  int http_status = 0;
  auto result = client.Get(
      "/snapshot",
      [&](const httplib::Response& response) {
        http_status = response.status;
        return response.status == 200;
      },
      [&](const char* data, size_t length) {
        fed = reader.Feed(std::string_view(data, length));
        return fed.ok();
      });
  if (!fed.ok()) return fed;
  if (!result) {
    if (http_status != 0 && http_status != 200) {
      return Status::Unavailable("--warm-from " + target + ": GET /snapshot answered " +
                                 std::to_string(http_status));
    }
    return Status::Unavailable("--warm-from " + target + ": GET /snapshot: " +
                               httplib::to_string(result.error()));
  }
  return reader.Finish();
}

}  // namespace kvindex::cli
