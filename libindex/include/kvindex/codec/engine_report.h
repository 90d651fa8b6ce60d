// What an engine reports over HTTP about its KV-event publisher, and the sources a
// `--source NAME=auto@http://HOST:PORT` spec becomes once that report is known
// (docs/wire-formats.md "Endpoint discovery", docs/cli.md "Engine discovery").
//
//   SGLang  GET /server_info       a JSON object: its server arguments, among them
//                                  `kv_events_config` (a string holding JSON: publisher, endpoint,
//                                  replay_endpoint, topic), `page_size`, `dp_size`,
//                                  `served_model_name` and `model_path`; newer servers add the
//                                  `kv_events` descriptor (publisher, endpoint_host,
//                                  endpoint_port_base, topic, block_size, dp_size), which wins
//   vLLM    GET /kv_event_sources  a JSON array, one object per DP rank: data_parallel_rank,
//                                  endpoint, replay_endpoint, topic (the bound addresses)
//           GET /v1/models         the served model: data[0].id
//
// The parsers never throw and refuse oversized or deeply nested bodies; every error is one line
// naming what the engine did not report (kNotFound) or reported in a shape kvindex does not read
// (kMalformed, kUnsupported).
//
// Thread safety: pure functions.
#ifndef KVINDEX_CODEC_ENGINE_REPORT_H_
#define KVINDEX_CODEC_ENGINE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/source.h"
#include "kvindex/core/status.h"

namespace kvindex {

// The largest discovery body read (an SGLang /server_info is a few tens of KiB).
inline constexpr size_t kMaxEngineReportBytes = 4u << 20;

struct EnginePublisher {
  std::string endpoint;           // as reported: tcp://*:5557, tcp://10.0.0.1:40123, ...
  std::string replay_endpoint;    // empty: no replay
  std::string topic;
  std::optional<DpRank> dp_rank;  // vLLM: each rank is reported; SGLang: ranks on port + r
  // SGLang: an endpoint without a wildcard host makes its PUB socket connect (to port + r), so
  // the subscriber binds there.
  bool publisher_connects = false;
};

struct EngineReport {
  std::string format;                       // "sglang" or "vllm"
  std::vector<EnginePublisher> publishers;  // at least one
  uint32_t dp_size = 0;                     // 0: not reported (SGLang only)
  uint32_t block_size = 0;                  // 0: not reported (the events carry it)
  std::string model;                        // empty: not reported
};

// SGLang's GET /server_info body.
Result<EngineReport> ParseSglangServerInfo(std::string_view body);

// vLLM's GET /kv_event_sources body.
Result<EngineReport> ParseVllmEventSources(std::string_view body);

// An OpenAI-style GET /v1/models body: the first model's id.
Result<std::string> ParseServedModel(std::string_view body);

// The sources of `spec` given the engine's `report`: explicit keys (model, block-size, dp-size,
// topic, replay) win; a wildcard host in a reported endpoint (`*`, 0.0.0.0, ::) becomes the
// engine's host; SGLang's dp_size expands to ranks on port + r. kNotFound when the model is
// neither given nor reported; kUnsupported for an endpoint kvindex cannot connect to or ports
// beyond 65535; kUnavailable for a port 0. Never kInvalidArgument (the spec was checked).
Result<std::vector<SourceConfig>> ResolveEngineSource(const EngineSourceSpec& spec,
                                                      const EngineReport& report);

}  // namespace kvindex

#endif  // KVINDEX_CODEC_ENGINE_REPORT_H_
