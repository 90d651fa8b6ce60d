// Decoder, the general event decoder: it reads one payload through msgpack-cxx's visitor parse
// (token_reader.h) and fills EventBatch directly (no msgpack object tree; docs/benchmarks.md has
// the comparison with msgpack-cxx's generic unpack). This header holds the state every wire era
// reads with (failure reporting, skipping, the per-field readers, kept inline because they are
// the decoder's hot path); each era's events are read in its own file:
//   vllm_array_decoder.cpp    vLLM / SGLang positional BlockStored and BlockRemoved
//   vllm_extra_keys.cpp       vLLM extra_keys (positional and map events)
//   vllm_map_decoder.cpp      tagged map events (vLLM >= 0.24, SGLang main, RFC #1527 keys)
//   sglang_decoder.cpp        SGLang's metadata map, EAGLE bigram token_ids, vLLM block_offsets
//   mooncake_rfc_decoder.cpp  the fields of a Mooncake RFC #1527 map event
//   mooncake_seed_decoder.cpp Mooncake seed-era BlockUpdateEvent / BlockStoreEvent
//   event_batch_decoder.cpp   the envelope: batch array or map, timestamp, events, format pick
//
// Compatibility facts (docs/wire-formats.md has the full list, with the publisher versions):
//  - msgspec array_like structs write every field of their version, so the length of a positional
//    event tells its vLLM/SGLang version; shorter arrays take trailing defaults and longer ones
//    have their extra items skipped (msgspec's own decoder does the same).
//  - Map events (vLLM >= 0.24, SGLang main, Mooncake RFC #1527) omit defaulted fields; keys may
//    come in any order and unknown keys are skipped.
//  - Hashes are unsigned (vLLM), signed (SGLang), bin digests (vLLM with int hashes off) or
//    strings (the Mooncake seed guide); all are normalised to u64.
//
// Thread safety: a Decoder belongs to one decode call on one thread; it borrows the TokenReader and the
// Flags it is built with for its whole life.
#ifndef KVINDEX_SRC_CODEC_DECODER_H_
#define KVINDEX_SRC_CODEC_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

#include "event_slots.h"
#include "hash_value.h"
#include "token_reader.h"

namespace kvindex::codec_internal {

// Equality with a literal, inlined (std::string_view's == goes through an ordering compare,
// which the compiler leaves to a memcmp call on the hot path).
template <size_t N>
inline bool Eq(std::string_view s, const char (&literal)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), literal, N - 1) == 0;
}

// Nesting levels of the structural parse (the batch itself is level 1).
inline constexpr int kBatchLevel = 1;
inline constexpr int kEventLevel = 3;  // batch > events > event

// The publisher family of an event. A batch holds one family (plus neutral clears): an event of
// another family fails alone with kUnsupported, so every decoded batch has a format that
// encodes it exactly.
enum class Family : uint8_t { kNeutral, kEngine, kRfc, kSeed };

// What the decoder saw, for picking the detected format.
struct Flags {
  bool ts_int = false;
  bool map_batch = false;
  bool any_map_event = false;
  bool any_rfc_event = false;
  bool any_seed_event = false;
  bool any_engine_event = false;
  bool negative_hash = false;
  bool sglang_metadata = false;
  bool bigram_tokens = false;  // an event's token_ids came as EAGLE bigram pairs
  bool block_offsets = false;  // an event carried block_offsets
  uint32_t batch_len = 0;
};

// vLLM extra_keys as read, resolved once the whole event is known (the LoRA name may come later
// in a map).
struct ExtraItem {
  enum class Kind : uint8_t { kStr, kMm, kEmbeds, kLora, kSalt };
  Kind kind;
  bool first = false;  // the first item of its block's tuple
  std::string text;
  int64_t offset = 0;
};
struct ExtraKeys {
  bool present = false;
  uint32_t count = 0;  // entries sent (one per block)
  // (block index, items) for the blocks that carry keys; nil and empty entries take no memory.
  std::vector<std::pair<uint32_t, std::vector<ExtraItem>>> blocks;
};

struct MapFields;  // map_event_fields.h

// Every Read*/Decode* member reads one value (a field, an event, the events array) at the reader's
// position and returns true, or returns false with the failure recorded (fail_code(),
// fail_offset(), fail_message(): the field and what was wrong) and the position unspecified
// within the value. `field` names the value in that message and is only borrowed for the call.
class Decoder {
 public:
  Decoder(TokenReader& r, Flags& flags) : r_(r), flags_(flags) {}

  // The failure of the last call that returned false.
  StatusCode fail_code() const { return fail_code_; }
  size_t fail_offset() const { return fail_offset_; }
  const std::string& fail_message() const { return fail_message_; }

  bool Fail(StatusCode code, std::string_view field, std::string_view what) {
    fail_code_ = code;
    fail_offset_ = r_.offset();
    fail_message_.assign(field);
    fail_message_ += ": ";
    fail_message_ += what;
    return false;
  }

  // "expected <expected>, got <actual>", or a truncation/huge-length message when the value is a
  // container that does not fit.
  bool TypeFail(std::string_view field, std::string_view expected) {
    const Type t = r_.PeekType();
    if ((t == Type::kArray || t == Type::kMap) && r_.ContainerTooLong()) {
      return Fail(StatusCode::kMalformed, field,
                  std::string(TypeName(t)) + " length exceeds the remaining " +
                      std::to_string(r_.remaining()) + " bytes");
    }
    if (r_.TruncatedScalar()) {
      return Fail(StatusCode::kMalformed, field, std::string(TypeName(t)) + " truncated");
    }
    return Fail(StatusCode::kMalformed, field,
                "expected " + std::string(expected) + ", got " + TypeName(t));
  }

  bool Skip(std::string_view field, int parent_level) {
    const SkipError e = r_.SkipValue(parent_level, kMaxNesting);
    switch (e) {
      case SkipError::kNone:
        return true;
      case SkipError::kTooDeep:
        return Fail(StatusCode::kLimitExceeded, field,
                    "nesting deeper than " + std::to_string(kMaxNesting));
      case SkipError::kInvalid:
        return Fail(StatusCode::kMalformed, field, "reserved byte 0xc1");
      case SkipError::kTruncated:
        break;
    }
    return Fail(StatusCode::kMalformed, field, "truncated value");
  }

  // ---- scalars ----

  bool ReadHash(std::string_view field, EngineHash& out) {
    const Type t = r_.PeekType();
    if (t == Type::kUint || t == Type::kNegInt) {
      uint64_t bits;
      bool negative;
      if (r_.ReadInt(bits, negative)) {
        flags_.negative_hash |= negative;
        out.value = bits;
        return true;
      }
    } else if (t == Type::kBin) {
      std::span<const uint8_t> bytes;
      if (r_.ReadBin(bytes)) {
        out.value = NormaliseHashBytes(bytes);
        return true;
      }
    } else if (t == Type::kStr) {
      std::string_view s;
      if (r_.ReadStr(s)) {
        out.value = NormaliseHashString(s);
        return true;
      }
    }
    return TypeFail(field, "int, bin or str hash");
  }

  bool ReadOptHash(std::string_view field, std::optional<EngineHash>& out) {
    if (r_.TryNil()) {
      out.reset();
      return true;
    }
    EngineHash h;
    if (!ReadHash(field, h)) return false;
    out = h;
    return true;
  }

  bool ReadHashList(std::string_view field, std::vector<EngineHash>& out) {
    // One msgpack-cxx parse for the whole array; anything it does not take (a wrong type, a
    // truncation) is read again item by item for the error message.
    if (r_.ReadHashes(out, flags_.negative_hash)) return true;
    uint32_t n;
    if (!r_.ReadArray(n)) return TypeFail(field, "array");
    out.clear();
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      EngineHash h;
      if (!ReadHash(field, h)) return false;
      out.push_back(h);
    }
    return true;
  }

  bool ReadTokens(std::string_view field, std::vector<TokenId>& out) {
    // The hot path of every decode: one msgpack-cxx parse for the whole array. What it does not
    // take (a limit, a wrong type, a truncation) is read again item by item for the message.
    if (r_.ReadTokenIds(out, kMaxTokensPerEvent)) return true;
    uint32_t n;
    if (!r_.ReadArray(n)) {
      if (r_.PeekType() == Type::kArray && !r_.ContainerTooLong()) {
        return Fail(StatusCode::kMalformed, field, "truncated array header");
      }
      return TypeFail(field, "array");
    }
    if (n > kMaxTokensPerEvent) {
      return Fail(StatusCode::kLimitExceeded, field,
                  std::to_string(n) + " token ids exceed the limit of " +
                      std::to_string(kMaxTokensPerEvent));
    }
    out.clear();
    out.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* p = r_.position();
      uint64_t bits;
      bool negative;
      if (!r_.ReadInt(bits, negative)) return TypeFail(field, "int token id");
      if (negative || bits > UINT32_MAX) {
        r_.set_position(p);
        return Fail(
            StatusCode::kMalformed, field,
            "token id " +
                (negative ? std::to_string(static_cast<int64_t>(bits)) : std::to_string(bits)) +
                " at index " + std::to_string(i) + " does not fit in 32 bits");
      }
      out[i] = static_cast<TokenId>(bits);
    }
    return true;
  }

  bool ReadOptTokens(std::string_view field, std::vector<TokenId>& out) {
    if (r_.TryNil()) {
      out.clear();
      return true;
    }
    return ReadTokens(field, out);
  }

  bool ReadI64(std::string_view field, int64_t& out) {
    const uint8_t* p = r_.position();
    uint64_t bits;
    bool negative;
    if (!r_.ReadInt(bits, negative)) return TypeFail(field, "int");
    if (!negative && bits > static_cast<uint64_t>(INT64_MAX)) {
      r_.set_position(p);
      return Fail(StatusCode::kMalformed, field, std::to_string(bits) + " does not fit in int64");
    }
    out = static_cast<int64_t>(bits);
    return true;
  }

  bool ReadU64(std::string_view field, uint64_t& out) {
    const uint8_t* p = r_.position();
    bool negative;
    if (!r_.ReadInt(out, negative)) return TypeFail(field, "int");
    if (negative) {
      r_.set_position(p);
      return Fail(StatusCode::kMalformed, field,
                  std::to_string(static_cast<int64_t>(out)) + " is negative");
    }
    return true;
  }

  bool ReadU32(std::string_view field, uint32_t& out) {
    const uint8_t* p = r_.position();
    uint64_t v = 0;  // (set by ReadU64; the 0 quiets GCC's maybe-uninitialized across inlining)
    if (!ReadU64(field, v)) return false;
    if (v > UINT32_MAX) {
      r_.set_position(p);
      return Fail(StatusCode::kMalformed, field, std::to_string(v) + " does not fit in 32 bits");
    }
    out = static_cast<uint32_t>(v);
    return true;
  }

  bool ReadRank(std::string_view field, std::optional<DpRank>& out) {
    if (r_.TryNil()) {
      out.reset();
      return true;
    }
    const uint8_t* p = r_.position();
    int64_t v = 0;  // (set by ReadI64; the 0 quiets GCC's maybe-uninitialized across inlining)
    if (!ReadI64(field, v)) return false;
    if (v < INT32_MIN || v > INT32_MAX) {
      r_.set_position(p);
      return Fail(StatusCode::kMalformed, field, std::to_string(v) + " does not fit in 32 bits");
    }
    out = static_cast<DpRank>(v);
    return true;
  }

  template <typename T, typename F>
  bool ReadOpt(std::optional<T>& out, F&& read) {
    if (r_.TryNil()) {
      out.reset();
      return true;
    }
    T v{};
    if (!read(v)) return false;
    out = std::move(v);
    return true;
  }

  bool ReadOptI64(std::string_view field, std::optional<int64_t>& out) {
    return ReadOpt(out, [&](int64_t& v) { return ReadI64(field, v); });
  }
  bool ReadOptU64(std::string_view field, std::optional<uint64_t>& out) {
    return ReadOpt(out, [&](uint64_t& v) { return ReadU64(field, v); });
  }
  bool ReadOptU32(std::string_view field, std::optional<uint32_t>& out) {
    return ReadOpt(out, [&](uint32_t& v) { return ReadU32(field, v); });
  }

  bool ReadStr(std::string_view field, std::string& out) {
    std::string_view s;
    if (!r_.ReadStr(s)) return TypeFail(field, "str");
    out.assign(s);
    return true;
  }
  bool ReadOptStr(std::string_view field, std::optional<std::string>& out) {
    return ReadOpt(out, [&](std::string& v) { return ReadStr(field, v); });
  }

  // A tenant id may be sent as a string or an integer (spelled in decimal).
  bool ReadOptTenant(std::string_view field, std::optional<std::string>& out) {
    const Type t = r_.PeekType();
    if (t == Type::kUint || t == Type::kNegInt) {
      uint64_t bits;
      bool negative;
      if (!r_.ReadInt(bits, negative)) return TypeFail(field, "str or int");
      out = negative ? std::to_string(static_cast<int64_t>(bits)) : std::to_string(bits);
      return true;
    }
    return ReadOptStr(field, out);
  }

  bool ReadOptTier(std::string_view field, std::optional<Tier>& tier,
                   std::optional<std::string>& spelling) {
    if (r_.TryNil()) {
      tier.reset();
      spelling.reset();
      return true;
    }
    std::string_view s;
    if (!r_.ReadStr(s)) return TypeFail(field, "str or nil");
    // The canonical spellings skip ParseTier's case-insensitive table walk.
    // (A canonical spelling is its own name: no spelling to keep.)
    if (Eq(s, "GPU") || Eq(s, "CPU")) {
      if (!tier || tier->kind() != (s[0] == 'G' ? Tier::Kind::kGpu : Tier::Kind::kCpu)) {
        tier = s[0] == 'G' ? Tier::Gpu() : Tier::Cpu();
      }
      spelling.reset();
      return true;
    }
    tier = ParseTier(s);
    if (s != tier->name()) {
      spelling = std::string(s);
    } else {
      spelling.reset();
    }
    return true;
  }

  // ---- extra_keys (vLLM), vllm_extra_keys.cpp ----

  bool ReadTypedExtraItem(std::vector<ExtraItem>& items, bool first);
  bool ReadExtraKeys(ExtraKeys& extra);
  // Applies extra keys to a stored event (salt, LoRA name, multimodal keys per block).
  static void ResolveExtraKeys(ExtraKeys& extra, BlockStored& ev);
  // Resolves extra keys of `blocks` blocks: the salt and LoRA name into ev.scope where not set
  // already, multimodal keys into `mm` (left empty when no block has one). True when the salt
  // came from them.
  static bool ResolveExtraItems(ExtraKeys& extra, size_t blocks, BlockStored& ev,
                                std::vector<std::vector<MultimodalKey>>& mm);
  // vLLM's skipped context (map events): turns a run of blocks after chunks the group did not
  // store into the sparse form kvindex indexes (event.h, WireDetails::skipped_context).
  bool ApplySkippedContext(MapFields& f, BlockStored& ev);
  // TensorRT-LLM's mm_keys segments become the event's multimodal keys (wire.mm_keys).
  bool ApplyMmKeys(MapFields& f, BlockStored& ev);

  // ---- SGLang, sglang_decoder.cpp ----

  // A BlockStored's token_ids: a flat list, or SGLang EAGLE's bigram pairs [[t0,t1],[t1,t2],...]
  // (recognised by an array as the first item). Pairs must chain (each pair's first item is the
  // previous pair's second); `out` then holds the first item of every pair and `next` the last
  // pair's second. `next` is reset for a flat list.
  bool ReadStoredTokens(std::string_view field, std::vector<TokenId>& out,
                        std::optional<TokenId>& next);
  // vLLM block_offsets: nil, or strictly increasing u32 chunk indices, one per block hash.
  bool ReadBlockOffsets(std::vector<uint32_t>& out);
  // TensorRT-LLM's mm_keys: nil, or one list of multimodal segments per block (nil or a list),
  // read as multimodal keys {hash, start_offset}; `any` says whether some block has one.
  bool ReadMmKeys(std::vector<std::vector<MultimodalKey>>& out, bool& any);
  // A stored event's block_offsets, once the event is whole: one per block hash.
  bool CheckBlockOffsets(const BlockStored& ev) {
    if (ev.block_offsets.empty() || ev.block_offsets.size() == ev.block_hashes.size()) return true;
    return Fail(StatusCode::kMalformed, "block_offsets",
                std::to_string(ev.block_offsets.size()) + " offsets for " +
                    std::to_string(ev.block_hashes.size()) + " block hashes");
  }

  // SGLang metadata map: {cache_salt, session_id}.
  bool ReadMetadata(std::optional<std::string>& salt, std::optional<std::string>& session);

  // ---- positional events (vLLM, SGLang), vllm_array_decoder.cpp ----
  // `n` is the length of the event's array, whose tag has been read.

  bool DecodeStoredArray(uint32_t n, EventSlots& out);
  bool DecodeRemovedArray(uint32_t n, EventSlots& out);

  // ---- Mooncake seed era, mooncake_seed_decoder.cpp ----

  bool ReadReplicas(std::vector<Replica>& replicas);
  bool DecodeStoreUpdateArray(uint32_t n, EventSlots& out);
  // Hashes of the seed guide's BlockStoreEvent: a string ("" = none), an int, or an array.
  bool ReadSeedHashes(std::string_view field, std::vector<EngineHash>& out);
  bool DecodeBlockStoreArray(uint32_t n, EventSlots& out);

  // ---- map events, vllm_map_decoder.cpp ----

  bool DecodeMapEvent(EventSlots& out);
  // Builds the event from the fields of its family: an RFC #1527 map (event_type or seq_hashes)
  // keeps the store publisher's keys, a vLLM/SGLang map keeps the engine's; the other family's
  // keys are ignored like unknown keys. An engine AllBlocksCleared carries nothing.
  bool BuildMapEvent(MapFields& f, EventSlots& out, bool rfc);

  // ---- one event, the events array: event_batch_decoder.cpp ----

  bool DecodeEvent(EventSlots& out);
  // Decodes the events array into `batch` (over the events it already holds, see EventSlots);
  // false only when the envelope is unusable (the failure is then set).
  bool DecodeEvents(EventBatch& batch);

 private:
  TokenReader& r_;
  Flags& flags_;
  Family family_ = Family::kNeutral;        // of the batch: its first non-neutral event's
  Family event_family_ = Family::kNeutral;  // of the event just decoded
  StatusCode fail_code_ = StatusCode::kOk;
  size_t fail_offset_ = 0;
  std::string fail_message_;
  ExtraKeys extra_;                       // DecodeStoredArray's scratch
  std::optional<std::string> meta_salt_;  // DecodeStoredArray's scratch
};

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_DECODER_H_
