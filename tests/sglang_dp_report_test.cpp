// SGLang's data-parallel layouts as discovery and `dp-size` read them (docs/wire-formats.md
// "Endpoint discovery"): the structured `kv_events` descriptor of /server_info, a publisher that
// connects (an endpoint with a concrete host: kvindex binds port + r) and ipc endpoints named
// `PATH_dp<r>`. Answers written out by hand from SGLang's descriptor shape.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/codec/engine_report.h"
#include "kvindex/codec/source_spec.h"

namespace kvindex {
namespace {

EngineSourceSpec Spec(const std::string& text) {
  auto spec = ParseEngineSourceSpec(text);
  REQUIRE_MESSAGE(spec.ok(), spec.status().ToString());
  return *spec;
}

std::vector<SourceConfig> Resolve(const std::string& body, const std::string& spec) {
  auto report = ParseSglangServerInfo(body);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  auto sources = ResolveEngineSource(Spec(spec), *report);
  REQUIRE_MESSAGE(sources.ok(), sources.status().ToString());
  return *sources;
}

TEST_SUITE("engine_report") {

TEST_CASE("SGLang's kv_events descriptor: base port + rank, topic, block size, DP size") {
  // The descriptor wins over the raw configuration and page_size; the replay endpoint only the
  // configuration names.
  const std::string body =
      R"({"served_model_name": "q", "page_size": 1, "dp_size": 1,)"
      R"( "kv_events_config": "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:1\",)"
      R"( \"replay_endpoint\": \"tcp://*:6600\"}",)"
      R"( "kv_events": {"publisher": "zmq", "endpoint_host": "*", "endpoint_port_base": 6557,)"
      R"( "topic": "kv", "block_size": 16, "dp_size": 3}})";
  const auto sources = Resolve(body, "e=auto@http://10.0.0.7:30000");
  REQUIRE(sources.size() == 3);
  for (uint32_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(sources[r].endpoint == "tcp://10.0.0.7:" + std::to_string(6557 + r));
    CHECK(sources[r].replay_endpoint == "tcp://10.0.0.7:" + std::to_string(6600 + r));
    CHECK(sources[r].dp_rank == static_cast<DpRank>(r));
    CHECK(sources[r].topic == "kv");
    CHECK(sources[r].block_size == 16);
    CHECK(sources[r].model == "q");
    CHECK_FALSE(sources[r].bind);
  }
  // Without a configuration string: no replay. A bare IPv6 host is bracketed.
  const auto v6 = Resolve(
      R"({"model_path": "m", "kv_events": {"publisher": "zmq", "endpoint_host": "::",)"
      R"( "endpoint_port_base": 5557, "topic": "", "block_size": 4, "dp_size": 1}})",
      "e=auto@http://[fd00::2]:1");
  REQUIRE(v6.size() == 1);
  CHECK(v6[0].endpoint == "tcp://[fd00::2]:5557");
  CHECK(v6[0].replay_endpoint.empty());
}

TEST_CASE("An SGLang endpoint with a concrete host connects: kvindex binds port + rank") {
  for (const std::string& body :
       {std::string(R"({"model_path": "m", "page_size": 4, "dp_size": 2, "kv_events_config":)"
                    R"( "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://10.0.0.9:5557\"}"})"),
        std::string(R"({"model_path": "m", "kv_events": {"publisher": "zmq", "endpoint_host":)"
                    R"( "10.0.0.9", "endpoint_port_base": 5557, "block_size": 4,)"
                    R"( "dp_size": 2}})")}) {
    CAPTURE(body);
    const auto sources = Resolve(body, "e=auto@http://10.0.0.1:30000");
    REQUIRE(sources.size() == 2);
    CHECK(sources[0].endpoint == "tcp://10.0.0.9:5557");
    CHECK(sources[1].endpoint == "tcp://10.0.0.9:5558");
    CHECK(sources[0].bind);
    CHECK(sources[1].bind);
  }
  // A wildcard anywhere in the text makes SGLang bind, as its publisher tests it.
  for (const char* endpoint : {"tcp://*:5557", "tcp://0.0.0.0:5557", "tcp://[::]:5557"}) {
    const std::string body = std::string(R"({"model_path": "m", "kv_events_config":)") +
                             R"( "{\"publisher\": \"zmq\", \"endpoint\": \")" + endpoint +
                             R"(\"}"})";
    CAPTURE(endpoint);
    const auto sources = Resolve(body, "e=auto@http://10.0.0.1:30000");
    REQUIRE(sources.size() == 1);
    CHECK(sources[0].endpoint == "tcp://10.0.0.1:5557");
    CHECK_FALSE(sources[0].bind);
  }
}

TEST_CASE("A descriptor that names no publisher is refused in one line") {
  struct Case {
    const char* body;
    StatusCode code;
  };
  for (const Case& c : {
           Case{R"({"kv_events": {"publisher": "null"}})", StatusCode::kNotFound},
           Case{R"({"kv_events": {"publisher": "kafka", "endpoint_host": "*"}})",
                StatusCode::kUnsupported},
           Case{R"({"kv_events": {"publisher": "zmq", "endpoint_host": "*"}})",
                StatusCode::kNotFound},
           Case{R"({"kv_events": {"publisher": "zmq", "endpoint_host": "*",)"
                R"( "endpoint_port_base": 70000}})",
                StatusCode::kMalformed},
           Case{R"({"kv_events": {"publisher": "zmq", "endpoint_host": 5}})",
                StatusCode::kMalformed},
           Case{R"({"kv_events": [1]})", StatusCode::kMalformed},
           Case{R"({"kv_events": null, "kv_events_config": null})", StatusCode::kNotFound},
       }) {
    CAPTURE(c.body);
    auto r = ParseSglangServerInfo(c.body);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("dp-size over an ipc endpoint: rank r > 0 on PATH_dp<r>") {
  auto spec = ParseSourceSpec("e=trtllm@ipc:///tmp/kv,dp-size=3,replay=ipc:///tmp/rp,model=m");
  REQUIRE_MESSAGE(spec.ok(), spec.status().ToString());
  REQUIRE(spec->size() == 3);
  CHECK((*spec)[0].endpoint == "ipc:///tmp/kv");
  CHECK((*spec)[1].endpoint == "ipc:///tmp/kv_dp1");
  CHECK((*spec)[2].endpoint == "ipc:///tmp/kv_dp2");
  CHECK((*spec)[2].replay_endpoint == "ipc:///tmp/rp_dp2");
  CHECK((*spec)[2].dp_rank == 2);
  CHECK(*OffsetEndpointPort("inproc://cache", 1) == "inproc://cache_dp1");
  CHECK(OffsetEndpointPort("ipc://", 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(OffsetEndpointPort("tcp://h", 1).status().code() == StatusCode::kInvalidArgument);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
