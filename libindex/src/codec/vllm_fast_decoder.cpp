#include "vllm_fast_decoder.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

// (unpack.hpp first: parse.hpp uses its loaders.)
#include <msgpack/null_visitor.hpp>
#include <msgpack/parse.hpp>
#include <msgpack/unpack.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/event.h"

#include "event_slots.h"

namespace kvindex::codec_internal {
namespace {

// The common vLLM positional batch, decoded in one msgpack-cxx parse of the whole payload by a
// visitor that fills the batch as the values go by (the general decoder starts one parse per
// value). It takes only this shape:
//   [ts float, [event, ...], dp_rank (nil or uint)?] where each event is
//   ["BlockStored", hashes, parent (nil or uint), tokens, block_size, nil lora_id, (medium,
//    nil lora_name, nil extra_keys, group_idx (nil or uint), nil spec_kind, nil sliding_window)]
//   or ["BlockRemoved", hashes, (medium, group_idx)], with unsigned-int hashes and token ids and a
//   nil, "GPU" or "CPU" medium.
// The visitor stops the parse at the first value outside that shape, and DecodeEventBatchInto()
// then decodes the payload with the general decoder from the start, so it only ever produces what
// the general decoder produces (event_codec_test "fast path" decodes every test payload both ways).
//
// Levels: 1 inside the batch array, 2 inside the events array, 3 inside an event, 4 inside its
// hashes or token ids.
class FastVllmVisitor : public msgpack::null_visitor {
 public:
  FastVllmVisitor(EventSlots& out, size_t payload_size) : out_(out), payload_size_(payload_size) {}

  double ts() const { return ts_; }
  const std::optional<DpRank>& rank() const { return rank_; }

  void init() {}

  bool visit_positive_integer(uint64_t v) {
    if (level_ == 4) {
      if (tokens_ != nullptr) {
        if (v > UINT32_MAX) return false;
        tokens_->push_back(static_cast<TokenId>(v));
      } else {
        hashes_->push_back(EngineHash{v});
      }
      return true;
    }
    if (level_ == 3) {
      const uint32_t i = index_[2];
      if (stored_ != nullptr) {
        if (i == 2) {
          stored_->parent = EngineHash{v};
          return true;
        }
        if (v > UINT32_MAX) return false;
        if (i == 4) {
          stored_->scope.block_size = static_cast<uint32_t>(v);
          return true;
        }
        if (i == 9) {
          stored_->scope.group = static_cast<uint32_t>(v);
          return true;
        }
        return false;
      }
      if (removed_ != nullptr && i == 3 && v <= UINT32_MAX) {
        removed_->scope.group = static_cast<uint32_t>(v);
        return true;
      }
      return false;
    }
    if (level_ == 1 && index_[0] == 2 && v <= static_cast<uint64_t>(INT32_MAX)) {
      rank_ = static_cast<DpRank>(v);
      return true;
    }
    return false;
  }

  bool visit_nil() {
    if (level_ == 3) {
      const uint32_t i = index_[2];
      // Every optional field may be nil except block_size; the tag and hashes are not scalars.
      if (stored_ != nullptr) return i >= 2 && i != 3 && i != 4;
      return removed_ != nullptr && i >= 2;
    }
    return level_ == 1 && index_[0] == 2;  // dp_rank
  }

  bool visit_float32(float v) { return visit_float64(v); }
  bool visit_float64(double v) {
    if (level_ != 1 || index_[0] != 0 || !std::isfinite(v)) return false;
    ts_ = v;
    return true;
  }

  bool visit_str(const char* v, uint32_t size) {
    if (level_ != 3) return false;
    const std::string_view s(v, size);
    const uint32_t i = index_[2];
    if (i == 0) return Tag(s);
    if ((stored_ != nullptr && i == 6) || (removed_ != nullptr && i == 2)) {
      std::optional<Tier>& tier = stored_ != nullptr ? stored_->tier : removed_->tier;
      if (s == "GPU") {
        tier.emplace();  // GPU
      } else if (s == "CPU") {
        tier = Tier::Cpu();
      } else {
        return false;
      }
      return true;
    }
    return false;
  }

  bool start_array(uint32_t n) {
    switch (level_) {
      case 0:
        if (n != 2 && n != 3) return false;
        break;
      case 1:
        if (index_[0] != 1) return false;  // only the events are an array
        out_.Reserve(std::min<size_t>(n, payload_size_ / 16 + 1));
        break;
      case 2:  // an event; its tag decides which lengths it may have
        event_len_ = n;
        stored_ = nullptr;
        removed_ = nullptr;
        break;
      case 3:
        if (!StartList(n)) return false;
        break;
      default:
        return false;
    }
    index_[level_] = 0;
    ++level_;
    return true;
  }
  bool end_array_item() {
    ++index_[level_ - 1];
    return true;
  }
  bool end_array() {
    --level_;
    if (level_ == 3) {
      tokens_ = nullptr;
      hashes_ = nullptr;
    } else if (level_ == 2) {
      // An event array without its tag never reached Tag() (an empty array).
      return stored_ != nullptr || removed_ != nullptr;
    }
    return true;
  }
  // Nothing else belongs to the shape (null_visitor would accept these).
  bool start_map(uint32_t /*n*/) { return false; }
  bool visit_boolean(bool /*v*/) { return false; }
  bool visit_negative_integer(int64_t /*v*/) { return false; }
  bool visit_bin(const char* /*v*/, uint32_t /*size*/) { return false; }
  bool visit_ext(const char* /*v*/, uint32_t /*size*/) { return false; }

 private:
  bool Tag(std::string_view tag) {
    if (tag == "BlockStored" && event_len_ >= 6 && event_len_ <= 12) {
      stored_ = &out_.Next<BlockStored>();
      return true;
    }
    if (tag == "BlockRemoved" && event_len_ >= 2 && event_len_ <= 4) {
      removed_ = &out_.Next<BlockRemoved>();
      return true;
    }
    return false;
  }

  // The hashes or token ids of an event. A count is bounded by the payload's size (each element
  // takes a byte) before anything is reserved.
  bool StartList(uint32_t n) {
    const uint32_t i = index_[2];
    if (n > payload_size_) return false;
    if (i == 1 && (stored_ != nullptr || removed_ != nullptr)) {
      hashes_ = stored_ != nullptr ? &stored_->block_hashes : &removed_->block_hashes;
      hashes_->reserve(n);
      return true;
    }
    if (i == 3 && stored_ != nullptr && n <= kMaxTokensPerEvent) {
      tokens_ = &stored_->token_ids;
      tokens_->reserve(n);
      return true;
    }
    return false;
  }

  EventSlots& out_;
  const size_t payload_size_;
  int level_ = 0;
  uint32_t index_[4] = {0, 0, 0, 0};  // the item being read at each level
  uint32_t event_len_ = 0;
  BlockStored* stored_ = nullptr;  // the event being read (one of the two)
  BlockRemoved* removed_ = nullptr;
  std::vector<TokenId>* tokens_ = nullptr;  // the list being read (one of the two)
  std::vector<EngineHash>* hashes_ = nullptr;
  double ts_ = 0;
  std::optional<DpRank> rank_;
};

}  // namespace

bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch) {
  batch.errors.clear();
  double ts;
  std::optional<DpRank> rank;
  {
    EventSlots out(batch.events);
    FastVllmVisitor visitor(out, payload.size());
    size_t off = 0;
    // True only for one whole value that ends where the payload does.
    if (!msgpack::parse(reinterpret_cast<const char*>(payload.data()), payload.size(), off,
                        visitor) ||
        off != payload.size()) {
      return false;
    }
    ts = visitor.ts();
    rank = visitor.rank();
  }
  batch.ts = ts;
  batch.dp_rank = rank;
  return true;
}

}  // namespace kvindex::codec_internal
