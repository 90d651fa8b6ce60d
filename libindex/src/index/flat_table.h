// FlatTable: a small open-addressing hash table (linear probing, capacity growing by 1.5x, maximum
// load 4/5, backward-shift deletion: no tombstones) over caller-defined slots. Private to libindex.
//
// Probe runs never wrap around: homes lie in [0, capacity) and the slot array has a tail of
// kTail slots beyond it (appended to, one slot at a time, in the rare case a run reaches its
// end). So a probe step is i + 1 and an erase moves a later member back when its home is at or
// before the hole, with no modular distances (3.5% fewer instructions in BM_PrefixIndex_Apply;
// docs/benchmarks.md "Index").
//
// Why not std::unordered_map: one node allocation per entry (about 40 bytes of heap and a cache
// miss per lookup); the index needs ~10 M inserts/s and <= 64 bytes per presence (docs/
// architecture.md "Index memory layout"). A Traits type supplies:
//   static bool Empty(const Slot&);        static Slot MakeEmpty();
//   static uint64_t Hash(const Slot&);     // the hash the slot was inserted with (for rehash)
// The home bucket depends only on the high 32 bits of the hash, so a slot may keep just those.
//
// Growing into fresh memory costs the writer more than the rehash itself: the kernel (and, on a
// virtual machine, the hypervisor) must back every new page, 1.3-2.3 ms per MiB on the 2-vCPU
// test VM against about 0.1 ms to fill memory already backed (docs/architecture.md "Index
// concurrency"). So a table whose next slot array is large (at least set_prepare_min_bytes(), 4 MiB
// by default) builds that array, filled with empty slots, on a helper thread once its load
// reaches 0.77, and grows at 0.8 into it; the writer then only places the slots. A growth that
// comes before the helper is done waits for it (no worse than building the array itself). The
// later the start, the shorter the time the next array's memory is held beside the table's;
// 0.77 leaves the helper about 4% of the table's size in inserts (tens of ms at 3 M inserts/s).
// A large table's slots are then placed by two threads (Rehash()).
//
// Thread safety: none; PrefixIndex guards it with its reader-writer lock. The helper thread
// touches only the array it builds, which the table takes over through a std::future.
#ifndef KVINDEX_SRC_FLAT_TABLE_H_
#define KVINDEX_SRC_FLAT_TABLE_H_

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <system_error>
#include <utility>
#include <vector>

namespace kvindex::internal {

// A 64-bit finaliser (from MurmurHash3's fmix64, written from its description).
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Asks the kernel to back the 2 MiB-aligned interior of [p, p + bytes) with transparent huge
// pages (where THP is in "madvise" mode). A lookup in a table of tens of MiB otherwise costs a TLB
// miss besides the cache miss (docs/architecture.md "Index memory layout"). Advice only: errors
// are ignored.
inline void AdviseHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// Lowers the calling thread's priority (nice 10; on Linux a thread's own) for the index's helper
// threads, so that queries running beside them go first: what a building helper prepares is needed
// only at the next growth, and at live ingest rates there is time to spare. The second placing
// thread of a growth (Rehash()) is lowered too: the writer waits for it then, but holds no lock,
// so only ingest is delayed, not queries (docs/benchmarks-http.md "With the index's helper
// threads"). Advice only: errors are ignored.
inline void LowerHelperPriority() {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
}

template <typename Slot, typename Traits>
class FlatTable {
 public:
  static constexpr size_t kNotFound = static_cast<size_t>(-1);

  static constexpr size_t kTail = 16;

  size_t size() const { return size_; }
  // Slot positions are below capacity() (homes below the nominal capacity, runs into the tail).
  size_t capacity() const { return slots_.size(); }
  // The slot array's bytes and, while one is built ahead, the next one's.
  size_t bytes() const {
    return slots_.capacity() * sizeof(Slot) + prepared_bytes_.load(std::memory_order_relaxed);
  }

  // The home bucket of a hash: its high 32 bits scaled onto the capacity (Lemire's multiply-shift
  // range reduction), so the capacity need not be a power of two and may grow by 1.5x, which keeps
  // the average load near 0.7 instead of 0.5 (docs/architecture.md "Index memory layout").
  size_t Home(uint64_t h) const { return HomeAt(h, cap_); }
  static size_t HomeAt(uint64_t h, size_t cap) {
    return static_cast<size_t>(((h >> 32) * cap) >> 32);
  }

  // Position of the first slot with hash `h` for which `match(slot)` holds, or kNotFound.
  template <typename Match>
  size_t Find(uint64_t h, Match&& match) const {
    if (size_ == 0) return kNotFound;
    const size_t end = slots_.size();
    for (size_t i = Home(h); i < end; ++i) {
      const Slot& s = slots_[i];
      if (Traits::Empty(s)) return kNotFound;
      if (match(s)) return i;
    }
    return kNotFound;
  }

  // One probe for "find, else insert": makes room for one more slot first (so the position stays
  // valid for InsertAt), then returns {position of the match, true} or {the empty slot ending the
  // probe run, false}.
  template <typename Match>
  std::pair<size_t, bool> FindOrSlot(uint64_t h, Match&& match) {
    if (NeedsGrow()) Grow(NextCapacity(cap_));
    const size_t end = slots_.size();
    for (size_t i = Home(h); i < end; ++i) {
      const Slot& s = slots_[i];
      if (Traits::Empty(s)) return {i, false};
      if (match(s)) return {i, true};
    }
    slots_.push_back(Traits::MakeEmpty());  // the run filled the tail: one more slot
    return {end, false};
  }
  // Fills the empty position FindOrSlot() returned (no other insert or erase in between).
  void InsertAt(size_t pos, const Slot& slot) {
    slots_[pos] = slot;
    ++size_;
  }

  void Prefetch(uint64_t h) const {
    if (cap_ != 0) __builtin_prefetch(&slots_[Home(h)]);
  }
  // The home slot and the next cache line: a probe run at load 0.8 often spans two lines.
  void Prefetch2(uint64_t h) const {
    if (cap_ == 0) return;
    const char* p = reinterpret_cast<const char*>(&slots_[Home(h)]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  }

  Slot& at(size_t pos) { return slots_[pos]; }
  const Slot& at(size_t pos) const { return slots_[pos]; }

  // Inserts `slot` (whose hash is `h`); the caller has checked it is absent. Returns its position.
  size_t Insert(uint64_t h, const Slot& slot) {
    if (NeedsGrow()) Grow(NextCapacity(cap_));
    const size_t i = Place(slots_, Home(h), slot);
    ++size_;
    return i;
  }

  // Removes the slot at `pos`, shifting later members of its probe run back (no tombstones).
  // Forced inline: the index's apply path erases once per remove.
  [[gnu::always_inline]] inline void EraseAt(size_t pos) {
    size_t i = pos;
    const size_t end = slots_.size();
    for (size_t j = i + 1; j < end; ++j) {
      if (Traits::Empty(slots_[j])) break;
      // Slot j moves into the hole at i unless its home lies after the hole (runs never wrap, so
      // its home is at most j).
      if (Home(Traits::Hash(slots_[j])) > i) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Traits::MakeEmpty();
    --size_;
  }

  // Growth in two steps, so that the caller can build the bigger table without holding its
  // exclusive lock: NeedsGrow() says the next insert would grow; BuildGrown() is const (it only
  // reads this table, like concurrent readers do) and returns the rehashed slots; Adopt() swaps
  // them in (O(1)) and hands back the old slots for the caller to free later. Valid as long as the
  // table does not change between BuildGrown() and Adopt(). NeedsGrow() also starts building the
  // next slot array on the helper thread when the load reaches 0.77 (see above); only the writer
  // calls it.
  bool NeedsGrow() const { return size_ + 1 > event_at_ && AtEvent(); }
  std::vector<Slot> BuildGrown() const {
    std::vector<Slot> fresh = EmptySlots(NextCapacity(cap_));
    Rehash(slots_, fresh, NextCapacity(cap_));
    return fresh;
  }
  void Adopt(std::vector<Slot>& fresh) {
    fresh.swap(slots_);
    SetCapacity(NextCapacity(cap_));
  }

  // Slot arrays of at least this many bytes are built ahead on the helper thread.
  void set_prepare_min_bytes(size_t bytes) {
    prepare_min_bytes_ = bytes;
    SetCapacity(cap_);
  }
  // Growths from a table of at least this many slots place them on two threads (Rehash()).
  void set_parallel_min_slots(size_t slots) { parallel_min_slots_ = slots; }
  // Where a growth from capacity `old_cap` to `new_cap` split at empty slot `p` (< 2^32) puts the
  // bound between its two threads: the new home of the smallest high-32-bit hash whose old home
  // is p + 1 or more. A hash with an old home above p has a new home at or above it, one with an
  // old home below p a new home at or below it (homes only grow with the hash).
  static size_t SplitBound(size_t p, size_t old_cap, size_t new_cap) {
    const uint64_t t_min = ((uint64_t{p + 1} << 32) + old_cap - 1) / old_cap;
    return std::min<size_t>(static_cast<size_t>((t_min * new_cap) >> 32), new_cap);
  }
  // How many slot arrays were built ahead and then grown into (for tests and benches).
  size_t prepared_growths() const { return prepared_growths_; }

  void Reserve(size_t n) {
    const size_t cap = n + n / 4 + 16;
    if (cap > cap_) Grow(cap);
  }

  // Every slot, empty ones included (a bulk copy).
  const std::vector<Slot>& slots() const { return slots_; }

  // Calls f(slot) for every occupied slot.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (!Traits::Empty(s)) f(s);
    }
  }

 private:
  static size_t NextCapacity(size_t cap) { return cap < 16 ? 16 : cap + cap / 2; }

  void Grow(size_t cap) {
    std::vector<Slot> fresh = EmptySlots(cap);
    Rehash(slots_, fresh, cap);
    fresh.swap(slots_);
    SetCapacity(cap);
  }

  // After a change of capacity: the loads at which to grow (0.8) and, for a large next array, to
  // start building it ahead (0.77).
  void SetCapacity(size_t cap) {
    cap_ = cap;
    grow_at_ = cap * 4 / 5;  // (size + 1) > grow_at_  <=>  (size + 1) * 5 > cap * 4
    const size_t next_bytes = (NextCapacity(cap) + kTail) * sizeof(Slot);
    event_at_ = next_bytes >= prepare_min_bytes_ && !prepared_.valid() ? cap * 77 / 100 : grow_at_;
  }
  // size_ + 1 > event_at_: true when the next insert must grow; otherwise the load has reached
  // 0.77, and the helper starts building the next array.
  [[gnu::noinline]] bool AtEvent() const {
    if (size_ + 1 > grow_at_) return true;
    event_at_ = grow_at_;
    const size_t cap = NextCapacity(cap_);
    try {
      prepared_ = std::async(std::launch::async, [cap] {
        LowerHelperPriority();
        return MakeEmptySlots(cap);
      });
      prepared_cap_ = cap;
      prepared_bytes_.store((cap + kTail) * sizeof(Slot), std::memory_order_relaxed);
    } catch (const std::system_error&) {
      // No thread to be had: the growth builds its array itself.
    }
    return false;
  }
  // An array of cap + kTail empty slots: the one built ahead when it has that capacity, else a
  // new one. Waits for the helper if it is still building.
  std::vector<Slot> EmptySlots(size_t cap) const {
    if (prepared_.valid()) {
      std::vector<Slot> ready = prepared_.get();
      prepared_bytes_.store(0, std::memory_order_relaxed);
      if (prepared_cap_ == cap) {
        ++prepared_growths_;
        return ready;
      }
    }
    return MakeEmptySlots(cap);
  }
  static std::vector<Slot> MakeEmptySlots(size_t cap) {
    std::vector<Slot> to;
    to.reserve(cap + kTail);
    if (cap * sizeof(Slot) >= (size_t{4} << 20)) AdviseHugePages(to.data(), cap * sizeof(Slot));
    to.assign(cap + kTail, Traits::MakeEmpty());
    return to;
  }

  // Puts `slot` in the first empty position of `to` from `i` on, appending one when the run
  // reaches the end. Returns its position.
  static size_t Place(std::vector<Slot>& to, size_t i, const Slot& slot) {
    const size_t end = to.size();
    while (i < end && !Traits::Empty(to[i])) ++i;
    if (i == end) {
      to.push_back(slot);
    } else {
      to[i] = slot;
    }
    return i;
  }

  // Places the members of `from` (this table's slots) in `to`, cap + kTail empty slots (a table
  // of capacity `cap`). Placing is bound by memory bandwidth (about 11 ns per slot on the test
  // VM), so from parallel_min_slots() on a helper thread places the second half of `from` while
  // the caller places the first: `from` is split at an empty slot p, every member after it has an
  // old home above p and so a new home at or above `limit` (below), and every member before it a
  // new home below `limit`. Each side writes only on its side of `limit`; a member whose probe
  // run would cross it (or, on the helper's side, reach the end, which appends) is kept back and
  // placed once both are done. Linear probing does not depend on the order of insertion, so the
  // result is a valid table either way.
  void Rehash(const std::vector<Slot>& from, std::vector<Slot>& to, size_t cap) const {
    size_t p = from.size();  // no split
    if (from.size() >= parallel_min_slots_ && cap_ != 0 && from.size() < UINT32_MAX) {
      p = from.size() / 2;
      while (p < from.size() && !Traits::Empty(from[p])) ++p;
    }
    if (p == from.size()) {
      PlaceRange(from, 0, from.size(), to, cap, to.size(), nullptr);
      return;
    }
    const size_t limit = SplitBound(p, cap_, cap);
    std::vector<Slot> kept_first;
    std::vector<Slot> kept_second;
    std::future<void> second;
    try {
      second = std::async(std::launch::async, [&] {
        LowerHelperPriority();
        PlaceRange(from, p + 1, from.size(), to, cap, to.size(), &kept_second);
      });
    } catch (const std::system_error&) {
      PlaceRange(from, 0, from.size(), to, cap, to.size(), nullptr);
      return;
    }
    PlaceRange(from, 0, p, to, cap, limit, &kept_first);
    second.get();
    for (const Slot& s : kept_first) Place(to, HomeIn(s, cap), s);
    for (const Slot& s : kept_second) Place(to, HomeIn(s, cap), s);
  }
  static size_t HomeIn(const Slot& s, size_t cap) { return HomeAt(Traits::Hash(s), cap); }
  // Places from[begin, end) in `to` at positions below `stop`; with `kept`, a member whose run
  // reaches `stop` goes there instead (without it, it is appended when `stop` is the end).
  static void PlaceRange(const std::vector<Slot>& from, size_t begin, size_t end,
                         std::vector<Slot>& to, size_t cap, size_t stop, std::vector<Slot>* kept) {
    for (size_t k = begin; k < end; ++k) {
      const Slot& s = from[k];
      if (Traits::Empty(s)) continue;
      size_t i = HomeIn(s, cap);
      while (i < stop && !Traits::Empty(to[i])) ++i;
      if (i < stop) {
        to[i] = s;
      } else if (kept != nullptr) {
        kept->push_back(s);
      } else {
        Place(to, i, s);
      }
    }
  }

  std::vector<Slot> slots_;
  size_t cap_ = 0;
  size_t size_ = 0;
  size_t grow_at_ = 0;
  size_t prepare_min_bytes_ = size_t{4} << 20;
  size_t parallel_min_slots_ = size_t{1} << 20;
  // Growth state the writer changes in const NeedsGrow() / BuildGrown() (readers never use it).
  mutable size_t event_at_ = 0;
  mutable std::future<std::vector<Slot>> prepared_;
  mutable size_t prepared_cap_ = 0;
  mutable size_t prepared_growths_ = 0;
  // Read by stats() in readers, hence atomic.
  mutable std::atomic<size_t> prepared_bytes_{0};
};

}  // namespace kvindex::internal

#endif  // KVINDEX_SRC_FLAT_TABLE_H_
