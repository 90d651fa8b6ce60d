// EncodeEventBatch: EventBatch -> the bytes each publisher writes (event_codec.h). This file writes
// the batch envelope of each format; the events are written by the era files (event_writer.h).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

#include "event_writer.h"

namespace kvindex {
namespace {

using codec_internal::CountSeedEvents;
using codec_internal::WriteMooncakeEvent;
using codec_internal::WriteOptInt;
using codec_internal::WriteSeedEvent;
using codec_internal::WriteSglangEvent;
using codec_internal::WriteVllmArrayEvent;
using codec_internal::WriteVllmMapEvent;
using codec_internal::Writer;

// True when ts is a whole number of milliseconds within ±2^48 ms (exact through int ms).
bool WholeMilliseconds(double ts) {
  const double ms = ts * 1000.0;
  return std::fabs(ms) <= static_cast<double>(int64_t{1} << 48) &&
         static_cast<double>(std::llround(ms)) / 1000.0 == ts;
}

size_t EstimateSize(const EventBatch& batch) {
  size_t bytes = 32;
  for (const Event& e : batch.events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      bytes += 160 + 9 * s->block_hashes.size() + 5 * s->token_ids.size();
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      bytes += 160 + 9 * r->block_hashes.size();
    } else {
      bytes += 160;
    }
  }
  return bytes;
}

Status EncodeChecked(const EventBatch& batch, WireFormat format, std::vector<std::byte>& out) {
  KVINDEX_RETURN_IF_ERROR(CheckEncodable(batch, format));
  out.clear();
  Writer w(out);
  w.Reserve(EstimateSize(batch));
  switch (format) {
    case WireFormat::kVllmV09:
    case WireFormat::kVllm:
    case WireFormat::kVllmMap:
    case WireFormat::kTrtllm:
    case WireFormat::kLmcache: {
      const bool v09 = format == WireFormat::kVllmV09;
      w.Array(v09 ? 2 : 3);
      w.Float64(batch.ts);
      w.Array(batch.events.size());
      for (const Event& e : batch.events) {
        if (format == WireFormat::kVllmMap || format == WireFormat::kTrtllm) {
          WriteVllmMapEvent(w, e, format == WireFormat::kTrtllm);
        } else {
          WriteVllmArrayEvent(w, e, v09);
        }
      }
      if (!v09) WriteOptInt(w, batch.dp_rank);
      break;
    }
    case WireFormat::kSglang:
    case WireFormat::kSglangEagle:
      w.Array(batch.dp_rank ? 3 : 2);
      w.Float64(batch.ts);
      w.Array(batch.events.size());
      for (const Event& e : batch.events) WriteSglangEvent(w, e);
      if (batch.dp_rank) w.Int(*batch.dp_rank);
      break;
    case WireFormat::kMooncake:
      w.Array(3);
      if (WholeMilliseconds(batch.ts)) {
        w.Int(std::llround(batch.ts * 1000.0));
      } else {  // kept exact as float64 seconds, the engines' envelope (the decoder takes both)
        w.Float64(batch.ts);
      }
      w.Array(batch.events.size());
      for (const Event& e : batch.events) WriteMooncakeEvent(w, e);
      WriteOptInt(w, batch.dp_rank);
      break;
    case WireFormat::kMooncakeSeed:
      // The seed batch has no rank; a rank, when set, goes in a third element (kvindex's choice,
      // as every engine envelope does).
      w.Array(batch.dp_rank ? 3 : 2);
      w.Float64(batch.ts);
      w.Array(CountSeedEvents(batch));
      for (size_t i = 0; i < batch.events.size();) i += WriteSeedEvent(w, batch, i);
      if (batch.dp_rank) w.Int(*batch.dp_rank);
      break;
  }
  w.Finish();
  return Status::Ok();
}

}  // namespace

Status EncodeEventBatch(const EventBatch& batch, WireFormat format, std::vector<std::byte>& out) {
  // Growing the output may throw (msgpack::packer itself does not); no exception leaves the
  // codec.
  try {
    return EncodeChecked(batch, format, out);
  } catch (const std::bad_alloc&) {
    return Status::LimitExceeded("encode: out of memory");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("encode: ") + e.what());
  }
}

}  // namespace kvindex
