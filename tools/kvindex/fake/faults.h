// publish-fake's faults: which batches the live socket drops, duplicates or corrupts
// (--drop-every, --duplicate-every, --corrupt-every), what a corrupt copy looks like, and the
// replay ring a publisher holds at a point of the stream (--ring, emptied by a --restart-after
// restart). The publishers and the simulated subscriber both use these, so what is sent and what a
// correct subscriber recovers agree.
//
// Thread safety: plain functions of their arguments.
#ifndef KVINDEX_TOOLS_FAKE_FAULTS_H_
#define KVINDEX_TOOLS_FAKE_FAULTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"

namespace kvindex::cli {

// Assigns faults: the k-th batch (1-based within its source) gets drop when k % drop_every == 0,
// else corrupt, else duplicate. The last batch of a source is never dropped (nothing after it
// would reveal the hole), and the first batch after a restart is never dropped or corrupted (the
// subscriber learns of the restart from the next sequence and would never ask for it).
void AssignFaults(const PublishFakeOptions& o, FakeSource& src);

// A copy of `payload` that cannot decode (its first byte replaced by 0xc1).
Bytes CorruptCopy(const Bytes& payload);

// The ring as the publisher holds it right after item `upto` of `src` was remembered: the last
// `ring` batches of the current incarnation, oldest first. The pointers point into `src.items`.
std::vector<const FakeBatch*> RingAfter(const FakeSource& src, size_t upto, uint64_t ring);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAULTS_H_
