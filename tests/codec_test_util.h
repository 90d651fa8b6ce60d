// Helpers for the event codec tests and the fuzz target: hex, expected batches from the JSON of
// tests/data/event_codec_vectors.json and of the golden captures, and a readable dump of a batch.
#ifndef KVINDEX_TESTS_CODEC_TEST_UTIL_H_
#define KVINDEX_TESTS_CODEC_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"
#include "kvindex/core/instance.h"

#include "test_util.h"

namespace kvindex::test {

inline std::vector<std::byte> FromHex(const std::string& hex) {
  std::vector<std::byte> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

inline std::string ToHex(const std::vector<std::byte>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    out.push_back(kHex[static_cast<uint8_t>(b) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(b) & 15]);
  }
  return out;
}

// A JSON integer (signed or unsigned) as u64 two's complement.
inline uint64_t U64(const nlohmann::json& j) {
  return j.is_number_unsigned() ? j.get<uint64_t>() : static_cast<uint64_t>(j.get<int64_t>());
}

inline std::optional<std::string> OptStr(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  return obj[key].get<std::string>();
}
template <typename T>
std::optional<T> OptInt(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  return static_cast<T>(obj[key].get<int64_t>());
}
inline std::optional<uint64_t> OptU64(const nlohmann::json& obj, const char* key) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  return U64(obj[key]);
}

inline std::optional<Tier> TierFromName(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  const std::string name = j.get<std::string>();
  if (name == "GPU") return Tier::Gpu();
  if (name == "CPU") return Tier::Cpu();
  if (name == "DISK") return Tier::Disk();
  return Tier::Other(name);
}

inline std::vector<EngineHash> Hashes(const nlohmann::json& j) {
  std::vector<EngineHash> out;
  for (const auto& h : j) out.push_back(EngineHash{U64(h)});
  return out;
}

inline EventScopeFields ScopeFrom(const nlohmann::json& s) {
  EventScopeFields scope;
  scope.model = OptStr(s, "model");
  scope.tenant = OptStr(s, "tenant");
  scope.salt = OptStr(s, "salt");
  scope.lora_name = OptStr(s, "lora_name");
  scope.lora_id = OptInt<int64_t>(s, "lora_id");
  scope.block_size = OptInt<uint32_t>(s, "block_size");
  scope.group = OptInt<uint32_t>(s, "group");
  scope.dp_rank = OptInt<DpRank>(s, "dp_rank");
  return scope;
}

inline WireDetails WireFrom(const nlohmann::json& w) {
  WireDetails wire;
  wire.event_id = OptU64(w, "event_id");
  wire.timestamp_ms = OptInt<int64_t>(w, "timestamp_ms");
  wire.backend_id = OptStr(w, "backend_id");
  wire.base_block_idx = OptU64(w, "base_block_idx");
  wire.object_key = OptStr(w, "object_key");
  wire.spec_kind = OptStr(w, "spec_kind");
  wire.sliding_window = OptInt<int64_t>(w, "sliding_window");
  wire.locality = OptStr(w, "locality");
  wire.ownership = OptStr(w, "ownership");
  wire.session_id = OptStr(w, "session_id");
  wire.tier_spelling = OptStr(w, "tier_spelling");
  wire.eagle_next = OptInt<TokenId>(w, "eagle_next");
  wire.skipped_context = w.value("skipped_context", false);
  if (w.contains("run_parent")) wire.run_parent = EngineHash{U64(w["run_parent"])};
  wire.extra_keys_sent = w.value("extra_keys_sent", false);
  wire.mm_keys = w.value("mm_keys", false);
  return wire;
}

inline std::vector<std::vector<MultimodalKey>> MultimodalFrom(const nlohmann::json& lists) {
  std::vector<std::vector<MultimodalKey>> out;
  for (const auto& block : lists) {
    std::vector<MultimodalKey> keys;
    for (const auto& k : block) keys.push_back({k[0].get<std::string>(), k[1].get<int64_t>()});
    out.push_back(std::move(keys));
  }
  return out;
}

// The "expect" object of event_codec_vectors.json (already normalised by the oracle).
inline EventBatch ExpectedBatch(const nlohmann::json& e) {
  EventBatch batch;
  batch.ts = e["ts"].get<double>();
  if (!e["dp_rank"].is_null()) batch.dp_rank = e["dp_rank"].get<DpRank>();
  for (const auto& ev : e["events"]) {
    const std::string kind = ev["kind"].get<std::string>();
    if (kind == "stored") {
      BlockStored s;
      s.block_hashes = Hashes(ev["block_hashes"]);
      if (!ev["parent"].is_null()) s.parent = EngineHash{U64(ev["parent"])};
      for (const auto& t : ev["token_ids"]) s.token_ids.push_back(t.get<TokenId>());
      s.tier = TierFromName(ev["tier"]);
      s.scope = ScopeFrom(ev["scope"]);
      s.wire = WireFrom(ev["wire"]);
      if (ev.contains("block_offsets")) {
        for (const auto& o : ev["block_offsets"]) s.block_offsets.push_back(o.get<uint32_t>());
      }
      s.multimodal = MultimodalFrom(ev["multimodal"]);
      if (ev.contains("skipped_multimodal")) {
        s.skipped_multimodal = MultimodalFrom(ev["skipped_multimodal"]);
      }
      batch.events.push_back(std::move(s));
    } else if (kind == "removed") {
      BlockRemoved r;
      r.block_hashes = Hashes(ev["block_hashes"]);
      r.tier = TierFromName(ev["tier"]);
      r.scope = ScopeFrom(ev["scope"]);
      r.wire = WireFrom(ev["wire"]);
      batch.events.push_back(std::move(r));
    } else if (kind == "cleared") {
      AllCleared c;
      c.tier = TierFromName(ev["tier"]);
      c.scope = ScopeFrom(ev["scope"]);
      c.wire = WireFrom(ev["wire"]);
      batch.events.push_back(std::move(c));
    } else {
      StoreUpdate u;
      u.key = ev["key"].get<std::string>();
      for (const auto& r : ev["replicas"]) {
        Replica replica{*TierFromName(r["tier"]), r["location"].get<std::string>(),
                        OptStr(r, "tier_spelling")};
        u.replicas.push_back(std::move(replica));
      }
      batch.events.push_back(std::move(u));
    }
  }
  return batch;
}

// The "logical" object of a golden capture (vLLM v0.9 / early SGLang field names, hashes as the
// publisher was given them: unsigned for vLLM, signed for SGLang).
inline EventBatch LogicalBatch(const nlohmann::json& l) {
  EventBatch batch;
  batch.ts = l["ts"].get<double>();
  if (l.contains("data_parallel_rank") && !l["data_parallel_rank"].is_null()) {
    batch.dp_rank = l["data_parallel_rank"].get<DpRank>();
  }
  for (const auto& ev : l["events"]) {
    const std::string type = ev["type"].get<std::string>();
    if (type == "BlockStored") {
      BlockStored s;
      s.block_hashes = Hashes(ev["block_hashes"]);
      if (!ev["parent_block_hash"].is_null()) s.parent = EngineHash{U64(ev["parent_block_hash"])};
      for (const auto& t : ev["token_ids"]) s.token_ids.push_back(t.get<TokenId>());
      s.scope.block_size = ev["block_size"].get<uint32_t>();
      s.scope.lora_id = OptInt<int64_t>(ev, "lora_id");
      batch.events.push_back(std::move(s));
    } else if (type == "BlockRemoved") {
      BlockRemoved r;
      r.block_hashes = Hashes(ev["block_hashes"]);
      batch.events.push_back(std::move(r));
    } else {
      batch.events.push_back(AllCleared{});
    }
  }
  return batch;
}

inline std::string Describe(const EventBatch& b) {
  std::ostringstream os;
  os << "ts=" << b.ts << " rank=" << (b.dp_rank ? std::to_string(*b.dp_rank) : "nil")
     << " events=" << b.events.size() << " errors=" << b.errors.size();
  for (const auto& e : b.errors) os << "\n  error " << e.index << ": " << e.status.ToString();
  for (const Event& e : b.events) {
    os << "\n  ";
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      os << "stored hashes=" << s->block_hashes.size() << " [";
      for (auto h : s->block_hashes) os << h.value << ",";
      os << "] parent=" << (s->parent ? std::to_string(s->parent->value) : "nil")
         << " tokens=" << s->token_ids.size()
         << " tier=" << (s->tier ? std::string(s->tier->name()) : "nil")
         << " spelling=" << s->wire.tier_spelling.value_or("-")
         << " bs=" << (s->scope.block_size ? std::to_string(*s->scope.block_size) : "nil")
         << " lora=" << s->scope.lora_name.value_or("-")
         << " lora_id=" << (s->scope.lora_id ? std::to_string(*s->scope.lora_id) : "nil")
         << " salt=" << s->scope.salt.value_or("-") << " model=" << s->scope.model.value_or("-")
         << " mm=" << s->multimodal.size()
         << " group=" << (s->scope.group ? std::to_string(*s->scope.group) : "nil")
         << " offsets=" << s->block_offsets.size() << " skipped=" << s->wire.skipped_context << "/"
         << s->skipped_multimodal.size() << " run_parent="
         << (s->wire.run_parent ? std::to_string(s->wire.run_parent->value) : "nil")
         << " extra_keys_sent=" << s->wire.extra_keys_sent
         << " eagle_next=" << (s->wire.eagle_next ? std::to_string(*s->wire.eagle_next) : "nil")
         << " key=" << s->wire.object_key.value_or("-");
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      os << "removed hashes=" << r->block_hashes.size()
         << " tier=" << (r->tier ? std::string(r->tier->name()) : "nil")
         << " spelling=" << r->wire.tier_spelling.value_or("-");
    } else if (const auto* c = std::get_if<AllCleared>(&e)) {
      os << "cleared tier=" << (c->tier ? std::string(c->tier->name()) : "nil");
    } else {
      const auto& u = std::get<StoreUpdate>(e);
      os << "update key=" << u.key << " replicas=" << u.replicas.size();
    }
  }
  return os.str();
}

// The oracle vectors (tests/data/event_codec_vectors.json).
inline nlohmann::json LoadVectors() {
  return nlohmann::json::parse(ReadFile(TestDataDir() / "event_codec_vectors.json"));
}

inline Result<EventBatch> Decode(const std::vector<std::byte>& bytes,
                                 FormatHint hint = FormatHint::kAuto,
                                 WireFormat* detected = nullptr) {
  return DecodeEventBatch(bytes, hint, detected);
}

// `raw`: the payload's bytes in a string.
inline Result<EventBatch> Decode(const std::string& raw) {
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  return DecodeEventBatch(bytes);
}

// A payload written as hex, as the bytes of a string.
inline std::string Hex(const char* hex) {
  const auto bytes = FromHex(hex);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_CODEC_TEST_UTIL_H_
