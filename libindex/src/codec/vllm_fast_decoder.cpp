#include "vllm_fast_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"

#include "event_slots.h"
#include "hash_value.h"
#include "token_reader.h"

namespace kvindex::codec_internal {
namespace {

// The common vLLM positional batch, decoded without the general decoder's per-field calls and
// failure bookkeeping. It takes only this shape:
//   [ts float, [event, ...], dp_rank (nil or uint)?] where each event is
//   ["BlockStored", hashes, parent (nil or uint), tokens, block_size, nil lora_id, (medium,
//    nil lora_name, nil extra_keys, group_idx (nil or uint), nil spec_kind, nil sliding_window)]
//   or ["BlockRemoved", hashes, (medium, group_idx)], with unsigned-int token ids and a nil, "GPU"
//   or "CPU" medium.
// It returns false at the first value outside that shape, and DecodeEventBatchInto() then decodes
// the payload with the general decoder from the start, so it only ever produces what the general
// decoder produces (event_codec_test "fast path" decodes every test payload both ways).
//
// One msgpack-cxx parse runs over everything up to the next token id array (the batch header,
// the timestamp, whole BlockRemoved events, a BlockStored's tag, hashes and parent) with
// FastVisitor, and stops at that array's header; the token ids are read in place (TokenReader)
// and the rest of that BlockStored through TokenReader; the next parse starts at the next
// event. A parse per run of values rather than per value: each parser call costs some 100
// instructions of setup, several times what the visitor does with a value.

// Hash lists longer than this are read in place (TokenReader::ReadHashItems, some 10 instructions
// a uint64 hash against some 40 through the parse loop), which costs the parse of the parent and
// of the token id array's header on their own, some 200 instructions.
constexpr uint32_t kVisitedHashes = 4;

// The values FastVisitor expects next.
enum class Expect : uint8_t {
  kBatch,
  kTs,
  kEvents,
  kEvent,
  kTag,
  kHashes,  // a hash list longer than kVisitedHashes stops the parse at its header
  kHash,
  kParent,
  kTokens,  // a BlockStored's token id array: the parse stops at its header
  kMedium,  // BlockRemoved's
  kGroup,   // BlockRemoved's
  kRank,
  kDone,
  kFailed
};

// The msgpack-cxx visitor of the fast path: a state machine over the shape above. Any value it
// does not expect stops the parse with kFailed. The callbacks are forced inline into msgpack-cxx's
// parse loop (no virtual calls: the parser is a template over this class).
#define KVINDEX_VISIT [[gnu::always_inline]] inline
class FastVisitor : public msgpack::null_visitor {
 public:
  Expect expect = Expect::kBatch;
  EventSlots* out = nullptr;
  EventBatch* batch = nullptr;
  size_t payload_size = 0;
  uint32_t batch_len = 0;    // elements of the batch array
  uint32_t events_left = 0;  // events of the batch not begun yet
  uint32_t event_len = 0;    // elements of the current event
  uint32_t hashes_left = 0;
  uint32_t tokens = 0;  // the count the token id array announces (kTokens)
  BlockStored* stored = nullptr;
  BlockRemoved* removed = nullptr;

  void init() {}

  KVINDEX_VISIT bool visit_nil() {
    switch (expect) {
      case Expect::kParent:
        expect = Expect::kTokens;
        return true;
      case Expect::kMedium:
        return AfterMedium();
      case Expect::kGroup:
        return EventDone();
      case Expect::kRank:
        expect = Expect::kDone;
        return true;
      default:
        return Fail();
    }
  }
  KVINDEX_VISIT bool visit_positive_integer(uint64_t v) {
    switch (expect) {
      case Expect::kHash:
        return Hash(EngineHash{v});
      case Expect::kParent:
        stored->parent = EngineHash{v};
        expect = Expect::kTokens;
        return true;
      case Expect::kGroup:
        if (v > UINT32_MAX) return Fail();
        removed->scope.group = static_cast<uint32_t>(v);
        return EventDone();
      case Expect::kRank:
        if (v > static_cast<uint64_t>(INT32_MAX)) return Fail();
        batch->dp_rank = static_cast<DpRank>(v);
        expect = Expect::kDone;
        return true;
      default:
        return Fail();
    }
  }
  // Every signed encoding, whatever the sign: only a hash may be one.
  KVINDEX_VISIT bool visit_negative_integer(int64_t v) {
    if (expect != Expect::kHash) return Fail();
    return Hash(EngineHash{static_cast<uint64_t>(v)});
  }
  KVINDEX_VISIT bool visit_float32(float v) { return visit_float64(v); }
  KVINDEX_VISIT bool visit_float64(double v) {
    if (expect != Expect::kTs || !std::isfinite(v)) return Fail();
    batch->ts = v;
    expect = Expect::kEvents;
    return true;
  }
  KVINDEX_VISIT bool visit_str(const char* v, uint32_t size) {
    const std::string_view s(v, size);
    switch (expect) {
      case Expect::kTag:
        return Tag(s);
      case Expect::kHash:
        return Hash(EngineHash{NormaliseHashString(s)});
      case Expect::kMedium:
        if (!Medium(s, removed->tier)) return Fail();
        return AfterMedium();
      default:
        return Fail();
    }
  }
  KVINDEX_VISIT bool visit_bin(const char* v, uint32_t size) {
    if (expect != Expect::kHash) return Fail();
    return Hash(EngineHash{
        NormaliseHashBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v), size))});
  }
  KVINDEX_VISIT bool visit_boolean(bool /*v*/) { return Fail(); }
  KVINDEX_VISIT bool visit_ext(const char* /*v*/, uint32_t /*size*/) { return Fail(); }
  KVINDEX_VISIT bool start_map(uint32_t /*n*/) { return Fail(); }

  KVINDEX_VISIT bool start_array(uint32_t n) {
    switch (expect) {
      case Expect::kBatch:
        if (n != 2 && n != 3) return Fail();
        batch_len = n;
        expect = Expect::kTs;
        return true;
      case Expect::kEvents:
        Events(n);
        return n == 0 ? AfterEvents() : (expect = Expect::kEvent, true);
      case Expect::kEvent:
        if (n == 0) return Fail();
        --events_left;
        event_len = n;
        expect = Expect::kTag;
        return true;
      case Expect::kHashes:
        hashes_left = n;
        if (n > kVisitedHashes) return false;  // read in place
        return n == 0 ? AfterHashes() : (expect = Expect::kHash, true);
      case Expect::kTokens:
        tokens = n;
        return false;  // read in place
      default:
        return Fail();
    }
  }

  void parse_error(size_t /*parsed_offset*/, size_t /*error_offset*/) { expect = Expect::kFailed; }
  void insufficient_bytes(size_t /*parsed_offset*/, size_t /*error_offset*/) {}

  // The state after a whole event (its last value read here or by the caller).
  bool EventDone() { return events_left > 0 ? (expect = Expect::kEvent, true) : AfterEvents(); }

  // Nil (the tier stays unset, as EventSlots left it) or a canonical spelling.
  static bool Medium(std::string_view s, std::optional<Tier>& tier) {
    if (s == "GPU") {
      tier.emplace();  // GPU
    } else if (s == "CPU") {
      tier = Tier::Cpu();
    } else {
      return false;
    }
    return true;
  }

 private:
  // Out of line, to keep start_array() small enough for the compiler to inline it into the parse
  // loop.
  [[gnu::noinline]] void Events(uint32_t n) {
    events_left = n;
    // An event is far larger than its smallest encoding: reserve only what the payload could
    // plausibly hold.
    out->Reserve(std::min<size_t>(n, payload_size / 16 + 1));
  }
  KVINDEX_VISIT bool Fail() {
    expect = Expect::kFailed;
    return false;
  }
  KVINDEX_VISIT bool Tag(std::string_view tag) {
    if (event_len >= 6 && event_len <= 12 && tag == "BlockStored") {
      stored = &out->Next<BlockStored>();
      hashes_ = &stored->block_hashes;
      removed = nullptr;
    } else if (event_len >= 2 && event_len <= 4 && tag == "BlockRemoved") {
      removed = &out->Next<BlockRemoved>();
      hashes_ = &removed->block_hashes;
      stored = nullptr;
    } else {
      return Fail();
    }
    expect = Expect::kHashes;
    return true;
  }
  KVINDEX_VISIT bool Hash(EngineHash h) {
    hashes_->push_back(h);
    return --hashes_left == 0 ? AfterHashes() : true;
  }
  KVINDEX_VISIT bool AfterHashes() {
    if (stored != nullptr) {
      expect = Expect::kParent;
      return true;
    }
    if (event_len > 2) {
      expect = Expect::kMedium;
      return true;
    }
    return EventDone();
  }
  KVINDEX_VISIT bool AfterMedium() {
    if (event_len > 3) {
      expect = Expect::kGroup;
      return true;
    }
    return EventDone();
  }
  KVINDEX_VISIT bool AfterEvents() {
    expect = batch_len == 3 ? Expect::kRank : Expect::kDone;
    return true;
  }

  std::vector<EngineHash>* hashes_ = nullptr;
};
#undef KVINDEX_VISIT

// msgpack-cxx's parser context over FastVisitor, one per thread (building one allocates its
// container stack).
class FastParser : public msgpack::v3::detail::context<FastParser> {
 public:
  FastVisitor& visitor() { return visitor_; }

 private:
  FastVisitor visitor_;
};

class FastVllmDecoder {
 public:
  FastVllmDecoder(const uint8_t* p, size_t size) : base_(p), size_(size), r_(p, size) {}

  bool Decode(EventBatch& batch) {
    static thread_local FastParser parser;
    FastVisitor& v = parser.visitor();
    batch.errors.clear();
    batch.dp_rank.reset();
    EventSlots out(batch.events);
    v.expect = Expect::kBatch;
    v.out = &out;
    v.batch = &batch;
    v.payload_size = size_;
    size_t off = 0;
    while (true) {
      parser.init();
      const msgpack::parse_return ret =
          parser.execute(reinterpret_cast<const char*>(base_), size_, off);
      if (v.expect == Expect::kFailed) return false;
      if (ret == msgpack::PARSE_SUCCESS || ret == msgpack::PARSE_EXTRA_BYTES) {
        // The batch (the first parse) or one BlockRemoved event (a later one) is complete.
        r_.set_position(base_ + off);
      } else if (ret == msgpack::PARSE_STOP_VISITOR && v.expect == Expect::kTokens) {
        r_.set_position(base_ + off + 1);  // `off` is the header's last byte
        if (!TokenIds(*v.stored, v.tokens) || !StoredTail(*v.stored, v.event_len)) return false;
        v.EventDone();
      } else if (ret == msgpack::PARSE_STOP_VISITOR && v.expect == Expect::kHashes) {
        r_.set_position(base_ + off + 1);
        if (!LongHashes(v)) return false;
        v.EventDone();
      } else {
        return false;
      }
      if (v.expect != Expect::kEvent) break;
      off = r_.offset();
    }
    if (v.expect == Expect::kRank && !r_.TryNil()) {
      uint64_t rank;
      if (!Uint(rank) || rank > static_cast<uint64_t>(INT32_MAX)) return false;
      batch.dp_rank = static_cast<DpRank>(rank);
    } else if (v.expect != Expect::kRank && v.expect != Expect::kDone) {
      return false;
    }
    return r_.at_end();
  }

 private:
  bool Uint(uint64_t& v) {
    bool negative;
    return (r_.PeekByte() < 0x80 || r_.PeekType() == Type::kUint) && r_.ReadInt(v, negative);
  }

  bool Medium(std::optional<Tier>& tier) {
    if (r_.TryNil()) return true;
    std::string_view s;
    return r_.ReadStr(s) && FastVisitor::Medium(s, tier);
  }

  bool OptU32(std::optional<uint32_t>& out) {
    if (r_.TryNil()) return true;
    uint64_t v;
    if (!Uint(v) || v > UINT32_MAX) return false;
    out = static_cast<uint32_t>(v);
    return true;
  }

  // The token ids of a BlockStored whose array header (announcing `tokens`) has been parsed.
  bool TokenIds(BlockStored& ev, uint32_t tokens) {
    if (tokens > kMaxTokensPerEvent || tokens > r_.remaining()) return false;
    return r_.ReadTokenIdItems(tokens, ev.token_ids);
  }

  // The rest of an event from its hash list's items on (the parse stopped at a long list's
  // header, v.hashes_left its count).
  bool LongHashes(FastVisitor& v) {
    bool negative = false;
    if (v.hashes_left > r_.remaining()) return false;
    if (v.removed != nullptr) {
      BlockRemoved& ev = *v.removed;
      if (!r_.ReadHashItems(v.hashes_left, ev.block_hashes, negative)) return false;
      if (v.event_len > 2 && !Medium(ev.tier)) return false;
      if (v.event_len > 3 && !OptU32(ev.scope.group)) return false;
      return true;
    }
    BlockStored& ev = *v.stored;
    if (!r_.ReadHashItems(v.hashes_left, ev.block_hashes, negative)) return false;
    if (!r_.TryNil()) {
      uint64_t parent;
      if (!Uint(parent)) return false;
      ev.parent = EngineHash{parent};
    }
    return r_.ReadTokenIds(ev.token_ids, kMaxTokensPerEvent) && StoredTail(ev, v.event_len);
  }

  // A BlockStored from its block size on. Fields the general decoder left reset (EventSlots)
  // come back reset here too: only the fields read are written.
  bool StoredTail(BlockStored& ev, uint32_t n) {
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

  const uint8_t* base_;
  size_t size_;
  TokenReader r_;
};

}  // namespace

bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch) {
  return FastVllmDecoder(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())
      .Decode(batch);
}

}  // namespace kvindex::codec_internal
