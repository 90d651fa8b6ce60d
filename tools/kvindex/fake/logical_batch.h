// `publish-fake --batches FILE`: one logical batch per JSON line (the golden files' `logical`:
// {ts, events, dp_rank?}, events as vLLM names their fields) read into the EventBatch that is then
// encoded in the wire format asked for.
//
// Thread safety: a plain function of its arguments.
#ifndef KVINDEX_TOOLS_FAKE_LOGICAL_BATCH_H_
#define KVINDEX_TOOLS_FAKE_LOGICAL_BATCH_H_

#include <string>

#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

namespace kvindex::cli {

// Parses one line. Returns the batch, or kMalformed prefixed with `where` (e.g. "FILE: line 3")
// for a line that is not a JSON object, a non-integer hash or an unknown event type.
Result<EventBatch> ParseLogicalBatch(const std::string& line, const std::string& where);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_LOGICAL_BATCH_H_
