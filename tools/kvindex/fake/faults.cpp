#include "fake/faults.h"

#include <algorithm>

namespace kvindex::cli {

void AssignFaults(const PublishFakeOptions& o, FakeSource& src) {
  for (size_t i = 0; i < src.items.size(); ++i) {
    FakeBatch& item = src.items[i];
    const uint64_t k = i + 1;
    const bool last = i + 1 == src.items.size();
    if (o.drop_every > 0 && k % o.drop_every == 0 && !last && !item.restart) {
      item.fault = Fault::kDrop;
    } else if (o.corrupt_every > 0 && k % o.corrupt_every == 0 && !item.restart) {
      item.fault = Fault::kCorrupt;
    } else if (o.duplicate_every > 0 && k % o.duplicate_every == 0)
      item.fault = Fault::kDuplicate;
  }
}

Bytes CorruptCopy(const Bytes& payload) {
  // 0xc1 is the one byte msgpack never uses: the copy cannot decode, so a subscriber sees a
  // malformed payload with intact frames (a hole for that sequence), never different content.
  Bytes bad = payload;
  if (bad.empty())
    bad.push_back(std::byte{0xc1});
  else
    bad[0] = std::byte{0xc1};
  return bad;
}

std::vector<const FakeBatch*> RingAfter(const FakeSource& src, size_t upto, uint64_t ring) {
  std::vector<const FakeBatch*> kept;
  size_t begin = upto + 1;
  while (begin > 0 && kept.size() < ring) {
    const FakeBatch& it = src.items[begin - 1];
    kept.push_back(&it);
    --begin;
    if (it.restart) break;
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

}  // namespace kvindex::cli
