// JournalPublisher::Cut() and WaitCovered() (journal.h): the cut a snapshot of the ingester's
// state is taken at, and the journal position it covers.
#include <chrono>
#include <mutex>

#include "journal_publisher_impl.h"

namespace kvindex {

JournalCut JournalPublisher::Cut() {
  Impl& m = *impl_;
  // A record dropped before the cut is in the state taken with it: its source's journal-lost note
  // goes before the cut too, or a replica starting after the cut would take the note for a loss
  // of its own.
  {
    std::lock_guard lock(m.mutex);
    m.lost_sources.merge(m.lost_at_send_sources);
  }
  if (!m.lost_sources.empty()) m.MarkLosses();
  JournalCut cut;
  for (const auto& [source, key] : m.keys) {
    if (cut.source_keys.size() <= source) cut.source_keys.resize(source + 1, 0);
    cut.source_keys[source] = key;
  }
  for (const auto& [source, last] : m.last_link) {
    if (cut.last_links.size() <= source) cut.last_links.resize(source + 1);
    cut.last_links[source] = JournalLink{last.link, last.chained};
  }
  std::lock_guard lock(m.mutex);
  cut.ordinal = m.next_ordinal;
  // Every record popped so far precedes the cut; the ones popped from now on count while their
  // ordinal is below it.
  m.cut_ordinal = cut.ordinal;
  m.cut_max_seq = m.popped_max_seq;
  cut.resent = m.counters.resent;
  cut.lost_at_send = m.lost_at_send;
  return cut;
}

Result<uint64_t> JournalPublisher::WaitCovered(const JournalCut& cut,
                                               std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  std::unique_lock lock(m.mutex);
  if (m.cut_ordinal != cut.ordinal) {
    return Status::Unavailable("journal: a later cut was taken since this one");
  }
  const bool done = m.popped.wait_for(lock, wait, [&m, &cut] {
    return m.stop || m.front_ordinal >= cut.ordinal;
  });
  const uint64_t covered = m.cut_max_seq;
  if (!done || m.front_ordinal < cut.ordinal) {
    return Status::Timeout("journal: the records before the snapshot were not acknowledged in " +
                           std::to_string(wait.count()) + " ms");
  }
  if (m.counters.resent != cut.resent) {
    return Status::Unavailable("journal: records were sent again across the snapshot's cut");
  }
  if (m.lost_at_send != cut.lost_at_send) {
    // Their journal-lost note comes after the cut, where a replica starting there would take it
    // for a loss of its own.
    return Status::Unavailable("journal: records before the snapshot's cut were lost when sent");
  }
  return covered;
}

}  // namespace kvindex
