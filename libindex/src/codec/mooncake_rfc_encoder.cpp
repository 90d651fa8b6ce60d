// Mooncake RFC #1527 map events, as the store publisher writes them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

#include "event_writer.h"

namespace kvindex::codec_internal {

// Mooncake RFC #1527: every key the store publisher writes, in its order, nil when absent.
void WriteMooncakeEvent(Writer& w, const Event& event) {
  const EventScopeFields* scope;
  const WireDetails* wire;
  const std::optional<Tier>* tier;
  const std::vector<EngineHash>* hashes = nullptr;
  const BlockStored* stored = std::get_if<BlockStored>(&event);
  const char* event_type;
  const char* type;
  if (stored != nullptr) {
    scope = &stored->scope;
    wire = &stored->wire;
    tier = &stored->tier;
    hashes = &stored->block_hashes;
    event_type = "stored";
    type = "BlockStored";
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    scope = &r->scope;
    wire = &r->wire;
    tier = &r->tier;
    hashes = &r->block_hashes;
    event_type = "removed";
    type = "BlockRemoved";
  } else {
    const auto& c = std::get<AllCleared>(event);
    scope = &c.scope;
    wire = &c.wire;
    tier = &c.tier;
    event_type = "cleared";
    type = "AllBlocksCleared";
  }
  w.Map(20);
  w.Str("event_id");
  WriteOptUint(w, wire->event_id);
  w.Str("timestamp");
  WriteOptInt(w, wire->timestamp_ms);
  w.Str("event_type");
  w.Str(event_type);
  w.Str("type");
  w.Str(type);
  w.Str("model_name");
  WriteOptStr(w, scope->model);
  w.Str("block_size");
  WriteOptUint(w, scope->block_size);
  w.Str("additional_salt");
  WriteOptStr(w, scope->salt);
  w.Str("lora_name");
  WriteOptStr(w, scope->lora_name);
  w.Str("tenant_id");
  WriteOptStr(w, scope->tenant);
  w.Str("backend_id");
  WriteOptStr(w, wire->backend_id);
  w.Str("group_id");
  WriteOptUint(w, scope->group);
  w.Str("medium");
  WriteMedium(w, *tier, wire->tier_spelling);
  w.Str("dp_rank");
  WriteOptInt(w, scope->dp_rank);
  w.Str("object_key");
  WriteOptStr(w, wire->object_key);
  w.Str("seq_hashes");
  if (hashes) {
    WriteHashes(w, *hashes, false);
  } else {
    w.Nil();
  }
  w.Str("block_hashes");  // the legacy alias, signed as the store publisher writes it
  if (hashes) {
    WriteHashes(w, *hashes, true);
  } else {
    w.Nil();
  }
  w.Str("base_block_idx");
  WriteOptUint(w, wire->base_block_idx);
  const std::optional<EngineHash> none;
  const std::optional<EngineHash>& parent = stored ? stored->parent : none;
  w.Str("parent_hash");
  WriteOptHash(w, parent, false);
  w.Str("token_ids");
  if (stored && !stored->token_ids.empty()) {
    WriteTokens(w, stored->token_ids);
  } else {
    w.Nil();
  }
  w.Str("parent_block_hash");  // legacy alias
  WriteOptHash(w, parent, false);
}

}  // namespace kvindex::codec_internal
