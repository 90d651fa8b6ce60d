// What publish-fake reports at the end of a run: one line on stderr (batches, events, blocks,
// faults, replay requests) and, with --json FILE ("-" = stdout), the summary document: totals, the
// fault sequences and per source its counters, the model's resident blocks and, after a network
// run, the publisher's counters and the send rate.
//
// Thread safety: a plain function of its arguments.
#ifndef KVINDEX_TOOLS_FAKE_FAKE_SUMMARY_H_
#define KVINDEX_TOOLS_FAKE_FAKE_SUMMARY_H_

#include <cstddef>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/core/status.h"

#include "fake/fake_publishers.h"
#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"

namespace kvindex::cli {

// Writes the summary of `sources` (counters filled by the simulated subscriber) and the blocks
// the simulated subscriber's model holds per source (`model_blocks[k]` for source k). `run` is
// the network run, or nullptr for --out. kIoError "FILE: cannot write" for --json.
Status WriteSummary(const PublishFakeOptions& o, ReplayStyle style,
                    const std::vector<FakeSource>& sources,
                    const std::vector<size_t>& model_blocks, const PublishRun* run);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_FAKE_SUMMARY_H_
