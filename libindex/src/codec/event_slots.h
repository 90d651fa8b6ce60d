// EventSlots: the events of the batch being decoded, written over the events a reused EventBatch
// already holds, so that a steady stream of similar batches decodes without allocating
// (DecodeEventBatchInto). Both the general decoder (decoder.h) and the fast vLLM path
// (vllm_fast_decoder.cpp) fill a batch through it.
//
// Thread safety: one EventSlots per decode call; it borrows the events vector for its whole life
// and gives it its final size when destroyed.
#ifndef KVINDEX_SRC_CODEC_EVENT_SLOTS_H_
#define KVINDEX_SRC_CODEC_EVENT_SLOTS_H_

#include <algorithm>
#include <cstddef>
#include <utility>
#include <variant>
#include <vector>

#include "kvindex/core/event.h"

namespace kvindex::codec_internal {

// The events of the batch being decoded, written over the events a reused batch already holds:
// a slot that holds an event of the wanted kind is emptied in place, so its vectors keep their
// capacity and a steady stream of similar batches decodes without allocating
// (DecodeEventBatchInto).
class EventSlots {
 public:
  explicit EventSlots(std::vector<Event>& events) : events_(events) {}
  // (used_ never exceeds the size; the check skips resize()'s out-of-line call when a reused
  // batch keeps its event count, the steady state.)
  ~EventSlots() {
    if (used_ != events_.size()) events_.resize(used_);
  }
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
  static_assert(sizeof(void*) != 8 || sizeof(WireDetails) == 384,
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
    w.eagle_next.reset();
    w.skipped_context = false;
    w.run_parent.reset();
    w.extra_keys_sent = false;
    w.mm_keys = false;
  }
  static void Empty(BlockStored& e) {
    e.block_hashes.clear();
    e.parent.reset();
    e.token_ids.clear();
    e.tier.reset();
    Empty(e.scope);
    e.multimodal.clear();
    e.standard_hashes = false;
    e.block_offsets.clear();
    e.skipped_multimodal.clear();
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

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_EVENT_SLOTS_H_
