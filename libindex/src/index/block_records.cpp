// Block records: mapping the chunks they live in, handing out new records, growing presence
// arrays and the free list, and holding back freed records that engine maps still name until a
// sweep drops those entries.

#include "block_records.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <new>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "flat_table.h"
#include "index_impl.h"

namespace kvindex {

namespace {

#if defined(__SANITIZE_ADDRESS__)
#define KVINDEX_HEAP_CHUNKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVINDEX_HEAP_CHUNKS 1
#endif
#endif
std::unique_ptr<Block[], UnmapChunk> MapChunk() {
#ifdef KVINDEX_HEAP_CHUNKS
  // Under AddressSanitizer chunks come from the heap: ASan then checks their bounds, and
  // LeakSanitizer sees the overflow presence arrays they point to (it does not scan private
  // mappings, so an index still alive at exit would report every overflow array as leaked).
  return {new Block[kChunkSize], UnmapChunk{false}};
#else
  // Map twice the size and trim to the aligned interior.
  void* raw =
      mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return {new Block[kChunkSize], UnmapChunk{false}};
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kChunkBytes - 1) & ~(uintptr_t{kChunkBytes} - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t tail = aligned + kChunkBytes;
  if (begin + 2 * kChunkBytes > tail)
    munmap(reinterpret_cast<void*>(tail), begin + 2 * kChunkBytes - tail);
  internal::AdviseHugePages(reinterpret_cast<void*>(aligned), kChunkBytes);
  return {new (reinterpret_cast<void*>(aligned)) Block[kChunkSize], UnmapChunk{true}};
#endif
}

}  // namespace

PrefixIndex::Impl::NewChunk PrefixIndex::Impl::MakeChunk(bool evicting) {
  NewChunk made{MapChunk(), nullptr};
  if (evicting) made.second = std::make_unique<std::atomic<uint64_t>[]>(kChunkSize);
  return made;
}

// A new chunk is needed every 65,536 new blocks, and MapChunk() writes every record of the fresh
// 2 MiB: faulting that in cost ~10 ms on the 2-vCPU VM (its host hands free memory back, so first
// touches are slow). So the next chunk is mapped on a helper thread once the current one is three
// quarters full, and the writer only takes it over (docs/architecture.md "Index concurrency").
// Should the helper not be done, or no thread be had, the writer waits for it or maps the chunk
// itself, outside the exclusive section either way. Readers index `chunks`, so the lock is held
// for the push_back. The caller's table position stays valid: only the writer mutates the table.
uint32_t PrefixIndex::Impl::NewRecord() {
  if ((allocated & (kChunkSize - 1)) == kChunkSize / 4 * 3 && !next_chunk.valid()) {
    try {
      next_chunk = std::async(std::launch::async, [evicting = evicting()] {
        internal::LowerHelperPriority();
        return MakeChunk(evicting);
      });
      chunk_ahead.store(true, std::memory_order_relaxed);
    } catch (const std::system_error&) {
      // No helper thread: the chunk is mapped when it is needed.
    }
  }
  if ((allocated >> kChunkBits) >= chunks.size()) {
    BuildOutside(
        [&] { return next_chunk.valid() ? next_chunk.get() : MakeChunk(evicting()); },
        [&](NewChunk& made) {
          chunk_ahead.store(false, std::memory_order_relaxed);
          chunks.push_back(std::move(made.first));
          if (made.second) touch_chunks.push_back(std::move(made.second));
        });
  }
  return allocated++;
}

void PrefixIndex::Impl::GrowFreeList() {
  free_list.resize(std::max<size_t>(1024, free_list.size() * 2));
}

void PrefixIndex::Impl::FreeOverflow(Block& b) {
  overflow_bytes -= b.cap() * sizeof(Presence);
  delete[] b.store.heap;
}

void PrefixIndex::Impl::Defer(uint32_t idx) {
  deferred.push_back(idx);
  if ((idx >> 6) >= deferred_bits.size()) deferred_bits.resize((idx >> 6) + 1024, 0);
  deferred_bits[idx >> 6] |= 1ULL << (idx & 63);
}

// Makes deferred records reusable once no engine map points at them. Amortised O(1) per free:
// the sweep visits every engine entry but runs only after max(4096, live/2) frees. The scan is
// a read (the writer may read without the lock); erasing is chunked under the lock.
void PrefixIndex::Impl::MaybeRecycle() {
  if (deferred.size() < std::max<uint64_t>(4096, live_blocks / 2)) return;
  WUnlock();
  std::vector<std::pair<uint32_t, uint64_t>> dead;
  for (uint32_t ii = 0; ii < instances.size(); ++ii) {
    instances[ii]->engine.ForEach([&](const EngineSlot& e) {
      if ((e.block >> 6) < deferred_bits.size() &&
          (deferred_bits[e.block >> 6] >> (e.block & 63) & 1) != 0) {
        dead.emplace_back(ii, e.key());
      }
    });
  }
  WLock();
  for (const auto& [ii, key] : dead) {
    EngineErase(*instances[ii], key);
    Tick();
  }
  for (uint32_t idx : deferred) {
    PushFree(idx);
    deferred_bits[idx >> 6] &= ~(1ULL << (idx & 63));
    BeforeWrite(idx);
    block(idx).engine_refs = 0;  // every entry pointing here was erased above
  }
  deferred.clear();
}

Presence* PrefixIndex::Impl::GrowPresence(Block& b) {
  const uint32_t cap = b.cap() * 2;
  Presence* grown = new Presence[cap];
  std::memcpy(grown, b.data(), b.count * sizeof(Presence));
  if (!b.inline_store()) {
    overflow_bytes -= b.cap() * sizeof(Presence);
    delete[] b.store.heap;
  }
  overflow_bytes += cap * sizeof(Presence);
  b.store.heap = grown;
  ++b.cap_log2;
  return grown;
}

}  // namespace kvindex
