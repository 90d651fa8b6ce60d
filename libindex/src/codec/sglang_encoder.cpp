// SGLang's positional events: signed hashes, and the shortest era that carries the event; an
// event with wire.eagle_next writes its tokens as EAGLE bigram pairs (sglang-eagle).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

#include "event_writer.h"

namespace kvindex::codec_internal {

// SGLang: the shortest era carrying the event — 6 elements (early), 7 with medium, 8 with the
// metadata map (BlockStoredWithMetadata).
void WriteSglangEvent(Writer& w, const Event& event) {
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    const bool metadata = s->scope.salt || s->wire.session_id;
    const bool medium = metadata || s->tier;
    w.Array(metadata ? 8 : medium ? 7 : 6);
    w.Str("BlockStored");
    WriteHashes(w, s->block_hashes, true);
    WriteOptHash(w, s->parent, true);
    WriteStoredTokens(w, *s);
    w.Uint(*s->scope.block_size);
    WriteOptInt(w, s->scope.lora_id);
    if (medium) WriteMedium(w, s->tier, s->wire.tier_spelling);
    if (metadata) {
      w.Map((s->scope.salt ? 1 : 0) + (s->wire.session_id ? 1 : 0));
      if (s->scope.salt) {
        w.Str("cache_salt");
        w.Str(*s->scope.salt);
      }
      if (s->wire.session_id) {
        w.Str("session_id");
        w.Str(*s->wire.session_id);
      }
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    w.Array(r->tier ? 3 : 2);
    w.Str("BlockRemoved");
    WriteHashes(w, r->block_hashes, true);
    if (r->tier) WriteMedium(w, r->tier, r->wire.tier_spelling);
  } else {
    w.Array(1);
    w.Str("AllBlocksCleared");
  }
}

}  // namespace kvindex::codec_internal
