// The event decoder: one pass over the payload with the bounds-checked reader of
// msgpack_reader.h, filling EventBatch directly (no msgpack object tree; docs/benchmarks.md has
// the comparison with msgpack-cxx's generic unpack). The encoder is in event_encoder.cpp.
//
// Compatibility facts (docs/wire-formats.md has the full list, with the publisher versions):
//  - msgspec array_like structs write every field of their version, so the length of a positional
//    event tells its vLLM/SGLang version; shorter arrays take trailing defaults and longer ones have
//    their extra items skipped (msgspec's own decoder does the same).
//  - Map events (vLLM >= 0.24, SGLang main, Mooncake RFC #1527) omit defaulted fields; keys may
//    come in any order and unknown keys are skipped.
//  - Hashes are unsigned (vLLM), signed (SGLang), bin digests (vLLM with int hashes off) or
//    strings (the Mooncake seed guide); all are normalised to u64.
#include "kvindex/codec/event_codec.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "event_codec_internal.h"
#include "msgpack_reader.h"

namespace kvindex {

using msgpack_reader::Reader;
using msgpack_reader::SkipError;
using msgpack_reader::Type;
using msgpack_reader::TypeName;

Result<WireFormat> ParseWireFormat(std::string_view name) {
  for (WireFormat f : {WireFormat::kVllmV09, WireFormat::kVllm, WireFormat::kVllmMap,
                       WireFormat::kSglang, WireFormat::kMooncake, WireFormat::kMooncakeSeed}) {
    if (name == WireFormatName(f)) return f;
  }
  return Status::InvalidArgument("unknown wire format '" + std::string(name) +
                                 "' (expected vllm-v0.9, vllm, vllm-map, sglang, mooncake or "
                                 "mooncake-seed)");
}

std::string_view WireFormatName(WireFormat format) {
  switch (format) {
    case WireFormat::kVllmV09: return "vllm-v0.9";
    case WireFormat::kVllm: return "vllm";
    case WireFormat::kVllmMap: return "vllm-map";
    case WireFormat::kSglang: return "sglang";
    case WireFormat::kMooncake: return "mooncake";
    case WireFormat::kMooncakeSeed: return "mooncake-seed";
  }
  return "vllm";
}

namespace codec_internal {

bool ParseHashString(std::string_view s, uint64_t& value) {
  auto hex_digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    if (s.size() - 2 > 16) return false;
    uint64_t v = 0;
    for (size_t i = 2; i < s.size(); ++i) {
      const int d = hex_digit(s[i]);
      if (d < 0) return false;
      v = (v << 4) | static_cast<uint64_t>(d);
    }
    value = v;
    return true;
  }
  const bool negative = !s.empty() && s[0] == '-';
  const std::string_view digits = negative ? s.substr(1) : s;
  if (digits.empty() || digits.size() > 20) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (negative) {
    if (v > (uint64_t{1} << 63)) return false;
    value = ~v + 1;  // two's complement of -v
  } else {
    value = v;
  }
  return true;
}

uint64_t NormaliseHashString(std::string_view s) {
  uint64_t v;
  if (ParseHashString(s, v)) return v;
  return XXH3_64bits(s.data(), s.size());
}

uint64_t NormaliseHashBytes(std::span<const uint8_t> bytes) {
  uint64_t v = 0;
  const size_t from = bytes.size() > 8 ? bytes.size() - 8 : 0;
  for (size_t i = from; i < bytes.size(); ++i) v = (v << 8) | bytes[i];
  return v;
}

std::string EmbedsId(std::span<const uint8_t> digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kEmbedsPrefix);
  for (uint8_t b : digest) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

bool IsEmbedsKey(const MultimodalKey& key) {
  if (key.offset != 0 || key.id.size() <= kEmbedsPrefix.size() ||
      key.id.compare(0, kEmbedsPrefix.size(), kEmbedsPrefix) != 0) {
    return false;
  }
  const size_t digits = key.id.size() - kEmbedsPrefix.size();
  if (digits % 2 != 0) return false;
  for (size_t i = kEmbedsPrefix.size(); i < key.id.size(); ++i) {
    const char c = key.id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace codec_internal

namespace {

// Equality with a literal, inlined (std::string_view's == goes through an ordering compare,
// which the compiler leaves to a memcmp call on the hot path).
template <size_t N>
inline bool Eq(std::string_view s, const char (&literal)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), literal, N - 1) == 0;
}

using codec_internal::EmbedsId;
using codec_internal::NormaliseHashBytes;
using codec_internal::NormaliseHashString;

// Nesting levels of the structural parse (the batch itself is level 1).
constexpr int kBatchLevel = 1;
constexpr int kEventLevel = 3;  // batch > events > event

// The publisher family of an event. A batch holds one family (plus neutral clears): an event of
// another family fails alone with kUnsupported, so every decoded batch has a format that
// encodes it exactly.
enum class Family : uint8_t { kNeutral, kEngine, kRfc, kSeed };

const char* FamilyName(Family f) {
  switch (f) {
    case Family::kEngine: return "vLLM/SGLang";
    case Family::kRfc: return "Mooncake RFC #1527";
    case Family::kSeed: return "Mooncake seed";
    case Family::kNeutral: break;
  }
  return "neutral";
}

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
  // (block index, items) for the blocks that carry keys; nil and empty entries take no memory.
  std::vector<std::pair<uint32_t, std::vector<ExtraItem>>> blocks;
};

// Every field a map event (vLLM, SGLang or RFC) may carry.
struct MapFields {
  std::optional<std::string> type, event_type;
  bool has_block_hashes = false, has_seq_hashes = false;
  std::vector<EngineHash> block_hashes, seq_hashes;
  std::optional<EngineHash> parent_block_hash, parent_hash;
  std::vector<TokenId> token_ids;
  std::optional<uint32_t> block_size;
  std::optional<int64_t> lora_id;
  std::optional<Tier> tier;
  std::optional<std::string> tier_spelling;
  std::optional<std::string> lora_name;
  ExtraKeys extra;
  std::optional<uint32_t> group_idx, group_id;
  std::optional<std::string> spec_kind;
  std::optional<int64_t> sliding_window;
  std::optional<std::string> locality, ownership, session_id;
  std::optional<std::string> meta_salt, meta_session;
  std::optional<uint64_t> event_id;
  std::optional<int64_t> timestamp;
  std::optional<std::string> model, salt, tenant, backend_id, object_key;
  std::optional<DpRank> dp_rank;
  std::optional<uint64_t> base_block_idx;
};

enum class MapKey : uint8_t {
  kUnknown, kType, kEventType, kBlockHashes, kSeqHashes, kParentBlockHash, kParentHash, kTokenIds,
  kBlockSize, kLoraId, kMedium, kLoraName, kExtraKeys, kGroupIdx, kGroupId, kSpecKind,
  kSlidingWindow, kLocality, kOwnership, kSessionId, kMetadata, kEventId, kTimestamp, kModelName,
  kAdditionalSalt, kTenantId, kBackendId, kDpRank, kObjectKey, kBaseBlockIdx,
};

MapKey LookupMapKey(std::string_view k) {
  static constexpr std::pair<std::string_view, MapKey> kKeys[] = {
      {"type", MapKey::kType},
      {"event_type", MapKey::kEventType},
      {"block_hashes", MapKey::kBlockHashes},
      {"seq_hashes", MapKey::kSeqHashes},
      {"parent_block_hash", MapKey::kParentBlockHash},
      {"parent_hash", MapKey::kParentHash},
      {"token_ids", MapKey::kTokenIds},
      {"block_size", MapKey::kBlockSize},
      {"lora_id", MapKey::kLoraId},
      {"medium", MapKey::kMedium},
      {"lora_name", MapKey::kLoraName},
      {"extra_keys", MapKey::kExtraKeys},
      {"group_idx", MapKey::kGroupIdx},
      {"group_id", MapKey::kGroupId},
      {"kv_cache_spec_kind", MapKey::kSpecKind},
      {"kv_cache_spec_sliding_window", MapKey::kSlidingWindow},
      {"locality", MapKey::kLocality},
      {"ownership", MapKey::kOwnership},
      {"session_id", MapKey::kSessionId},
      {"metadata", MapKey::kMetadata},
      {"event_id", MapKey::kEventId},
      {"timestamp", MapKey::kTimestamp},
      {"model_name", MapKey::kModelName},
      {"additional_salt", MapKey::kAdditionalSalt},
      {"tenant_id", MapKey::kTenantId},
      {"backend_id", MapKey::kBackendId},
      {"dp_rank", MapKey::kDpRank},
      {"object_key", MapKey::kObjectKey},
      {"base_block_idx", MapKey::kBaseBlockIdx},
  };
  for (const auto& [name, key] : kKeys) {
    if (name.size() == k.size() && std::memcmp(name.data(), k.data(), k.size()) == 0) return key;
  }
  return MapKey::kUnknown;
}

// The events of the batch being decoded, written over the events a reused batch already holds:
// a slot that holds an event of the wanted kind is emptied in place, so its vectors keep their
// capacity and a steady stream of similar batches decodes without allocating (DecodeEventBatchInto).
class EventSlots {
 public:
  explicit EventSlots(std::vector<Event>& events) : events_(events) {}
  ~EventSlots() { events_.resize(used_); }
  EventSlots(const EventSlots&) = delete;
  EventSlots& operator=(const EventSlots&) = delete;

  size_t size() const { return used_; }
  Event& back() { return events_[used_ - 1]; }
  // Drops the events after the first `n` (an event that failed alone).
  void Truncate(size_t n) { used_ = n; }
  // Room for `n` more events beyond those the batch already holds.
  void Reserve(size_t n) { events_.reserve(std::max(events_.size(), used_ + n)); }

  // The next event, empty, of kind T.
  template <typename T>
  T& Next() {
    if (used_ < events_.size()) {
      Event& slot = events_[used_++];
      if (T* old = std::get_if<T>(&slot)) {
        Empty(*old);
        return *old;
      }
      return slot.emplace<T>();
    }
    ++used_;
    return std::get<T>(events_.emplace_back(std::in_place_type<T>));
  }

  template <typename T>
  void push_back(T&& event) {
    if (used_ < events_.size()) {
      events_[used_++] = std::forward<T>(event);
      return;
    }
    events_.emplace_back(std::forward<T>(event));
    ++used_;
  }

 private:
  // Field by field: only what is engaged is reset (no temporary is built). The size checks make
  // a field added to event.h fail here until it is reset too.
  static_assert(sizeof(void*) != 8 || sizeof(EventScopeFields) == 200,
                "EventScopeFields changed: reset the new field in EventSlots::Empty()");
  static_assert(sizeof(void*) != 8 || sizeof(WireDetails) == 344,
                "WireDetails changed: reset the new field in EventSlots::Empty()");
  static void Empty(EventScopeFields& f) {
    f.model.reset();
    f.tenant.reset();
    f.salt.reset();
    f.lora_name.reset();
    f.lora_id.reset();
    f.block_size.reset();
    f.group.reset();
    f.dp_rank.reset();
  }
  static void Empty(WireDetails& w) {
    w.event_id.reset();
    w.timestamp_ms.reset();
    w.backend_id.reset();
    w.base_block_idx.reset();
    w.object_key.reset();
    w.spec_kind.reset();
    w.sliding_window.reset();
    w.locality.reset();
    w.ownership.reset();
    w.session_id.reset();
    w.tier_spelling.reset();
  }
  static void Empty(BlockStored& e) {
    e.block_hashes.clear();
    e.parent.reset();
    e.token_ids.clear();
    e.tier.reset();
    Empty(e.scope);
    e.multimodal.clear();
    e.standard_hashes = false;
    Empty(e.wire);
  }
  static void Empty(AllCleared& e) {
    e.tier.reset();
    Empty(e.scope);
    Empty(e.wire);
  }
  static void Empty(BlockRemoved& e) {
    e.block_hashes.clear();
    e.tier.reset();
    Empty(e.scope);
    Empty(e.wire);
  }

  std::vector<Event>& events_;
  size_t used_ = 0;
};

class Decoder {
 public:
  Decoder(Reader& r, Flags& flags) : r_(r), flags_(flags) {}

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
    if (IsTruncatedScalar(t)) {
      return Fail(StatusCode::kMalformed, field, std::string(TypeName(t)) + " truncated");
    }
    return Fail(StatusCode::kMalformed, field,
                "expected " + std::string(expected) + ", got " + TypeName(t));
  }

  bool IsTruncatedScalar(Type t) {
    if (t == Type::kEnd || t == Type::kArray || t == Type::kMap || t == Type::kInvalid) return false;
    Reader copy = r_;
    return copy.SkipValue(0, kMaxNesting) == SkipError::kTruncated;
  }

  bool Skip(std::string_view field, int parent_level) {
    const SkipError e = r_.SkipValue(parent_level, kMaxNesting);
    switch (e) {
      case SkipError::kNone: return true;
      case SkipError::kTooDeep:
        return Fail(StatusCode::kLimitExceeded, field,
                    "nesting deeper than " + std::to_string(kMaxNesting));
      case SkipError::kInvalid: return Fail(StatusCode::kMalformed, field, "reserved byte 0xc1");
      case SkipError::kTruncated: break;
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
    uint32_t n;
    if (!r_.ReadArray(n)) return TypeFail(field, "array");
    out.clear();
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* p = r_.position();
      // (ReadArray's count check holds at the header only: wide elements may have used the
      // bytes since, so every element checks that it is there.)
      if (r_.remaining() >= 9 && *p == 0xcf) {  // the common vLLM form: uint64
        out.push_back(EngineHash{Reader::Be64(p + 1)});
        r_.set_position(p + 9);
        continue;
      }
      EngineHash h;
      if (!ReadHash(field, h)) return false;
      out.push_back(h);
    }
    return true;
  }

  bool ReadTokens(std::string_view field, std::vector<TokenId>& out) {
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
    TokenId* dst = out.data();
    // The hot loop of every decode: local pointers, the common widths first.
    const uint8_t* p = r_.position();
    const uint8_t* const end = p + r_.remaining();
    for (uint32_t i = 0; i < n; ++i) {
      if (p >= end) {
        r_.set_position(p);
        return TypeFail(field, "int token id");
      }
      const uint8_t b = *p;
      if (b < 0x80) {
        dst[i] = b;
        p += 1;
      } else if (b == 0xce && end - p >= 5) {
        dst[i] = Reader::Be32(p + 1);
        p += 5;
      } else if (b == 0xcd && end - p >= 3) {
        dst[i] = Reader::Be16(p + 1);
        p += 3;
      } else if (b == 0xcc && end - p >= 2) {
        dst[i] = p[1];
        p += 2;
      } else {
        r_.set_position(p);
        uint64_t bits;
        bool negative;
        if (!r_.ReadInt(bits, negative)) return TypeFail(field, "int token id");
        if (negative || bits > UINT32_MAX) {
          r_.set_position(p);
          return Fail(StatusCode::kMalformed, field,
                      "token id " + (negative ? std::to_string(static_cast<int64_t>(bits))
                                              : std::to_string(bits)) +
                          " at index " + std::to_string(i) + " does not fit in 32 bits");
        }
        dst[i] = static_cast<TokenId>(bits);
        p = r_.position();
      }
    }
    r_.set_position(p);
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
    uint64_t v;
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
    int64_t v;
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

  // ---- extra_keys (vLLM) ----

  bool ReadTypedExtraItem(std::vector<ExtraItem>& items, bool first) {
    uint32_t n;
    if (!r_.ReadMap(n)) return TypeFail("extra_keys", "map");
    std::string type, name, salt, hash_str;
    std::optional<int64_t> offset;
    std::span<const uint8_t> digest;
    bool has_digest = false;
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      if (!r_.ReadStr(key)) {
        if (!Skip("extra_keys", 6) || !Skip("extra_keys", 6)) return false;
        continue;
      }
      if (Eq(key, "type")) {
        if (!ReadStr("extra_keys.type", type)) return false;
      } else if (Eq(key, "name")) {
        if (!ReadStr("extra_keys.name", name)) return false;
      } else if (Eq(key, "salt")) {
        if (!ReadStr("extra_keys.salt", salt)) return false;
      } else if (Eq(key, "block_offset")) {
        int64_t v;
        if (!ReadI64("extra_keys.block_offset", v)) return false;
        offset = v;
      } else if (Eq(key, "hash")) {
        if (r_.PeekType() == Type::kBin) {
          if (!r_.ReadBin(digest)) return TypeFail("extra_keys.hash", "bin");
          has_digest = true;
        } else if (!ReadStr("extra_keys.hash", hash_str)) {
          return false;
        }
      } else if (!Skip("extra_keys", 6)) {
        return false;
      }
    }
    ExtraItem item{ExtraItem::Kind::kStr, first, {}, 0};
    if (type == "lora") {
      item.kind = ExtraItem::Kind::kLora;
      item.text = std::move(name);
    } else if (type == "cache_salt") {
      item.kind = ExtraItem::Kind::kSalt;
      item.text = std::move(salt);
    } else if (type == "mm") {
      item.kind = ExtraItem::Kind::kMm;
      item.text = has_digest ? EmbedsId(digest) : std::move(hash_str);
      item.offset = offset.value_or(0);
    } else if (type == "prompt_embeds") {
      if (!has_digest && hash_str.empty()) {
        return Fail(StatusCode::kMalformed, "extra_keys", "prompt_embeds without a hash");
      }
      item.kind = has_digest ? ExtraItem::Kind::kEmbeds : ExtraItem::Kind::kMm;
      item.text = has_digest ? EmbedsId(digest) : std::move(hash_str);
    } else {
      return true;  // "legacy" and unknown typed keys carry nothing kvindex uses
    }
    items.push_back(std::move(item));
    return true;
  }

  bool ReadExtraKeys(ExtraKeys& extra) {
    if (r_.TryNil()) return true;
    uint32_t n;
    if (!r_.ReadArray(n)) return TypeFail("extra_keys", "array or nil");
    extra.present = true;
    for (uint32_t b = 0; b < n; ++b) {
      const Type t = r_.PeekType();
      if (t == Type::kNil) {
        r_.TryNil();
        continue;
      }
      std::vector<ExtraItem> items;
      if (t == Type::kMap) {
        if (!ReadTypedExtraItem(items, true)) return false;
        if (!items.empty()) extra.blocks.emplace_back(b, std::move(items));
        continue;
      }
      uint32_t m;
      if (!r_.ReadArray(m)) return TypeFail("extra_keys", "array, map or nil per block");
      for (uint32_t i = 0; i < m; ++i) {
        const bool first = i == 0;
        const Type it = r_.PeekType();
        if (it == Type::kStr) {
          ExtraItem item{ExtraItem::Kind::kStr, first, {}, 0};
          if (!ReadStr("extra_keys", item.text)) return false;
          items.push_back(std::move(item));
        } else if (it == Type::kArray) {  // (mm identifier, offset in block)
          uint32_t k;
          if (!r_.ReadArray(k)) return TypeFail("extra_keys", "array");
          if (k < 2) return Fail(StatusCode::kMalformed, "extra_keys", "expected (id, offset)");
          ExtraItem item{ExtraItem::Kind::kMm, first, {}, 0};
          if (!ReadStr("extra_keys.mm_id", item.text)) return false;
          if (!ReadI64("extra_keys.mm_offset", item.offset)) return false;
          for (uint32_t j = 2; j < k; ++j) {
            if (!Skip("extra_keys", 6)) return false;
          }
          items.push_back(std::move(item));
        } else if (it == Type::kBin) {  // prompt-embeds digest
          std::span<const uint8_t> digest;
          if (!r_.ReadBin(digest)) return TypeFail("extra_keys", "bin");
          items.push_back(ExtraItem{ExtraItem::Kind::kEmbeds, first, EmbedsId(digest), 0});
        } else if (it == Type::kMap) {
          if (!ReadTypedExtraItem(items, first)) return false;
        } else if (!Skip("extra_keys", 5)) {  // older lora_int_id and anything unknown
          return false;
        }
      }
      if (!items.empty()) extra.blocks.emplace_back(b, std::move(items));
    }
    return true;
  }

  // Applies extra keys to a stored event (salt, LoRA name, multimodal keys per block).
  static void ResolveExtraKeys(ExtraKeys& extra, BlockStored& ev) {
    if (!extra.present) return;
    std::optional<std::string> salt;
    bool any_mm = false;
    std::vector<std::vector<MultimodalKey>> mm(ev.block_hashes.size());
    for (auto& [b, items] : extra.blocks) {
      for (ExtraItem& item : items) {
        switch (item.kind) {
          case ExtraItem::Kind::kStr:
            // A tuple starts with the LoRA name when the request has one; any other string is
            // the cache salt (vllm-wire.md §2.4).
            if (item.first && ev.scope.lora_name && item.text == *ev.scope.lora_name) break;
            if (!salt) salt = std::move(item.text);
            break;
          case ExtraItem::Kind::kLora:
            if (!ev.scope.lora_name) ev.scope.lora_name = std::move(item.text);
            break;
          case ExtraItem::Kind::kSalt:
            if (!salt) salt = std::move(item.text);
            break;
          case ExtraItem::Kind::kMm:
          case ExtraItem::Kind::kEmbeds:
            if (b < mm.size()) {
              mm[b].push_back(MultimodalKey{std::move(item.text), item.offset});
              any_mm = true;
            }
            break;
        }
      }
    }
    if (salt && !ev.scope.salt) ev.scope.salt = std::move(salt);
    if (any_mm) {
      // Pairs first, digests last: the order vLLM writes them in (and the encoder does).
      for (auto& keys : mm) {
        std::stable_partition(keys.begin(), keys.end(), [](const MultimodalKey& k) {
          return !codec_internal::IsEmbedsKey(k);
        });
      }
      ev.multimodal = std::move(mm);
    }
  }

  // SGLang metadata map: {cache_salt, session_id}.
  bool ReadMetadata(std::optional<std::string>& salt, std::optional<std::string>& session) {
    if (r_.TryNil()) return true;
    uint32_t n;
    if (!r_.ReadMap(n)) return TypeFail("metadata", "map");
    flags_.sglang_metadata = true;
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      if (r_.ReadStr(key)) {
        if (Eq(key, "cache_salt")) {
          if (!ReadOptStr("metadata.cache_salt", salt)) return false;
          continue;
        }
        if (Eq(key, "session_id")) {
          if (!ReadOptStr("metadata.session_id", session)) return false;
          continue;
        }
      } else if (!Skip("metadata", 5)) {
        return false;
      }
      if (!Skip("metadata", 5)) return false;
    }
    return true;
  }

  // ---- positional events ----

  bool DecodeStoredArray(uint32_t n, EventSlots& out) {
    if (n < 6) {
      return Fail(StatusCode::kMalformed, "BlockStored",
                  "expected at least 6 elements (tag + 5 fields), got " + std::to_string(n));
    }
    // Built in place (a BlockStored is large); the caller drops it again if decoding fails.
    BlockStored& ev = out.Next<BlockStored>();
    if (!ReadHashList("block_hashes", ev.block_hashes)) return false;
    if (!ReadOptHash("parent_block_hash", ev.parent)) return false;
    if (!ReadTokens("token_ids", ev.token_ids)) return false;
    uint32_t block_size = 0;
    if (!ReadU32("block_size", block_size)) return false;
    ev.scope.block_size = block_size;
    if (!ReadOptI64("lora_id", ev.scope.lora_id)) return false;
    // Scratch kept in the decoder (emptied here, not built per event).
    ExtraKeys& extra = extra_;
    extra.present = false;
    extra.blocks.clear();
    std::optional<std::string>& meta_salt = meta_salt_;
    meta_salt.reset();
    for (uint32_t i = 6; i < n; ++i) {
      bool ok = true;
      switch (i) {
        case 6: ok = ReadOptTier("medium", ev.tier, ev.wire.tier_spelling); break;
        case 7:
          if (r_.PeekType() == Type::kMap) {  // SGLang BlockStoredWithMetadata
            ok = ReadMetadata(meta_salt, ev.wire.session_id);
          } else {
            ok = ReadOptStr("lora_name", ev.scope.lora_name);
          }
          break;
        case 8: ok = ReadExtraKeys(extra); break;
        case 9: ok = ReadOptU32("group_idx", ev.scope.group); break;
        case 10: ok = ReadOptStr("kv_cache_spec_kind", ev.wire.spec_kind); break;
        case 11: ok = ReadOptI64("kv_cache_spec_sliding_window", ev.wire.sliding_window); break;
        default: ok = Skip("BlockStored", kEventLevel); break;
      }
      if (!ok) return false;
    }
    if (meta_salt) ev.scope.salt = std::move(meta_salt);
    ResolveExtraKeys(extra, ev);
    return true;
  }

  bool DecodeRemovedArray(uint32_t n, EventSlots& out) {
    if (n < 2) return Fail(StatusCode::kMalformed, "BlockRemoved", "missing block_hashes");
    BlockRemoved& ev = out.Next<BlockRemoved>();
    if (!ReadHashList("block_hashes", ev.block_hashes)) return false;
    for (uint32_t i = 2; i < n; ++i) {
      bool ok = true;
      switch (i) {
        case 2: ok = ReadOptTier("medium", ev.tier, ev.wire.tier_spelling); break;
        case 3: ok = ReadOptU32("group_idx", ev.scope.group); break;
        default: ok = Skip("BlockRemoved", kEventLevel); break;
      }
      if (!ok) return false;
    }
    return true;
  }

  bool ReadReplicas(std::vector<Replica>& replicas) {
    uint32_t n;
    if (!r_.ReadArray(n)) return TypeFail("replicas", "array");
    replicas.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t k;
      if (!r_.ReadArray(k)) return TypeFail("replicas", "[type, location] array");
      if (k < 2) return Fail(StatusCode::kMalformed, "replicas", "expected [type, location]");
      std::string_view type;
      if (!r_.ReadStr(type)) return TypeFail("replicas.type", "str");
      Replica replica{ParseTier(type), {}, {}};
      if (type != replica.tier.name()) replica.tier_spelling = std::string(type);
      if (!ReadStr("replicas.location", replica.location)) return false;
      for (uint32_t j = 2; j < k; ++j) {
        if (!Skip("replicas", 5)) return false;
      }
      replicas.push_back(std::move(replica));
    }
    return true;
  }

  bool DecodeStoreUpdateArray(uint32_t n, EventSlots& out) {
    if (n < 3) {
      return Fail(StatusCode::kMalformed, "BlockUpdateEvent",
                  "expected [tag, key, replicas], got " + std::to_string(n) + " elements");
    }
    StoreUpdate ev;
    if (!ReadStr("key", ev.key)) return false;
    if (!ReadReplicas(ev.replicas)) return false;
    for (uint32_t i = 3; i < n; ++i) {
      if (!Skip("BlockUpdateEvent", kEventLevel)) return false;
    }
    out.push_back(std::move(ev));
    return true;
  }

  // Hashes of the seed guide's BlockStoreEvent: a string ("" = none), an int, or an array.
  bool ReadSeedHashes(std::string_view field, std::vector<EngineHash>& out) {
    const Type t = r_.PeekType();
    if (t == Type::kNil) {
      r_.TryNil();
      return true;
    }
    if (t == Type::kArray) return ReadHashList(field, out);
    if (t == Type::kStr) {
      std::string_view s;
      if (!r_.ReadStr(s)) return TypeFail(field, "str");
      if (!s.empty()) out.push_back(EngineHash{NormaliseHashString(s)});
      return true;
    }
    EngineHash h;
    if (!ReadHash(field, h)) return false;
    out.push_back(h);
    return true;
  }

  bool DecodeBlockStoreArray(uint32_t n, EventSlots& out) {
    if (n < 8) {
      return Fail(StatusCode::kMalformed, "BlockStoreEvent",
                  "expected 8 elements (tag, key, replicas, model_name, block_size, block_hash, "
                  "parent_block_hash, token_ids), got " + std::to_string(n));
    }
    BlockStored stored;
    StoreUpdate update;
    if (!ReadStr("key", update.key)) return false;
    if (!ReadReplicas(update.replicas)) return false;
    if (!ReadOptStr("model_name", stored.scope.model)) return false;
    if (!ReadOptU32("block_size", stored.scope.block_size)) return false;
    if (!ReadSeedHashes("block_hash", stored.block_hashes)) return false;
    std::vector<EngineHash> parent;
    if (!ReadSeedHashes("parent_block_hash", parent)) return false;
    if (parent.size() > 1) {
      return Fail(StatusCode::kMalformed, "parent_block_hash", "more than one parent");
    }
    if (!parent.empty()) stored.parent = parent[0];
    if (!ReadOptTokens("token_ids", stored.token_ids)) return false;
    for (uint32_t i = 8; i < n; ++i) {
      if (!Skip("BlockStoreEvent", kEventLevel)) return false;
    }
    stored.wire.object_key = update.key;
    out.push_back(std::move(stored));
    out.push_back(std::move(update));
    return true;
  }

  // ---- map events ----

  bool DecodeMapEvent(EventSlots& out) {
    uint32_t n;
    if (!r_.ReadMap(n)) return TypeFail("event", "map");
    flags_.any_map_event = true;
    MapFields f;
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view key;
      if (!r_.ReadStr(key)) {  // a non-string key: skip it and its value
        if (!Skip("event key", kEventLevel) || !Skip("event", kEventLevel)) return false;
        continue;
      }
      bool ok = true;
      switch (LookupMapKey(key)) {
        case MapKey::kType: ok = ReadOptStr("type", f.type); break;
        case MapKey::kEventType: ok = ReadOptStr("event_type", f.event_type); break;
        case MapKey::kBlockHashes:
          f.has_block_hashes = !r_.TryNil();
          if (f.has_block_hashes) ok = ReadHashList("block_hashes", f.block_hashes);
          break;
        case MapKey::kSeqHashes:
          f.has_seq_hashes = !r_.TryNil();
          if (f.has_seq_hashes) ok = ReadHashList("seq_hashes", f.seq_hashes);
          flags_.any_rfc_event = true;
          break;
        case MapKey::kParentBlockHash:
          ok = ReadOptHash("parent_block_hash", f.parent_block_hash);
          break;
        case MapKey::kParentHash: ok = ReadOptHash("parent_hash", f.parent_hash); break;
        case MapKey::kTokenIds: ok = ReadOptTokens("token_ids", f.token_ids); break;
        case MapKey::kBlockSize: ok = ReadOptU32("block_size", f.block_size); break;
        case MapKey::kLoraId: ok = ReadOptI64("lora_id", f.lora_id); break;
        case MapKey::kMedium: ok = ReadOptTier("medium", f.tier, f.tier_spelling); break;
        case MapKey::kLoraName: ok = ReadOptStr("lora_name", f.lora_name); break;
        case MapKey::kExtraKeys:
          f.extra = ExtraKeys{};
          ok = ReadExtraKeys(f.extra);
          break;
        case MapKey::kGroupIdx: ok = ReadOptU32("group_idx", f.group_idx); break;
        case MapKey::kGroupId: ok = ReadOptU32("group_id", f.group_id); break;
        case MapKey::kSpecKind: ok = ReadOptStr("kv_cache_spec_kind", f.spec_kind); break;
        case MapKey::kSlidingWindow:
          ok = ReadOptI64("kv_cache_spec_sliding_window", f.sliding_window);
          break;
        case MapKey::kLocality: ok = ReadOptStr("locality", f.locality); break;
        case MapKey::kOwnership: ok = ReadOptStr("ownership", f.ownership); break;
        case MapKey::kSessionId: ok = ReadOptStr("session_id", f.session_id); break;
        case MapKey::kMetadata: ok = ReadMetadata(f.meta_salt, f.meta_session); break;
        case MapKey::kEventId: ok = ReadOptU64("event_id", f.event_id); break;
        case MapKey::kTimestamp: ok = ReadOptI64("timestamp", f.timestamp); break;
        case MapKey::kModelName: ok = ReadOptStr("model_name", f.model); break;
        case MapKey::kAdditionalSalt: ok = ReadOptStr("additional_salt", f.salt); break;
        case MapKey::kTenantId: ok = ReadOptTenant("tenant_id", f.tenant); break;
        case MapKey::kBackendId: ok = ReadOptStr("backend_id", f.backend_id); break;
        case MapKey::kDpRank: ok = ReadRank("dp_rank", f.dp_rank); break;
        case MapKey::kObjectKey: ok = ReadOptStr("object_key", f.object_key); break;
        case MapKey::kBaseBlockIdx: ok = ReadOptU64("base_block_idx", f.base_block_idx); break;
        case MapKey::kUnknown: ok = Skip(key, kEventLevel); break;
      }
      if (!ok) return false;
    }
    if (f.event_type) flags_.any_rfc_event = true;
    const bool rfc = f.event_type.has_value() || f.has_seq_hashes;
    if (!BuildMapEvent(f, out, rfc)) return false;
    if (rfc) {
      event_family_ = Family::kRfc;
    } else if (!std::holds_alternative<AllCleared>(out.back())) {
      event_family_ = Family::kEngine;
    }
    return true;
  }

  // Builds the event from the fields of its family: an RFC #1527 map (event_type or seq_hashes)
  // keeps the store publisher's keys, a vLLM/SGLang map keeps the engine's; the other family's
  // keys are ignored like unknown keys. An engine AllBlocksCleared carries nothing.
  bool BuildMapEvent(MapFields& f, EventSlots& out, bool rfc) {
    enum class Kind { kStored, kRemoved, kCleared, kUnknown } kind = Kind::kUnknown;
    std::string_view tag;
    // RFC #1527: event_type wins over the legacy `type` alias.
    if (f.event_type) {
      tag = *f.event_type;
    } else if (f.type) {
      tag = *f.type;
    } else {
      return Fail(StatusCode::kMalformed, "type", "missing (neither event_type nor type)");
    }
    if (Eq(tag, "stored") || Eq(tag, "BlockStored")) {
      kind = Kind::kStored;
    } else if (Eq(tag, "removed") || Eq(tag, "BlockRemoved")) {
      kind = Kind::kRemoved;
    } else if (Eq(tag, "cleared") || Eq(tag, "AllBlocksCleared")) {
      kind = Kind::kCleared;
    }
    if (kind == Kind::kUnknown) {
      return Fail(StatusCode::kUnsupported, f.event_type ? "event_type" : "type",
                  "unknown event '" + std::string(tag) + "'");
    }
    if (!rfc && kind == Kind::kCleared) {
      out.push_back(AllCleared{});
      return true;
    }
    const bool has_hashes = f.has_seq_hashes || f.has_block_hashes;
    std::vector<EngineHash>& hashes = f.has_seq_hashes ? f.seq_hashes : f.block_hashes;
    if (kind != Kind::kCleared && !has_hashes) {
      return Fail(StatusCode::kMalformed, "block_hashes", "missing");
    }
    // vLLM and SGLang always send block_size; only RFC #1527 events may leave it out.
    if (kind == Kind::kStored && !rfc && !f.block_size) {
      return Fail(StatusCode::kMalformed, "block_size", "missing");
    }
    // The event is built in its slot; scope and wire fields move straight from the map's fields.
    EventScopeFields* scope;
    WireDetails* wire;
    BlockStored* stored = nullptr;
    if (kind == Kind::kStored) {
      stored = &out.Next<BlockStored>();
      stored->block_hashes = std::move(hashes);
      stored->parent = f.parent_hash ? f.parent_hash : f.parent_block_hash;
      stored->token_ids = std::move(f.token_ids);
      stored->tier = std::move(f.tier);
      scope = &stored->scope;
      wire = &stored->wire;
    } else if (kind == Kind::kRemoved) {
      BlockRemoved& ev = out.Next<BlockRemoved>();
      ev.block_hashes = std::move(hashes);
      ev.tier = std::move(f.tier);
      scope = &ev.scope;
      wire = &ev.wire;
    } else {
      AllCleared& ev = out.Next<AllCleared>();
      ev.tier = std::move(f.tier);
      scope = &ev.scope;
      wire = &ev.wire;
    }
    if (rfc) {
      scope->model = std::move(f.model);
      scope->tenant = std::move(f.tenant);
      scope->salt = std::move(f.salt);
      scope->lora_name = std::move(f.lora_name);
      scope->block_size = f.block_size;
      scope->group = f.group_id;
      scope->dp_rank = f.dp_rank;
      wire->event_id = f.event_id;
      wire->timestamp_ms = f.timestamp;
      wire->backend_id = std::move(f.backend_id);
      wire->base_block_idx = f.base_block_idx;
      wire->object_key = std::move(f.object_key);
      f.extra = ExtraKeys{};
    } else if (kind == Kind::kRemoved) {
      scope->group = f.group_idx;
      wire->locality = std::move(f.locality);
      wire->ownership = std::move(f.ownership);
    } else {
      scope->salt = std::move(f.meta_salt);
      scope->lora_name = std::move(f.lora_name);
      scope->lora_id = f.lora_id;
      scope->block_size = f.block_size;
      scope->group = f.group_idx;
      wire->spec_kind = std::move(f.spec_kind);
      wire->sliding_window = f.sliding_window;
      wire->locality = std::move(f.locality);
      wire->ownership = std::move(f.ownership);
      wire->session_id = f.session_id ? std::move(f.session_id) : std::move(f.meta_session);
    }
    wire->tier_spelling = std::move(f.tier_spelling);
    if (stored != nullptr) ResolveExtraKeys(f.extra, *stored);
    return true;
  }

  // ---- one event ----

  bool DecodeEvent(EventSlots& out) {
    event_family_ = Family::kNeutral;
    const Type t = r_.PeekType();
    if (t == Type::kMap) return DecodeMapEvent(out);
    uint32_t n;
    if (!r_.ReadArray(n)) return TypeFail("event", "array or map");
    if (n == 0) return Fail(StatusCode::kMalformed, "event", "empty array (no tag)");
    std::string_view tag;
    if (!r_.ReadStr(tag)) return TypeFail("tag", "str");
    if (Eq(tag, "BlockStored") || Eq(tag, "BlockRemoved")) {
      event_family_ = Family::kEngine;
      return Eq(tag, "BlockStored") ? DecodeStoredArray(n, out) : DecodeRemovedArray(n, out);
    }
    if (Eq(tag, "AllBlocksCleared") || Eq(tag, "RemoveAllEvent")) {
      if (tag[0] == 'R') flags_.any_seed_event = true;
      for (uint32_t i = 1; i < n; ++i) {
        if (!Skip(tag, kEventLevel)) return false;
      }
      out.push_back(AllCleared{});
      return true;
    }
    if (Eq(tag, "BlockUpdateEvent")) {
      flags_.any_seed_event = true;
      event_family_ = Family::kSeed;
      return DecodeStoreUpdateArray(n, out);
    }
    if (Eq(tag, "BlockStoreEvent")) {
      flags_.any_seed_event = true;
      event_family_ = Family::kSeed;
      return DecodeBlockStoreArray(n, out);
    }
    return Fail(StatusCode::kUnsupported, "tag", "unknown event '" + std::string(tag) + "'");
  }

  // Decodes the events array into `batch` (over the events it already holds, see EventSlots);
  // false only when the envelope is unusable (the failure is then set).
  bool DecodeEvents(EventBatch& batch) {
    batch.errors.clear();
    EventSlots out(batch.events);
    uint32_t n;
    if (r_.PeekType() == Type::kArray) {
      const uint8_t* p = r_.position();
      if (!r_.ReadArray(n)) {
        // Check the limit before the length, so a huge count says so.
        Reader copy = r_;
        (void)copy;
        uint32_t announced = 0;
        if (*p == 0xdd && r_.remaining() >= 5) announced = Reader::Be32(p + 1);
        if (announced > kMaxEventsPerBatch) {
          return Fail(StatusCode::kLimitExceeded, "events",
                      std::to_string(announced) + " events exceed the limit of " +
                          std::to_string(kMaxEventsPerBatch));
        }
        return TypeFail("events", "array");
      }
    } else {
      return TypeFail("events", "array");
    }
    if (n > kMaxEventsPerBatch) {
      return Fail(StatusCode::kLimitExceeded, "events",
                  std::to_string(n) + " events exceed the limit of " +
                      std::to_string(kMaxEventsPerBatch));
    }
    // An event struct is far larger than its smallest encoding (1 byte), so reserve only what
    // the remaining bytes could plausibly hold rather than trusting the announced count.
    out.Reserve(std::min<size_t>(n, r_.remaining() / 16 + 1));
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* start = r_.position();
      const size_t start_offset = r_.offset();
      const size_t before = out.size();
      if (DecodeEvent(out)) {
        flags_.any_engine_event |= event_family_ == Family::kEngine;
        if (event_family_ == Family::kNeutral || event_family_ == family_) continue;
        if (family_ == Family::kNeutral) {
          family_ = event_family_;
          continue;
        }
        out.Truncate(before);
        batch.errors.push_back(EventError{
            i, Status::Unsupported("event " + std::to_string(i) + " (byte " +
                                   std::to_string(start_offset) + "): a " +
                                   FamilyName(event_family_) + " event in a " +
                                   FamilyName(family_) + " batch")});
        continue;
      }
      // This event alone fails: record it, then find the next one.
      out.Truncate(before);
      batch.errors.push_back(EventError{
          i, Status(fail_code_, "event " + std::to_string(i) + " (byte " +
                                    std::to_string(fail_offset_) + "): " + fail_message_)});
      r_.set_position(start);
      if (!Skip("event " + std::to_string(i), 2)) {
        // The event's extent is unknown, so the batch cannot go on.
        batch.errors.pop_back();
        return false;
      }
    }
    return true;
  }

 private:
  Reader& r_;
  Flags& flags_;
  Family family_ = Family::kNeutral;        // of the batch: its first non-neutral event's
  Family event_family_ = Family::kNeutral;  // of the event just decoded
  StatusCode fail_code_ = StatusCode::kOk;
  size_t fail_offset_ = 0;
  std::string fail_message_;
  ExtraKeys extra_;                        // DecodeStoredArray's scratch
  std::optional<std::string> meta_salt_;  // DecodeStoredArray's scratch
};

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

namespace codec_internal {

bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch) {
  return FastVllmDecoder(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())
      .Decode(batch);
}

}  // namespace codec_internal

namespace {

Status EnvelopeError(const Decoder& d) {
  return Status(d.fail_code(), "batch (byte " + std::to_string(d.fail_offset()) +
                                   "): " + d.fail_message());
}

// Reads the batch timestamp: float seconds (vLLM, SGLang, seed era) or integer milliseconds
// (Mooncake RFC #1527).
bool ReadTs(Reader& r, Decoder& d, Flags& flags, double& ts) {
  const Type t = r.PeekType();
  if (t == Type::kFloat) {
    const uint8_t* p = r.position();
    if (!r.ReadFloat(ts)) return d.TypeFail("ts", "float");
    if (!std::isfinite(ts)) {
      r.set_position(p);
      return d.Fail(StatusCode::kMalformed, "ts", "not a finite number");
    }
    return true;
  }
  if (t == Type::kUint || t == Type::kNegInt) {
    const uint8_t* p = r.position();
    int64_t ms;
    if (!d.ReadI64("ts", ms)) return false;
    // Milliseconds within ±2^48 (8,900 years) convert to seconds and back exactly.
    if (ms > (int64_t{1} << 48) || ms < -(int64_t{1} << 48)) {
      r.set_position(p);
      return d.Fail(StatusCode::kMalformed, "ts", "timestamp_ms " + std::to_string(ms) +
                                                      " out of range");
    }
    flags.ts_int = true;
    ts = static_cast<double>(ms) / 1000.0;
    return true;
  }
  return d.TypeFail("ts", "float seconds or int milliseconds");
}

bool DecodeArrayBatch(Reader& r, Decoder& d, Flags& flags, EventBatch& batch) {
  uint32_t n;
  const uint8_t* start = r.position();
  if (!r.ReadArray(n)) return d.TypeFail("batch", "array");
  flags.batch_len = n;
  if (n < 2) {
    r.set_position(start);
    return d.Fail(StatusCode::kMalformed, "batch",
                  "expected [ts, events(, dp_rank)], got an array of " + std::to_string(n));
  }
  if (!ReadTs(r, d, flags, batch.ts)) return false;
  if (!d.DecodeEvents(batch)) return false;
  if (n >= 3 && !d.ReadRank("dp_rank", batch.dp_rank)) return false;
  for (uint32_t i = 3; i < n; ++i) {
    if (!d.Skip("batch", kBatchLevel)) return false;
  }
  return true;
}

bool DecodeMapBatch(Reader& r, Decoder& d, Flags& flags, EventBatch& batch) {
  uint32_t n;
  if (!r.ReadMap(n)) return d.TypeFail("batch", "map");
  flags.map_batch = true;
  bool has_ts = false, has_events = false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    if (!r.ReadStr(key)) {
      if (!d.Skip("batch key", kBatchLevel) || !d.Skip("batch", kBatchLevel)) return false;
      continue;
    }
    if (Eq(key, "ts")) {
      if (!ReadTs(r, d, flags, batch.ts)) return false;
      has_ts = true;
    } else if (Eq(key, "events")) {
      if (!d.DecodeEvents(batch)) return false;
      has_events = true;
    } else if (Eq(key, "data_parallel_rank") || Eq(key, "attn_dp_rank") || Eq(key, "dp_rank")) {
      if (!d.ReadRank(key, batch.dp_rank)) return false;
    } else if (!d.Skip(key, kBatchLevel)) {
      return false;
    }
  }
  if (!has_ts) return d.Fail(StatusCode::kMalformed, "batch", "map without ts");
  if (!has_events) return d.Fail(StatusCode::kMalformed, "batch", "map without events");
  return true;
}

// Picks the format whose encoder reproduces the batch: the message's era first (narrowed by the
// hint), then the wider formats of the same family.
WireFormat PickFormat(const EventBatch& batch, const Flags& flags, FormatHint hint) {
  std::vector<WireFormat> order;
  const bool sglang_like = flags.negative_hash || flags.sglang_metadata;
  std::vector<WireFormat> positional;
  if (hint == FormatHint::kSglang || (hint != FormatHint::kVllm && sglang_like)) {
    positional = {WireFormat::kSglang, WireFormat::kVllmV09, WireFormat::kVllm};
  } else if (flags.batch_len == 2 && !flags.map_batch) {
    positional = {WireFormat::kVllmV09, WireFormat::kSglang, WireFormat::kVllm};
  } else {
    positional = {WireFormat::kVllm, WireFormat::kSglang, WireFormat::kVllmV09};
  }
  if (flags.any_seed_event) order.push_back(WireFormat::kMooncakeSeed);
  if (flags.any_rfc_event ||
      ((flags.ts_int || hint == FormatHint::kMooncake) && !flags.any_engine_event)) {
    order.push_back(WireFormat::kMooncake);
  }
  if (flags.any_map_event) order.push_back(WireFormat::kVllmMap);
  order.insert(order.end(), positional.begin(), positional.end());
  order.push_back(WireFormat::kVllmMap);
  order.push_back(WireFormat::kMooncake);
  order.push_back(WireFormat::kMooncakeSeed);
  for (WireFormat f : order) {
    if (CheckEncodable(batch, f).ok()) return f;
  }
  return order.front();
}

}  // namespace

Status DecodeEventBatchInto(std::span<const std::byte> payload, EventBatch& batch,
                            FormatHint hint, WireFormat* detected) {
  if (payload.size() > kMaxPayloadBytes) {
    return Status::LimitExceeded("batch: payload of " + std::to_string(payload.size()) +
                                 " bytes exceeds the limit of " +
                                 std::to_string(kMaxPayloadBytes));
  }
  if (payload.empty()) return Status::Malformed("batch (byte 0): empty payload");
  // The fast path has no format flags to give (PickFormat), so only when none are asked for.
  if (detected == nullptr && codec_internal::DecodeVllmFast(payload, batch)) return Status::Ok();
  Reader r(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  Flags flags;
  Decoder d(r, flags);
  batch.ts = 0;
  batch.dp_rank.reset();
  batch.errors.clear();
  const Type t = r.PeekType();
  bool ok;
  if (t == Type::kArray) {
    ok = DecodeArrayBatch(r, d, flags, batch);
  } else if (t == Type::kMap) {
    ok = DecodeMapBatch(r, d, flags, batch);
  } else {
    ok = d.TypeFail("batch", "array or map");
  }
  if (!ok) return EnvelopeError(d);
  if (!r.at_end()) {
    return Status::Malformed("batch (byte " + std::to_string(r.offset()) + "): " +
                             std::to_string(r.remaining()) + " trailing bytes after the batch");
  }
  if (detected != nullptr) *detected = PickFormat(batch, flags, hint);
  return Status::Ok();
}

Result<EventBatch> DecodeEventBatch(std::span<const std::byte> payload, FormatHint hint,
                                    WireFormat* detected) {
  EventBatch batch;
  KVINDEX_RETURN_IF_ERROR(DecodeEventBatchInto(payload, batch, hint, detected));
  return batch;
}

}  // namespace kvindex
