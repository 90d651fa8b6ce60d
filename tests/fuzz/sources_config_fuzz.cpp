// Fuzz target for the two JSON readers of source definitions: `subscribe --config FILE` (the
// upstream conductor's config, ParseSourcesConfig) and the source JSON a capture stores
// (SourceConfigFromJson, read back by `replay` and `publish-fake --capture`). Properties (a
// violation aborts):
//  - any bytes give a value or an error, never a crash or an escaping exception;
//  - errors are kMalformed or kInvalidArgument, one line, naming the input ("fuzz.json: ...");
//  - an accepted config has at least one source, each with a name and an endpoint, and every
//    source survives the capture JSON: SourceConfigToJson -> SourceConfigFromJson ->
//    SourceConfigToJson gives the same text (what `record` writes, `replay` reads the same);
//  - an accepted capture source JSON is such a fixed point too.
//
// Corpus (tests/fuzz/corpus/sources_config/): the conductor config of tests/data/mooncake/, the
// configs of tests/source_spec_test.cpp (README ip/port form, kvindex keys, dp_size, bad values)
// and capture source JSONs as SourceConfigToJson writes them.
#include <exception>
#include <string>
#include <string_view>

#include "kvindex/codec/source_spec.h"

#include "fuzz_check.h"

namespace {

using kvindex::fuzz::IsOneLine;

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("sources_config_fuzz", what, detail, input);
}

void CheckError(const kvindex::Status& status, std::string_view input) {
  if (status.code() != kvindex::StatusCode::kMalformed &&
      status.code() != kvindex::StatusCode::kInvalidArgument) {
    Fail("unexpected error code", status.ToString(), input);
  }
  if (!IsOneLine(status.message())) Fail("error is not one line", status.message(), input);
}

// SourceConfigToJson of a source, read back and written again, must not change.
void CheckCaptureJson(const kvindex::SourceConfig& source, std::string_view input) {
  const std::string json = kvindex::SourceConfigToJson(source);
  auto back = kvindex::SourceConfigFromJson(json);
  if (!back.ok()) Fail("a written source JSON does not read back", back.status().ToString(), input);
  const std::string again = kvindex::SourceConfigToJson(*back);
  if (again != json) Fail("source JSON is not a fixed point", json + " -> " + again, input);
}

void CheckConfig(std::string_view text) {
  auto config = kvindex::ParseSourcesConfig(text, "fuzz.json");
  if (!config.ok()) {
    CheckError(config.status(), text);
    if (config.status().message().rfind("fuzz.json", 0) != 0) {
      Fail("error does not name the file", config.status().message(), text);
    }
    return;
  }
  if (config->sources.empty()) Fail("an accepted config without sources", "", text);
  for (const kvindex::SourceConfig& source : config->sources) {
    if (source.name.empty() || source.endpoint.empty()) {
      Fail("an accepted source without a name or an endpoint", source.name, text);
    }
    CheckCaptureJson(source, text);
  }
  if (config->http_port && *config->http_port == 0) Fail("http_server_port 0 accepted", "", text);
}

void CheckSourceJson(std::string_view text) {
  auto source = kvindex::SourceConfigFromJson(text);
  if (!source.ok()) {
    CheckError(source.status(), text);
    return;
  }
  CheckCaptureJson(*source, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    CheckConfig(text);
    CheckSourceJson(text);
  } catch (const std::exception& e) {
    Fail("exception", e.what(), text);
  }
  return 0;
}
