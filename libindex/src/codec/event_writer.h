// Writing events in each wire format: the field writers every era's encoder shares (inline, one
// call per field) and the event writers of the era files (vllm_encoder.cpp, sglang_encoder.cpp,
// mooncake_rfc_encoder.cpp, mooncake_seed_encoder.cpp). EncodeEventBatch (event_encoder.cpp)
// writes the envelope around them.
//
// Byte rules (msgspec's, checked on golden captures; docs/wire-formats.md "Encoding"): array_like
// structs write every field of their version (nil for None); map structs omit fields that hold
// their default; ints use the narrowest form and non-negative values are always unsigned; ts is
// float64. SGLang hashes are signed int64. Mooncake RFC #1527 maps carry every key of the store
// publisher (nil when absent).
//
// The event writers expect an event CheckEncodable() accepted for their format
// (check_encodable.cpp) and write it whole; they do not fail.
//
// Thread safety: functions of their arguments; a Writer (event_packer.h) belongs to one thread.
#ifndef KVINDEX_SRC_CODEC_EVENT_WRITER_H_
#define KVINDEX_SRC_CODEC_EVENT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/event.h"

#include "event_packer.h"

namespace kvindex::codec_internal {


// The tier as the event spells it: its kept spelling, else the tier's own name. The view lives
// as long as `tier` and `spelling`.
inline std::string_view TierSpelling(const Tier& tier, const std::optional<std::string>& spelling) {
  return spelling ? std::string_view(*spelling) : tier.name();
}

// The value, or nil when absent (array eras write every field).
inline void WriteOptStr(Writer& w, const std::optional<std::string>& s) {
  if (s) {
    w.Str(*s);
  } else {
    w.Nil();
  }
}
template <typename T>
inline void WriteOptUint(Writer& w, const std::optional<T>& v) {
  if (v) {
    w.Uint(static_cast<uint64_t>(*v));
  } else {
    w.Nil();
  }
}
template <typename T>
inline void WriteOptInt(Writer& w, const std::optional<T>& v) {
  if (v) {
    w.Int(static_cast<int64_t>(*v));
  } else {
    w.Nil();
  }
}
// The tier's spelling, or nil when the event has no tier.
inline void WriteMedium(Writer& w, const std::optional<Tier>& tier,
                        const std::optional<std::string>& spelling) {
  if (tier) {
    w.Str(TierSpelling(*tier, spelling));
  } else {
    w.Nil();
  }
}

// An array of hashes: unsigned, or signed int64 (SGLang, the RFC's legacy alias) when `is_signed`.
// The two list writers are flattened (msgpack::packer's integer packing inlined into the loop):
// in the larger event writers the compiler otherwise leaves it a call per item.
[[gnu::flatten]] inline void WriteHashes(Writer& w, const std::vector<EngineHash>& hashes, bool is_signed) {
  w.Array(hashes.size());
  for (EngineHash h : hashes) {
    if (is_signed) {
      w.Int(static_cast<int64_t>(h.value));
    } else {
      w.Uint(h.value);
    }
  }
}
inline void WriteOptHash(Writer& w, const std::optional<EngineHash>& h, bool is_signed) {
  if (!h) {
    w.Nil();
  } else if (is_signed) {
    w.Int(static_cast<int64_t>(h->value));
  } else {
    w.Uint(h->value);
  }
}
[[gnu::flatten]] inline void WriteTokens(Writer& w, std::span<const TokenId> tokens) {
  w.Array(tokens.size());
  w.Reserve(5 * tokens.size());
  for (TokenId t : tokens) w.Uint(t);
}
// A stored event's token_ids: flat, or SGLang EAGLE's bigram pairs [[t0,t1],...,[tn,next]] when
// the event has wire.eagle_next.
inline void WriteStoredTokens(Writer& w, const BlockStored& ev) {
  if (!ev.wire.eagle_next) {
    WriteTokens(w, ev.token_ids);
    return;
  }
  const size_t n = ev.token_ids.size();
  w.Array(n);
  w.Reserve(11 * n);
  for (size_t i = 0; i < n; ++i) {
    w.Array(2);
    w.Uint(ev.token_ids[i]);
    w.Uint(i + 1 < n ? ev.token_ids[i + 1] : *ev.wire.eagle_next);
  }
}
inline void WriteBlockOffsets(Writer& w, const std::vector<uint32_t>& offsets) {
  w.Array(offsets.size());
  for (uint32_t o : offsets) w.Uint(o);
}

// A vLLM positional event: the 12-field era (13 with block_offsets), or the 6-field BlockStored /
// 2-field BlockRemoved of vllm-v0.9 when `v09`.
void WriteVllmArrayEvent(Writer& w, const Event& event, bool v09);
// A vLLM tagged map event, defaults omitted; hashes signed int64 when `signed_hashes`
// (TensorRT-LLM's structs, which are the same tagged maps).
void WriteVllmMapEvent(Writer& w, const Event& event, bool signed_hashes = false);
// An SGLang positional event, in the shortest SGLang era that carries it.
void WriteSglangEvent(Writer& w, const Event& event);
// A Mooncake RFC #1527 map event, every key written.
void WriteMooncakeEvent(Writer& w, const Event& event);
// The seed-era event for batch.events[i]. Returns how many events were written (a
// BlockStoreEvent consumes its StoreUpdate too).
size_t WriteSeedEvent(Writer& w, const EventBatch& batch, size_t i);
// Returns how many seed-era events `batch` writes as (a BlockStored and its StoreUpdate are one).
size_t CountSeedEvents(const EventBatch& batch);

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_EVENT_WRITER_H_
