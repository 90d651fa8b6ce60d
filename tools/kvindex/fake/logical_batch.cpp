#include "fake/logical_batch.h"

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/json_depth.h"

namespace kvindex::cli {
namespace {

Result<uint64_t> JsonHash(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  return Status::Malformed(where + ": expected an integer hash");
}

}  // namespace

Result<EventBatch> ParseLogicalBatch(const std::string& line, const std::string& where) {
  if (const size_t at = JsonTooDeepAt(line); at != std::string::npos) {
    return Status::Malformed(where + ": byte " + std::to_string(at) + ": nested deeper than " +
                             std::to_string(kMaxJsonDepth) + " levels");
  }
  auto doc = nlohmann::json::parse(line, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return Status::Malformed(where + ": not a JSON object");
  EventBatch batch;
  batch.ts = doc.value("ts", 0.0);
  for (const char* key : {"dp_rank", "data_parallel_rank", "attn_dp_rank"}) {
    if (doc.contains(key) && doc[key].is_number_integer()) batch.dp_rank = doc[key].get<DpRank>();
  }
  if (!doc.contains("events") || !doc["events"].is_array()) {
    return Status::Malformed(where + ": events: expected an array");
  }
  for (const auto& e : doc["events"]) {
    const std::string type = e.value("type", "");
    auto opt_str = [&](const char* k) -> std::optional<std::string> {
      if (e.contains(k) && e[k].is_string()) return e[k].get<std::string>();
      return std::nullopt;
    };
    auto tier = [&]() -> std::optional<Tier> {
      auto m = opt_str("medium");
      if (!m) return std::nullopt;
      return ParseTier(*m);
    };
    std::vector<EngineHash> hashes;
    if (e.contains("block_hashes")) {
      for (const auto& h : e["block_hashes"]) {
        KVINDEX_ASSIGN_OR_RETURN(uint64_t v, JsonHash(h, where + ": block_hashes"));
        hashes.push_back(EngineHash{v});
      }
    }
    if (type == "BlockStored") {
      BlockStored s;
      s.block_hashes = std::move(hashes);
      if (e.contains("parent_block_hash") && !e["parent_block_hash"].is_null()) {
        KVINDEX_ASSIGN_OR_RETURN(uint64_t v, JsonHash(e["parent_block_hash"], where + ": parent"));
        s.parent = EngineHash{v};
      }
      for (const auto& t : e.value("token_ids", nlohmann::json::array())) {
        s.token_ids.push_back(t.get<TokenId>());
      }
      if (e.contains("block_size") && e["block_size"].is_number_integer()) {
        s.scope.block_size = e["block_size"].get<uint32_t>();
      }
      if (e.contains("lora_id") && e["lora_id"].is_number_integer()) {
        s.scope.lora_id = e["lora_id"].get<int64_t>();
      }
      s.scope.lora_name = opt_str("lora_name");
      s.scope.salt = opt_str("cache_salt");  // the request's cache_salt (vLLM: in extra_keys)
      s.tier = tier();
      batch.events.push_back(std::move(s));
    } else if (type == "BlockRemoved") {
      BlockRemoved r;
      r.block_hashes = std::move(hashes);
      r.tier = tier();
      batch.events.push_back(std::move(r));
    } else if (type == "AllBlocksCleared") {
      batch.events.push_back(AllCleared{});
    } else {
      return Status::Malformed(where + ": unknown event type '" + type + "'");
    }
  }
  return batch;
}

}  // namespace kvindex::cli
