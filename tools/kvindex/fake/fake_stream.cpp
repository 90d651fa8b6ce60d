#include "fake/fake_stream.h"

#include <malloc.h>

#include <variant>

namespace kvindex::cli {

std::string FakeSourceName(const SourceConfig& config) {
  if (!config.dp_rank) return config.name;
  return config.name + "/dp" + std::to_string(*config.dp_rank);
}

void KeepPayloadsOnly(FakeStream& stream) {
  for (FakeSource& source : stream.sources) {
    for (FakeBatch& item : source.items) {
      item.batch.reset();
      std::vector<TokenId>().swap(item.recent);
    }
  }
  stream.synthetic.reset();
  stream.trace.reset();
  // glibc keeps millions of small freed chunks unmerged until a larger allocation merges them
  // all; merge them here and hand the memory back, not at the live run's first sends.
  malloc_trim(0);
}

void CountEvents(FakeBatch& item) {
  if (!item.batch) return;
  const auto& events = item.batch->events;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    ++item.events;
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      item.stored += s->block_hashes.size();
      // A seed-era BlockStoreEvent: the StoreUpdate after it is part of the same wire event.
      if (s->wire.object_key && i + 1 < events.size() &&
          std::holds_alternative<StoreUpdate>(events[i + 1])) {
        ++i;
      }
    }
    if (const auto* r = std::get_if<BlockRemoved>(&e)) item.removed += r->block_hashes.size();
    if (std::holds_alternative<AllCleared>(e)) ++item.cleared;
    if (const auto* u = std::get_if<StoreUpdate>(&e)) {
      if (u->replicas.empty()) ++item.removed;
    }
  }
}

}  // namespace kvindex::cli
