// The Mooncake store publisher's RFC #1527 map events ({"event_type": "stored", "seq_hashes":
// [...], "model_name": ..., "tenant_id": ..., ...}). They are read by the map key loop of
// vllm_map_decoder.cpp (a map is RFC once it has event_type or seq_hashes); this file gives the
// RFC fields their place in the event. The RFC envelope's integer-millisecond timestamp is read
// with the envelope (event_batch_decoder.cpp).
#include <utility>

#include "kvindex/core/event.h"

#include "decoder.h"
#include "map_event_fields.h"

namespace kvindex::codec_internal {

void ApplyRfcMapFields(MapFields& f, EventScopeFields& scope, WireDetails& wire) {
  scope.model = std::move(f.model);
  scope.tenant = std::move(f.tenant);
  scope.salt = std::move(f.salt);
  scope.lora_name = std::move(f.lora_name);
  scope.block_size = f.block_size;
  scope.group = f.group_id;
  scope.dp_rank = f.dp_rank;
  wire.event_id = f.event_id;
  wire.timestamp_ms = f.timestamp;
  wire.backend_id = std::move(f.backend_id);
  wire.base_block_idx = f.base_block_idx;
  wire.object_key = std::move(f.object_key);
  f.extra = ExtraKeys{};
}

}  // namespace kvindex::codec_internal
