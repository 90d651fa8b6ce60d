// publish-fake's workloads turned into batches: the sources of a run (instances x DP ranks, or
// those of a re-published capture) with their endpoints and definitions, and each source's batches
// from the workload the options name: synthetic prompts or a request trace served by a FakeCache
// per source, the logical batches of a --batches file, or the live messages of a --capture. Every
// batch is encoded up front in the wire format (a capture's payloads are sent as recorded).
//
// Thread safety: plain functions of their arguments.
#ifndef KVINDEX_TOOLS_FAKE_GENERATE_BATCHES_H_
#define KVINDEX_TOOLS_FAKE_GENERATE_BATCHES_H_

#include "kvindex/codec/event_codec.h"
#include "kvindex/core/status.h"

#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"

namespace kvindex::cli {

// The whole stream of a run, batches encoded and counted, faults not yet assigned. Errors name the
// input: kNotFound / kMalformed for an unreadable or bad --trace, --batches or --capture file (a
// capture without sources is kMalformed), or the encoder's error with the source, batch and format.
Result<FakeStream> GenerateStream(const PublishFakeOptions& o, WireFormat format);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_GENERATE_BATCHES_H_
