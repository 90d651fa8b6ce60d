// Fuzz target for the `--source NAME=FORMAT@ENDPOINT[,key=value...]` parser (ParseSourceSpec,
// docs/cli.md "Sources") and for OffsetEndpointPort, which lays out `dp-size=N` ports.
// Properties (a violation aborts):
//  - any text gives sources or a kInvalidArgument error, never a crash or an escaping exception;
//  - an error is non-empty and, for a text without control characters, one line;
//  - an accepted spec gives dp-size sources (one when dp-size is absent), all with the same name,
//    each with an endpoint, rank r on the first endpoint's port + r when there are several;
//  - every accepted source survives the capture JSON (SourceConfigToJson -> SourceConfigFromJson
//    -> SourceConfigToJson is a fixed point): `record` stores exactly what was parsed.
//
// Corpus (tests/fuzz/corpus/source_spec/): the --source values of docs/cli.md and of the CLI
// tests, one per file, with every key, IPv6 and ipc endpoints and some bad ones.
#include <exception>
#include <string>
#include <string_view>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/address.h"

#include "fuzz_check.h"

namespace {

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("source_spec_fuzz", what, detail, input);
}

void CheckSpec(std::string_view text) {
  auto sources = kvindex::ParseSourceSpec(text);
  if (!sources.ok()) {
    if (sources.status().code() != kvindex::StatusCode::kInvalidArgument) {
      Fail("unexpected error code", sources.status().ToString(), text);
    }
    const std::string message = sources.status().message();
    if (message.empty() ||
        (kvindex::fuzz::HasNoControl(text) && !kvindex::fuzz::IsOneLine(message))) {
      Fail("error is not one line", message, text);
    }
    return;
  }
  if (sources->empty()) Fail("an accepted spec without sources", "", text);
  const kvindex::SourceConfig& first = sources->front();
  for (size_t r = 0; r < sources->size(); ++r) {
    const kvindex::SourceConfig& source = (*sources)[r];
    if (source.name.empty() || source.endpoint.empty() || source.name != first.name) {
      Fail("an accepted source without its name or an endpoint", source.name, text);
    }
    if (sources->size() > 1) {
      auto expected = kvindex::OffsetEndpointPort(first.endpoint, static_cast<uint32_t>(r));
      if (!expected.ok() || *expected != source.endpoint) {
        Fail("dp rank not on the first port + rank", source.endpoint, text);
      }
    }
    const std::string json = kvindex::SourceConfigToJson(source);
    auto back = kvindex::SourceConfigFromJson(json);
    if (!back.ok()) Fail("a written source does not read back", back.status().ToString(), text);
    if (kvindex::SourceConfigToJson(*back) != json)
      Fail("source JSON is not a fixed point", json, text);
  }
}

// OffsetEndpointPort writes the endpoint back in ParseNetAddress's spelling: that spelling is a
// fixed point, and offsets move the port only.
void CheckOffset(std::string_view text) {
  auto zero = kvindex::OffsetEndpointPort(text, 0);
  if (!zero.ok()) {
    if (zero.status().code() != kvindex::StatusCode::kInvalidArgument) {
      Fail("OffsetEndpointPort: unexpected error code", zero.status().ToString(), text);
    }
    return;
  }
  // ipc:// and inproc:// have no port: rank r > 0 takes the suffix `_dp<r>`, rank 0 the path itself.
  auto path = kvindex::ParseNetAddress(text);
  if (path.ok() && (path->scheme == "ipc" || path->scheme == "inproc")) {
    auto one = kvindex::OffsetEndpointPort(text, 1);
    if (*zero != text || !one.ok() || *one != std::string(text) + "_dp1") {
      Fail("an ipc/inproc rank is not the path with _dp<rank>", *zero, text);
    }
    return;
  }
  auto again = kvindex::OffsetEndpointPort(*zero, 0);
  if (!again.ok() || *again != *zero) Fail("offset 0 is not a fixed point", *zero, text);
  auto base = kvindex::ParseNetAddress(*zero);
  if (!base.ok() || !base->port) Fail("an offset endpoint does not parse", *zero, text);
  for (uint32_t offset : {1u, 65535u}) {
    auto moved = kvindex::OffsetEndpointPort(text, offset);
    const bool fits = *base->port + offset <= 65535;
    if (moved.ok() != fits)
      Fail("offset accepted beyond port 65535, or refused below", *zero, text);
    if (!moved.ok()) continue;
    auto parsed = kvindex::ParseNetAddress(*moved);
    if (!parsed.ok() || parsed->port != *base->port + offset || parsed->host != base->host ||
        parsed->scheme != base->scheme) {
      Fail("an offset changed more than the port", *moved, text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    CheckSpec(text);
    CheckOffset(text);
  } catch (const std::exception& e) {
    Fail("exception", e.what(), text);
  }
  return 0;
}
