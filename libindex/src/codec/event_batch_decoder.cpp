// The envelope of a payload: the batch array [ts, events(, dp_rank)] or map {ts, events, rank},
// the batch timestamp (float seconds or Mooncake RFC integer milliseconds), the events array with
// its per-event failures and the one-family rule, the pick of the detected format, and
// DecodeEventBatch itself, which tries the fast vLLM path first (vllm_fast_decoder.h). Each event
// is read by its era's file (decoder.h lists them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

#include "decoder.h"
#include "event_slots.h"
#include "token_reader.h"
#include "vllm_fast_decoder.h"

namespace kvindex {
namespace codec_internal {
namespace {

const char* FamilyName(Family f) {
  switch (f) {
    case Family::kEngine:
      return "vLLM/SGLang";
    case Family::kRfc:
      return "Mooncake RFC #1527";
    case Family::kSeed:
      return "Mooncake seed";
    case Family::kNeutral:
      break;
  }
  return "neutral";
}

}  // namespace

bool Decoder::DecodeEvent(EventSlots& out) {
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

bool Decoder::DecodeEvents(EventBatch& batch) {
  batch.errors.clear();
  EventSlots out(batch.events);
  uint32_t n;
  if (r_.PeekType() == Type::kArray) {
    if (!r_.ReadArray(n)) {
      // Check the limit before the length, so a huge count says so.
      uint32_t announced = 0;
      if (r_.PeekCount(announced) && announced > kMaxEventsPerBatch) {
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
    return Fail(
        StatusCode::kLimitExceeded, "events",
        std::to_string(n) + " events exceed the limit of " + std::to_string(kMaxEventsPerBatch));
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
          i, Status::Unsupported(
                 "event " + std::to_string(i) + " (byte " + std::to_string(start_offset) + "): a " +
                 FamilyName(event_family_) + " event in a " + FamilyName(family_) + " batch")});
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

}  // namespace codec_internal

namespace {

using codec_internal::Decoder;
using codec_internal::Eq;
using codec_internal::Flags;
using codec_internal::kBatchLevel;
using codec_internal::TokenReader;
using codec_internal::Type;

Status EnvelopeError(const Decoder& d) {
  return Status(d.fail_code(),
                "batch (byte " + std::to_string(d.fail_offset()) + "): " + d.fail_message());
}

// Reads the batch timestamp: float seconds (vLLM, SGLang, seed era) or integer milliseconds
// (Mooncake RFC #1527).
bool ReadTs(TokenReader& r, Decoder& d, Flags& flags, double& ts) {
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
    int64_t ms = 0;  // (set by ReadI64; the 0 quiets GCC's maybe-uninitialized)
    if (!d.ReadI64("ts", ms)) return false;
    // Milliseconds within ±2^48 (8,900 years) convert to seconds and back exactly.
    if (ms > (int64_t{1} << 48) || ms < -(int64_t{1} << 48)) {
      r.set_position(p);
      return d.Fail(StatusCode::kMalformed, "ts",
                    "timestamp_ms " + std::to_string(ms) + " out of range");
    }
    flags.ts_int = true;
    ts = static_cast<double>(ms) / 1000.0;
    return true;
  }
  return d.TypeFail("ts", "float seconds or int milliseconds");
}

bool DecodeArrayBatch(TokenReader& r, Decoder& d, Flags& flags, EventBatch& batch) {
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

bool DecodeMapBatch(TokenReader& r, Decoder& d, Flags& flags, EventBatch& batch) {
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
  const bool sglang_hint = hint == FormatHint::kSglang || hint == FormatHint::kSglangEagle;
  const bool vllm_hint = hint == FormatHint::kVllm || hint == FormatHint::kTrtllm;
  if (sglang_hint || (!vllm_hint && sglang_like)) {
    positional = {WireFormat::kSglang, WireFormat::kVllmV09, WireFormat::kVllm};
  } else if (flags.batch_len == 2 && !flags.map_batch) {
    positional = {WireFormat::kVllmV09, WireFormat::kSglang, WireFormat::kVllm};
  } else {
    positional = {WireFormat::kVllm, WireFormat::kSglang, WireFormat::kVllmV09};
  }
  // EAGLE pairs: SGLang's positional era, or its map era (which vllm-map writes).
  if (flags.bigram_tokens) {
    order.push_back(flags.any_map_event ? WireFormat::kVllmMap : WireFormat::kSglangEagle);
  }
  // TensorRT-LLM writes tagged maps with signed hashes; only its hint tells them from vLLM's.
  if (hint == FormatHint::kTrtllm && flags.any_map_event) order.push_back(WireFormat::kTrtllm);
  if (flags.any_seed_event) order.push_back(WireFormat::kMooncakeSeed);
  if (flags.any_rfc_event ||
      ((flags.ts_int || hint == FormatHint::kMooncake) && !flags.any_engine_event)) {
    order.push_back(WireFormat::kMooncake);
  }
  if (flags.any_map_event) order.push_back(WireFormat::kVllmMap);
  // Only TensorRT-LLM's maps carry mm_keys, whatever the hint.
  if (flags.any_map_event) order.push_back(WireFormat::kTrtllm);
  order.insert(order.end(), positional.begin(), positional.end());
  order.push_back(WireFormat::kVllmMap);
  order.push_back(WireFormat::kMooncake);
  order.push_back(WireFormat::kMooncakeSeed);
  for (WireFormat f : order) {
    if (CheckEncodable(batch, f).ok()) return f;
  }
  return order.front();
}

Status DecodeChecked(std::span<const std::byte> payload, EventBatch& batch, FormatHint hint,
                     WireFormat* detected) {
  if (payload.size() > kMaxPayloadBytes) {
    return Status::LimitExceeded("batch: payload of " + std::to_string(payload.size()) +
                                 " bytes exceeds the limit of " + std::to_string(kMaxPayloadBytes));
  }
  if (payload.empty()) return Status::Malformed("batch (byte 0): empty payload");
  // The fast path has no format flags to give (PickFormat), so only when none are asked for.
  if (detected == nullptr && codec_internal::DecodeVllmFast(payload, batch)) return Status::Ok();
  TokenReader r(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
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

}  // namespace

Status DecodeEventBatchInto(std::span<const std::byte> payload, EventBatch& batch, FormatHint hint,
                            WireFormat* detected) {
  // msgpack-cxx may throw (and so may allocation); no exception leaves the codec.
  try {
    return DecodeChecked(payload, batch, hint, detected);
  } catch (const std::bad_alloc&) {
    return Status::LimitExceeded("batch: out of memory while decoding");
  } catch (const std::exception& e) {
    return Status::Malformed(std::string("batch: ") + e.what());
  }
}

Result<EventBatch> DecodeEventBatch(std::span<const std::byte> payload, FormatHint hint,
                                    WireFormat* detected) {
  EventBatch batch;
  KVINDEX_RETURN_IF_ERROR(DecodeEventBatchInto(payload, batch, hint, detected));
  return batch;
}

}  // namespace kvindex
