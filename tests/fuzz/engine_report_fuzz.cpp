// Fuzz target for the endpoint-discovery parsers (codec/engine_report.h): SGLang's
// GET /server_info, vLLM's GET /kv_event_sources and GET /v1/models answers, and the sources a
// report resolves to. Properties (a violation aborts):
//  - any body gives a report or an error, never a crash or an escaping exception;
//  - an error is never kInvalidArgument (a usage error) and, for a body without control
//    characters, its message is one line;
//  - a report resolves (for an engine at a wildcard-free host) to sources that each connect to
//    tcp://HOST:PORT with a non-zero port, the engine's host replacing a wildcard, with the
//    spec's name and a model.
//
// Corpus (tests/fuzz/corpus/engine_report/): the answer shapes of docs/wire-formats.md
// "Endpoint discovery", written by hand, and a few broken ones.
#include <exception>
#include <string>
#include <string_view>

#include "kvindex/codec/engine_report.h"
#include "kvindex/core/address.h"

#include "fuzz_check.h"

namespace {

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("engine_report_fuzz", what, detail, input);
}

void CheckError(const kvindex::Status& status, std::string_view text) {
  if (status.code() == kvindex::StatusCode::kInvalidArgument) {
    Fail("a usage error for an engine's answer", status.ToString(), text);
  }
  if (status.message().empty() ||
      (kvindex::fuzz::HasNoControl(text) && !kvindex::fuzz::IsOneLine(status.message()))) {
    Fail("error is not one line", status.message(), text);
  }
}

void CheckResolved(const kvindex::EngineReport& report, std::string_view text) {
  static const kvindex::EngineSourceSpec spec = [] {
    auto parsed = kvindex::ParseEngineSourceSpec("fz=auto@http://10.9.8.7:8000,model=m");
    return parsed.ok() ? *parsed : kvindex::EngineSourceSpec{};
  }();
  auto sources = kvindex::ResolveEngineSource(spec, report);
  if (!sources.ok()) return CheckError(sources.status(), text);
  if (sources->empty()) Fail("resolved to no source", "", text);
  for (const kvindex::SourceConfig& source : *sources) {
    auto address = kvindex::ParseNetAddress(source.endpoint);
    if (!address.ok() || address->scheme != "tcp" || !address->port || *address->port == 0 ||
        address->host.empty() || address->host == "*" || address->host == "0.0.0.0") {
      Fail("resolved to an endpoint kvindex cannot connect to", source.endpoint, text);
    }
    if (source.name != "fz" || source.model.empty()) Fail("lost the name or model", source.name, text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto sglang = kvindex::ParseSglangServerInfo(text);
    if (sglang.ok()) {
      CheckResolved(*sglang, text);
    } else {
      CheckError(sglang.status(), text);
    }
    auto vllm = kvindex::ParseVllmEventSources(text);
    if (vllm.ok()) {
      CheckResolved(*vllm, text);
    } else {
      CheckError(vllm.status(), text);
    }
    auto model = kvindex::ParseServedModel(text);
    if (model.ok() && model->empty()) Fail("an empty model id", "", text);
    if (!model.ok()) CheckError(model.status(), text);
  } catch (const std::exception& e) {
    Fail("exception", e.what(), text);
  }
  return 0;
}
