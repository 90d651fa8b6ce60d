// Parsing what users say about sources: the `--source` syntax, the upstream conductor's JSON
// config (`--config FILE`), and the JSON a capture stores for each source (docs/cli.md
// "Sources", docs/capture-format.md "Source definition JSON").
//
//   --source NAME=FORMAT@ENDPOINT[,key=value...]
//     NAME    the instance (several sources may share it, one per DP rank)
//     FORMAT  vllm | sglang | mooncake | auto   (a hint; the era is detected per message)
//     ENDPOINT everything up to the first ','
//     keys    replay=EP model=M block-size=N dp-rank=R dp-size=N tenant=T lora=L salt=S topic=T
//             serves=I1+I2|* bind hash=standard hash-seed=N
//
// `dp-size=N` expands into N sources, rank r on the endpoint's port + r (and the replay port + r),
// as vLLM lays out data-parallel publishers.
//
// Thread safety: pure functions.
#ifndef KVINDEX_CODEC_SOURCE_SPEC_H_
#define KVINDEX_CODEC_SOURCE_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/source.h"
#include "kvindex/core/status.h"

namespace kvindex {

// Parses one `--source` value. Returns one SourceConfig, or dp-size of them; an auto@http://
// spec is kInvalidArgument here (ParseEngineSourceSpec reads it). Errors
// (kInvalidArgument) name the offending key or part, e.g. "--source 'a=vllm@tcp://h:1,blok-size=4':
// unknown key 'blok-size'".
Result<std::vector<SourceConfig>> ParseSourceSpec(std::string_view spec);

// `--source NAME=auto@http://HOST:PORT[,key=value...]`: a source whose endpoints, topic, block
// size, DP size and model the engine reports over HTTP when subscribe or record starts
// (docs/cli.md "Engine discovery"; codec/engine_report.h). The keys given here win over the
// engine's report.
struct EngineSourceSpec {
  SourceConfig config;  // the name and the keys given; endpoint holds the engine's URL
  bool dp_size_given = false;
  std::string engine_host;  // without IPv6 brackets
  uint16_t engine_port = 0;
};

// True when `spec` has FORMAT auto and an http:// ENDPOINT (ParseSourceSpec then refuses it).
bool IsEngineSourceSpec(std::string_view spec);

// Parses an auto@http:// spec. kInvalidArgument as ParseSourceSpec, or when the address is not
// http://HOST:PORT or a key does not apply to an engine (bind, serves).
Result<EngineSourceSpec> ParseEngineSourceSpec(std::string_view spec);

// A parsed `--config FILE`.
struct SourcesConfig {
  std::vector<SourceConfig> sources;
  std::optional<uint16_t> http_port;  // `http_server_port`
};

// Parses the upstream conductor's JSON: {"kvevent_instance": {"<name>": {endpoint,
// replay_endpoint, type, modelname, lora_name, lora_id, tenant_id, instance_id, block_size,
// dp_rank, additionalsalt, ...}}, "http_server_port": N}. Unlike upstream, `instance_id` is
// honoured (it names the instance; the map key is used when it is absent or empty), the README's
// `ip`/`port` form is accepted, an unknown `type` is an error rather than a silent skip, and
// kvindex's own keys (`serves`, `dp_size`, `topic`, `bind`, `hash`, `hash_seed`, `format`) may be
// added. `source_name` names the input in errors. kMalformed for bad JSON or wrong types,
// kInvalidArgument for bad values.
Result<SourcesConfig> ParseSourcesConfig(std::string_view json, std::string_view source_name);

// The JSON object a capture stores for a source (keys in docs/capture-format.md), and back.
// FromJson ignores unknown keys; kMalformed for wrong types.
std::string SourceConfigToJson(const SourceConfig& config);
Result<SourceConfig> SourceConfigFromJson(std::string_view json);

// Checks `config` and expands its dp_size into one source per rank on port + r (the replay port
// + r too); dp_size 1 gives `config` itself. kInvalidArgument naming the problem.
Result<std::vector<SourceConfig>> ExpandDp(const SourceConfig& config);

// Returns `endpoint` with its TCP port increased by `offset` (tcp://h:5557 + 1 -> tcp://h:5558);
// an ipc:// or inproc:// endpoint gets the suffix `_dp<offset>` (ipc:///tmp/kv + 1 ->
// ipc:///tmp/kv_dp1), none for offset 0. kInvalidArgument when the endpoint has neither a numeric
// port nor an ipc path, or the port exceeds 65535.
Result<std::string> OffsetEndpointPort(std::string_view endpoint, uint32_t offset);

}  // namespace kvindex

#endif  // KVINDEX_CODEC_SOURCE_SPEC_H_
