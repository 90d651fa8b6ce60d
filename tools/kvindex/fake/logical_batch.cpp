#include "fake/logical_batch.h"

#include <limits>
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
  // A key of the wrong JSON type is an error naming it (nlohmann's get<>() would throw); a
  // missing or null optional key takes its default.
  auto absent = [](const nlohmann::json& o, const char* k) {
    return !o.contains(k) || o[k].is_null();
  };
  auto wrong = [&where](const std::string& key, const char* expected) {
    return Status::Malformed(where + ": " + key + ": expected " + expected);
  };
  if (!absent(doc, "ts")) {
    if (!doc["ts"].is_number()) return wrong("ts", "a number");
    batch.ts = doc["ts"].get<double>();
  }
  for (const char* key : {"dp_rank", "data_parallel_rank", "attn_dp_rank"}) {
    if (absent(doc, key)) continue;
    if (!doc[key].is_number_integer() || doc[key].get<int64_t>() < 0 ||
        doc[key].get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return wrong(key, "a non-negative integer");
    }
    batch.dp_rank = static_cast<DpRank>(doc[key].get<int64_t>());
  }
  if (!doc.contains("events") || !doc["events"].is_array()) {
    return Status::Malformed(where + ": events: expected an array");
  }
  for (const auto& e : doc["events"]) {
    if (!e.is_object()) return wrong("events", "objects");
    if (!e.contains("type") || !e["type"].is_string()) return wrong("type", "a string");
    const std::string type = e["type"].get<std::string>();
    for (const char* k : {"medium", "lora_name", "cache_salt"}) {
      if (!absent(e, k) && !e[k].is_string()) return wrong(k, "a string");
    }
    for (const char* k : {"block_hashes", "token_ids"}) {
      if (!absent(e, k) && !e[k].is_array()) return wrong(k, "an array");
    }
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
      if (!absent(e, "token_ids")) {
        for (const auto& t : e["token_ids"]) {
          if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<TokenId>::max()) {
            return wrong("token_ids", "token ids (integers 0 to 2^32-1)");
          }
          s.token_ids.push_back(t.get<TokenId>());
        }
      }
      if (!absent(e, "block_size")) {
        if (!e["block_size"].is_number_unsigned() || e["block_size"].get<uint64_t>() == 0 ||
            e["block_size"].get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
          return wrong("block_size", "a positive integer");
        }
        s.scope.block_size = e["block_size"].get<uint32_t>();
      }
      if (!absent(e, "lora_id")) {
        if (!e["lora_id"].is_number_integer()) return wrong("lora_id", "an integer");
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
