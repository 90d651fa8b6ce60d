#include "engine_discovery.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include <httplib.h>

#include "kvindex/codec/engine_report.h"

namespace kvindex::cli {
namespace {

// One GET: the HTTP status and at most kMaxEngineReportBytes + 1 bytes of body, or why none.
struct Answer {
  int status = 0;  // 0: no answer (see `error`)
  std::string body;
  std::string error;
  bool retryable() const { return status == 0 || status >= 500; }
};

Answer Get(const EngineSourceSpec& spec, const char* path) {
  httplib::Client client(spec.engine_host, spec.engine_port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  client.set_write_timeout(5, 0);
  Answer answer;
  httplib::Result res = client.Get(path, [&](const char* data, size_t length) {
    answer.body.append(data, length);
    return answer.body.size() <= kMaxEngineReportBytes;  // stops reading a runaway body
  });
  if (!res) {
    if (answer.body.size() > kMaxEngineReportBytes) {
      answer.status = 200;  // ParseBody refuses the size with a clear message
      return answer;
    }
    const httplib::Error error = res.error();
    answer.error = error == httplib::Error::Connection ? std::string("cannot connect")
                   : error == httplib::Error::Read     ? std::string("no answer in time")
                                                       : httplib::to_string(error);
    return answer;
  }
  answer.status = res->status;
  return answer;
}

std::string Describe(const char* path, const Answer& answer) {
  return std::string("GET ") + path + ": " +
         (answer.status == 0 ? answer.error : "HTTP " + std::to_string(answer.status));
}

// One round of questions. nullopt: the engine is not (yet) reachable, `unreachable` says how.
std::optional<Result<std::vector<SourceConfig>>> AskOnce(const EngineSourceSpec& spec,
                                                         std::string& unreachable) {
  const Answer info = Get(spec, "/server_info");
  if (info.retryable()) {
    unreachable = Describe("/server_info", info);
    return std::nullopt;
  }
  std::optional<Status> sglang_error;
  if (info.status == 200) {
    auto report = ParseSglangServerInfo(info.body);
    if (report.ok()) return ResolveEngineSource(spec, *report);
    // An SGLang-shaped answer without event configuration may still be a vLLM engine's.
    if (report.status().code() != StatusCode::kNotFound) return report.status();
    sglang_error = report.status();
  }
  const Answer sources = Get(spec, "/kv_event_sources");
  if (sources.status == 200) {
    KVINDEX_ASSIGN_OR_RETURN(EngineReport report, ParseVllmEventSources(sources.body));
    if (spec.config.model.empty()) {
      const Answer models = Get(spec, "/v1/models");
      if (models.status == 200) {
        KVINDEX_ASSIGN_OR_RETURN(report.model, ParseServedModel(models.body));
      }
    }
    return ResolveEngineSource(spec, report);
  }
  if (sglang_error) return *sglang_error;
  if (sources.retryable()) {
    unreachable = Describe("/kv_event_sources", sources);
    return std::nullopt;
  }
  return Status::NotFound("the engine reports no event endpoint (" +
                          Describe("/server_info", info) + ", " +
                          Describe("/kv_event_sources", sources) + ")");
}

}  // namespace

Result<std::vector<SourceConfig>> DiscoverEngineSources(const EngineSourceSpec& spec,
                                                        double wait_s) {
  const std::string where = "source '" + spec.config.name + "' (" + spec.config.endpoint + ")";
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(wait_s);
  for (;;) {
    std::string unreachable;
    auto result = AskOnce(spec, unreachable);
    if (result) {
      if (!result->ok()) {
        const Status& s = result->status();
        // The spec was checked already: what the engine said is a runtime error (exit 1).
        const StatusCode code =
            s.code() == StatusCode::kInvalidArgument ? StatusCode::kUnsupported : s.code();
        return Status(code, where + ": " + s.message());
      }
      return std::move(*result);
    }
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(500) > deadline) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", waited);
      return Status::Unavailable(where + ": the engine is not reachable: " + unreachable +
                                 " (waited " + buf + " s; --auto-timeout S keeps asking)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace kvindex::cli
