#include "vllm_fast_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"

#include "event_slots.h"
#include "msgpack_reader.h"

namespace kvindex::codec_internal {
namespace {

using msgpack_reader::Reader;

// The common vLLM positional batch, decoded without the general decoder's per-field calls (a
// 1-event batch costs about a third of the instructions). It takes only this shape:
//   [ts float64, [event, ...] (fixarray or array16), dp_rank (nil or uint)?] where each event is
//   ["BlockStored", hashes, parent (nil or uint), tokens, block_size, nil lora_id, (medium,
//    nil lora_name, nil extra_keys, group_idx (nil or uint), nil spec_kind, nil sliding_window)]
//   or ["BlockRemoved", hashes, (medium, group_idx)], with unsigned-int hashes and token ids and a
//   nil, "GPU" or "CPU" medium.
// It returns false at the first byte outside that shape, and DecodeEventBatchInto() then decodes
// the payload with the general decoder from the start, so it only ever produces what the general
// decoder produces (event_codec_test "fast path" decodes every test payload both ways).
class FastVllmDecoder {
 public:
  FastVllmDecoder(const uint8_t* p, size_t size) : p_(p), end_(p + size) {}

  bool Decode(EventBatch& batch) {
    if (end_ - p_ < 10 || (p_[0] != 0x92 && p_[0] != 0x93) || p_[1] != 0xcb) return false;
    const bool has_rank = p_[0] == 0x93;
    const uint64_t ts_bits = Reader::Be64(p_ + 2);
    double ts;
    std::memcpy(&ts, &ts_bits, 8);
    if (!std::isfinite(ts)) return false;
    p_ += 10;
    uint32_t n;
    if (!ArrayHeader(n)) return false;
    batch.errors.clear();
    {
      EventSlots out(batch.events);
      out.Reserve(std::min<size_t>(n, Remaining() / 16 + 1));
      for (uint32_t i = 0; i < n; ++i) {
        if (!Event(out)) return false;
      }
    }
    batch.ts = ts;
    if (has_rank) {
      if (Nil()) {
        batch.dp_rank.reset();
      } else {
        uint64_t rank;
        if (!Uint(rank) || rank > static_cast<uint64_t>(INT32_MAX)) return false;
        batch.dp_rank = static_cast<DpRank>(rank);
      }
    } else {
      batch.dp_rank.reset();
    }
    return p_ == end_;
  }

 private:
  size_t Remaining() const { return static_cast<size_t>(end_ - p_); }

  bool Nil() {
    if (p_ < end_ && *p_ == 0xc0) {
      ++p_;
      return true;
    }
    return false;
  }

  // Any unsigned msgpack integer encoding.
  bool Uint(uint64_t& v) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    if (b < 0x80) {
      v = b;
      ++p_;
      return true;
    }
    const size_t left = Remaining();
    switch (b) {
      case 0xcc:
        if (left < 2) return false;
        v = p_[1];
        p_ += 2;
        return true;
      case 0xcd:
        if (left < 3) return false;
        v = Reader::Be16(p_ + 1);
        p_ += 3;
        return true;
      case 0xce:
        if (left < 5) return false;
        v = Reader::Be32(p_ + 1);
        p_ += 5;
        return true;
      case 0xcf:
        if (left < 9) return false;
        v = Reader::Be64(p_ + 1);
        p_ += 9;
        return true;
      default:
        return false;
    }
  }

  // A fixarray or array16 header whose count the remaining bytes can hold (one byte each).
  bool ArrayHeader(uint32_t& n) {
    if (p_ >= end_) return false;
    const uint8_t b = *p_;
    if ((b & 0xf0) == 0x90) {
      n = b & 0x0f;
      ++p_;
    } else if (b == 0xdc && Remaining() >= 3) {
      n = Reader::Be16(p_ + 1);
      p_ += 3;
    } else {
      return false;
    }
    return n <= Remaining();
  }

  bool Hashes(std::vector<EngineHash>& out) {
    uint32_t n;
    if (!ArrayHeader(n)) return false;
    out.clear();
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t v;
      if (!Uint(v)) return false;
      out.push_back(EngineHash{v});
    }
    return true;
  }

  bool Tokens(std::vector<TokenId>& out) {
    uint32_t n;
    if (!ArrayHeader(n) || n > kMaxTokensPerEvent) return false;
    out.resize(n);
    TokenId* dst = out.data();
    // Local pointers, the common widths first (the hot loop: one call per token cost as much as
    // the rest of the batch).
    const uint8_t* p = p_;
    for (uint32_t i = 0; i < n; ++i) {
      if (p >= end_) return false;
      const uint8_t b = *p;
      const size_t left = static_cast<size_t>(end_ - p);
      if (b < 0x80) {
        dst[i] = b;
        p += 1;
      } else if (b == 0xce && left >= 5) {
        dst[i] = Reader::Be32(p + 1);
        p += 5;
      } else if (b == 0xcd && left >= 3) {
        dst[i] = Reader::Be16(p + 1);
        p += 3;
      } else if (b == 0xcc && left >= 2) {
        dst[i] = p[1];
        p += 2;
      } else {
        p_ = p;
        uint64_t v;
        if (!Uint(v) || v > UINT32_MAX) return false;  // 0xcf holding a 32-bit value
        dst[i] = static_cast<TokenId>(v);
        p = p_;
      }
    }
    p_ = p;
    return true;
  }

  // Nil (the event's tier stays unset, as EventSlots left it) or a canonical spelling.
  bool Medium(std::optional<Tier>& tier) {
    if (Nil()) return true;
    if (Remaining() < 4 || p_[0] != 0xa3 || p_[2] != 'P' || p_[3] != 'U') return false;
    if (p_[1] == 'G') {
      tier.emplace();  // GPU
    } else if (p_[1] == 'C') {
      tier = Tier::Cpu();
    } else {
      return false;
    }
    p_ += 4;
    return true;
  }

  bool OptU32(std::optional<uint32_t>& out) {
    if (Nil()) return true;
    uint64_t v;
    if (!Uint(v) || v > UINT32_MAX) return false;
    out = static_cast<uint32_t>(v);
    return true;
  }

  bool Tag(const char* tag, size_t size) {
    if (Remaining() < size + 1 || *p_ != (0xa0 | size) || std::memcmp(p_ + 1, tag, size) != 0) {
      return false;
    }
    p_ += size + 1;
    return true;
  }

  // Fields the general decoder left reset (EventSlots) come back reset here too: only the fields
  // read are written.
  bool Event(EventSlots& out) {
    uint32_t n;
    if (!ArrayHeader(n)) return false;
    if (n >= 6 && n <= 12 && Tag("BlockStored", 11)) {
      BlockStored& ev = out.Next<BlockStored>();
      if (!Hashes(ev.block_hashes)) return false;
      if (!Nil()) {
        uint64_t parent;
        if (!Uint(parent)) return false;
        ev.parent = EngineHash{parent};
      }
      if (!Tokens(ev.token_ids)) return false;
      uint64_t block_size;
      if (!Uint(block_size) || block_size > UINT32_MAX) return false;
      ev.scope.block_size = static_cast<uint32_t>(block_size);
      if (!Nil()) return false;  // lora_id
      if (n > 6 && !Medium(ev.tier)) return false;
      if (n > 7 && !Nil()) return false;  // lora_name (or SGLang metadata)
      if (n > 8 && !Nil()) return false;  // extra_keys
      if (n > 9 && !OptU32(ev.scope.group)) return false;
      if (n > 10 && !Nil()) return false;  // kv_cache_spec_kind
      if (n > 11 && !Nil()) return false;  // kv_cache_spec_sliding_window
      return true;
    }
    if (n >= 2 && n <= 4 && Tag("BlockRemoved", 12)) {
      BlockRemoved& ev = out.Next<BlockRemoved>();
      if (!Hashes(ev.block_hashes)) return false;
      if (n > 2 && !Medium(ev.tier)) return false;
      if (n > 3 && !OptU32(ev.scope.group)) return false;
      return true;
    }
    return false;
  }

  const uint8_t* p_;
  const uint8_t* const end_;
};

}  // namespace

bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch) {
  return FastVllmDecoder(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())
      .Decode(batch);
}

}  // namespace kvindex::codec_internal
