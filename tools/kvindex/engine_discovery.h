// `--source NAME=auto@http://HOST:PORT`: asks the engine over HTTP for its KV-event publisher
// (codec/engine_report.h; docs/cli.md "Engine discovery") when `subscribe` or `record` starts.
#ifndef KVINDEX_TOOLS_ENGINE_DISCOVERY_H_
#define KVINDEX_TOOLS_ENGINE_DISCOVERY_H_

#include <vector>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"

namespace kvindex::cli {

// The sources the engine of `spec` describes. While the engine cannot be reached (refused
// connection, no answer, HTTP 5xx) it is asked again every half second until `wait_s` seconds
// have passed (0: once). Every failure is one line naming the source, the engine and what it did
// not report; never kInvalidArgument (the spec itself was checked before).
Result<std::vector<SourceConfig>> DiscoverEngineSources(const EngineSourceSpec& spec, double wait_s);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_ENGINE_DISCOVERY_H_
