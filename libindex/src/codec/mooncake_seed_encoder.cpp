// The Mooncake seed era (the subscriber guide's layout): BlockStoreEvent (a BlockStored and the
// StoreUpdate after it), BlockUpdateEvent and RemoveAllEvent; hashes as 0x strings.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

#include "event_writer.h"

namespace kvindex::codec_internal {
namespace {

void WriteSeedHash(Writer& w, uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(h));
  w.Str(buf);
}

void WriteReplicas(Writer& w, const std::vector<Replica>& replicas) {
  w.Array(replicas.size());
  for (const Replica& r : replicas) {
    w.Array(2);
    w.Str(TierSpelling(r.tier, r.tier_spelling));
    w.Str(r.location);
  }
}

}  // namespace

size_t WriteSeedEvent(Writer& w, const EventBatch& batch, size_t i) {
  const Event& event = batch.events[i];
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const auto& update = std::get<StoreUpdate>(batch.events[i + 1]);
    w.Array(8);
    w.Str("BlockStoreEvent");
    w.Str(update.key);
    WriteReplicas(w, update.replicas);
    WriteOptStr(w, s->scope.model);
    WriteOptUint(w, s->scope.block_size);
    if (s->block_hashes.empty()) {
      w.Str("");
    } else if (s->block_hashes.size() == 1) {
      WriteSeedHash(w, s->block_hashes[0].value);
    } else {
      WriteHashes(w, s->block_hashes, false);
    }
    if (s->parent) {
      WriteSeedHash(w, s->parent->value);
    } else {
      w.Str("");
    }
    WriteTokens(w, s->token_ids);
    return 2;
  }
  if (const auto* u = std::get_if<StoreUpdate>(&event)) {
    w.Array(3);
    w.Str("BlockUpdateEvent");
    w.Str(u->key);
    WriteReplicas(w, u->replicas);
    return 1;
  }
  w.Array(1);
  w.Str("RemoveAllEvent");
  return 1;
}

size_t CountSeedEvents(const EventBatch& batch) {
  size_t n = 0;
  for (size_t i = 0; i < batch.events.size(); ++i, ++n) {
    if (std::holds_alternative<BlockStored>(batch.events[i])) ++i;
  }
  return n;
}

}  // namespace kvindex::codec_internal
