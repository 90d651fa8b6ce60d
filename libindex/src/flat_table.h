// FlatTable: a small open-addressing hash table (linear probing, power-of-two capacity, maximum
// load 3/4, backward-shift deletion: no tombstones) over caller-defined slots. Private to libindex.
//
// Why not std::unordered_map: one node allocation per entry (about 40 bytes of heap and a cache
// miss per lookup); the index needs ~10 M inserts/s and <= 64 bytes per presence (docs/
// architecture.md "Index memory layout"). A Traits type supplies:
//   static bool Empty(const Slot&);        static Slot MakeEmpty();
//   static uint64_t Hash(const Slot&);     // the hash the slot was inserted with (for rehash)
// Only the home bucket of a hash depends on its low bits, so a slot may keep 32 bits of it.
//
// Thread safety: none; PrefixIndex guards it with its reader-writer lock.
#ifndef KVINDEX_SRC_FLAT_TABLE_H_
#define KVINDEX_SRC_FLAT_TABLE_H_

#include <cstddef>
#include <cstdint>
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

template <typename Slot, typename Traits>
class FlatTable {
 public:
  static constexpr size_t kNotFound = static_cast<size_t>(-1);

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

  // Position of the first slot with hash `h` for which `match(slot)` holds, or kNotFound.
  template <typename Match>
  size_t Find(uint64_t h, Match&& match) const {
    if (size_ == 0) return kNotFound;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (Traits::Empty(s)) return kNotFound;
      if (match(s)) return i;
    }
  }

  void Prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }

  Slot& at(size_t pos) { return slots_[pos]; }
  const Slot& at(size_t pos) const { return slots_[pos]; }

  // Inserts `slot` (whose hash is `h`); the caller has checked it is absent. Returns its position.
  size_t Insert(uint64_t h, const Slot& slot) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow(slots_.empty() ? 16 : slots_.size() * 2);
    size_t i = h & mask_;
    while (!Traits::Empty(slots_[i])) i = (i + 1) & mask_;
    slots_[i] = slot;
    ++size_;
    return i;
  }

  // Removes the slot at `pos`, shifting later members of its probe run back (no tombstones).
  void EraseAt(size_t pos) {
    size_t i = pos;
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (Traits::Empty(slots_[j])) break;
      const size_t home = Traits::Hash(slots_[j]) & mask_;
      // Leave slot j where it is when its home lies cyclically in (i, j].
      if (((j - home) & mask_) < ((j - i) & mask_)) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Traits::MakeEmpty();
    --size_;
  }

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap * 3 < n * 4) cap *= 2;
    if (cap > slots_.size()) Grow(cap);
  }

  void Clear() {
    slots_.assign(slots_.size(), Traits::MakeEmpty());
    size_ = 0;
  }

  // Calls f(slot) for every occupied slot.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (!Traits::Empty(s)) f(s);
    }
  }

 private:
  void Grow(size_t cap) {
    std::vector<Slot> old(cap, Traits::MakeEmpty());
    old.swap(slots_);
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (Traits::Empty(s)) continue;
      size_t i = Traits::Hash(s) & mask_;
      while (!Traits::Empty(slots_[i])) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace kvindex::internal

#endif  // KVINDEX_SRC_FLAT_TABLE_H_
