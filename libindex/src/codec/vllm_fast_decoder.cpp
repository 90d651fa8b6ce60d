#include "vllm_fast_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"

#include "event_slots.h"
#include "token_reader.h"

namespace kvindex::codec_internal {
namespace {

// The common vLLM positional batch, decoded without the general decoder's per-field calls and
// failure bookkeeping. It reads through the same TokenReader (msgpack-cxx) as the general decoder
// and takes only this shape:
//   [ts float, [event, ...], dp_rank (nil or uint)?] where each event is
//   ["BlockStored", hashes, parent (nil or uint), tokens, block_size, nil lora_id, (medium,
//    nil lora_name, nil extra_keys, group_idx (nil or uint), nil spec_kind, nil sliding_window)]
//   or ["BlockRemoved", hashes, (medium, group_idx)], with unsigned-int token ids and a nil, "GPU"
//   or "CPU" medium.
// It returns false at the first value outside that shape, and DecodeEventBatchInto() then decodes
// the payload with the general decoder from the start, so it only ever produces what the general
// decoder produces (event_codec_test "fast path" decodes every test payload both ways).
class FastVllmDecoder {
 public:
  FastVllmDecoder(const uint8_t* p, size_t size) : r_(p, size) {}

  bool Decode(EventBatch& batch) {
    uint32_t n;
    if (!r_.ReadArray(n) || (n != 2 && n != 3)) return false;
    double ts;
    if (!r_.ReadFloat(ts) || !std::isfinite(ts)) return false;
    uint32_t events;
    if (!r_.ReadArray(events)) return false;
    batch.errors.clear();
    {
      EventSlots out(batch.events);
      out.Reserve(std::min<size_t>(events, r_.remaining() / 16 + 1));
      for (uint32_t i = 0; i < events; ++i) {
        if (!Event(out)) return false;
      }
    }
    batch.ts = ts;
    batch.dp_rank.reset();
    if (n == 3 && !r_.TryNil()) {
      uint64_t rank;
      if (!Uint(rank) || rank > static_cast<uint64_t>(INT32_MAX)) return false;
      batch.dp_rank = static_cast<DpRank>(rank);
    }
    return r_.at_end();
  }

 private:
  bool Uint(uint64_t& v) {
    bool negative;
    return r_.PeekType() == Type::kUint && r_.ReadInt(v, negative);
  }

  // Any hash the general decoder takes gives the same value here (only the format detection,
  // which this path does not do, looks at how hashes are spelled).
  bool Hashes(std::vector<EngineHash>& out) {
    bool negative = false;
    return r_.ReadHashes(out, negative);
  }

  // Nil (the event's tier stays unset, as EventSlots left it) or a canonical spelling.
  bool Medium(std::optional<Tier>& tier) {
    if (r_.TryNil()) return true;
    std::string_view s;
    if (!r_.ReadStr(s)) return false;
    if (s == "GPU") {
      tier.emplace();  // GPU
    } else if (s == "CPU") {
      tier = Tier::Cpu();
    } else {
      return false;
    }
    return true;
  }

  bool OptU32(std::optional<uint32_t>& out) {
    if (r_.TryNil()) return true;
    uint64_t v;
    if (!Uint(v) || v > UINT32_MAX) return false;
    out = static_cast<uint32_t>(v);
    return true;
  }

  // Fields the general decoder left reset (EventSlots) come back reset here too: only the fields
  // read are written.
  bool Event(EventSlots& out) {
    uint32_t n;
    std::string_view tag;
    if (!r_.ReadArray(n) || n == 0 || !r_.ReadStr(tag)) return false;
    if (n >= 6 && n <= 12 && tag == "BlockStored") {
      BlockStored& ev = out.Next<BlockStored>();
      if (!Hashes(ev.block_hashes)) return false;
      if (!r_.TryNil()) {
        uint64_t parent;
        if (!Uint(parent)) return false;
        ev.parent = EngineHash{parent};
      }
      if (!r_.ReadTokenIds(ev.token_ids, kMaxTokensPerEvent)) return false;
      uint64_t block_size;
      if (!Uint(block_size) || block_size > UINT32_MAX) return false;
      ev.scope.block_size = static_cast<uint32_t>(block_size);
      if (!r_.TryNil()) return false;  // lora_id
      if (n > 6 && !Medium(ev.tier)) return false;
      if (n > 7 && !r_.TryNil()) return false;  // lora_name (or SGLang metadata)
      if (n > 8 && !r_.TryNil()) return false;  // extra_keys
      if (n > 9 && !OptU32(ev.scope.group)) return false;
      if (n > 10 && !r_.TryNil()) return false;  // kv_cache_spec_kind
      if (n > 11 && !r_.TryNil()) return false;  // kv_cache_spec_sliding_window
      return true;
    }
    if (n >= 2 && n <= 4 && tag == "BlockRemoved") {
      BlockRemoved& ev = out.Next<BlockRemoved>();
      if (!Hashes(ev.block_hashes)) return false;
      if (n > 2 && !Medium(ev.tier)) return false;
      if (n > 3 && !OptU32(ev.scope.group)) return false;
      return true;
    }
    return false;
  }

  TokenReader r_;
};

}  // namespace

bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch) {
  return FastVllmDecoder(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())
      .Decode(batch);
}

}  // namespace kvindex::codec_internal
