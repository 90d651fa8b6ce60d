// The endpoint-discovery parsers (codec/engine_report.h) and the `auto@http://` spec: the
// engines' answer shapes of docs/wire-formats.md "Endpoint discovery", written out by hand, and
// hostile answers (wrong types, huge numbers, deep nesting, oversized bodies, JSON inside the
// JSON string that is itself bad).
#include "kvindex/codec/engine_report.h"

#include <string>

#include <doctest/doctest.h>

#include "kvindex/codec/source_spec.h"

namespace kvindex {
namespace {

EngineSourceSpec Spec(const std::string& text) {
  auto spec = ParseEngineSourceSpec(text);
  REQUIRE_MESSAGE(spec.ok(), spec.status().ToString());
  return *spec;
}

// An SGLang /server_info body around `kv` (the kv_events_config string's JSON text).
std::string Info(const std::string& kv, const std::string& extra = "") {
  std::string escaped;
  for (char c : kv) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  return "{\"model_path\": \"org/weights\", \"served_model_name\": \"served\", \"page_size\": 32, "
         "\"dp_size\": 2, \"kv_events_config\": \"" + escaped + "\"" + extra + "}";
}

TEST_SUITE("engine_report") {

TEST_CASE("The auto@http:// spec is told apart and checked") {
  CHECK(IsEngineSourceSpec("e=auto@http://h:1"));
  CHECK(IsEngineSourceSpec("e=AUTO@HTTP://h:1,model=m"));
  CHECK_FALSE(IsEngineSourceSpec("e=auto@tcp://h:1"));
  CHECK_FALSE(IsEngineSourceSpec("e=sglang@http://h:1"));
  CHECK_FALSE(IsEngineSourceSpec("auto@http://h:1"));
  auto refused = ParseSourceSpec("e=auto@http://h:1");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  const EngineSourceSpec spec = Spec("e=auto@http://[::1]:8000,model=m,dp-size=3,dp-rank=4");
  CHECK(spec.engine_host == "::1");
  CHECK(spec.engine_port == 8000);
  CHECK(spec.dp_size_given);
  CHECK(spec.config.dp_size == 3);
  CHECK(spec.config.model == "m");
  CHECK_FALSE(Spec("e=auto@http://h:1/").dp_size_given);
  for (const char* bad : {"e=auto@http://h", "e=auto@http://h:0", "e=auto@http://h:1/x",
                          "e=auto@http://h:1,bind", "e=auto@http://h:1,serves=a",
                          "e=auto@http://h:1,nope=1", "e=auto@http://:1"}) {
    auto r = ParseEngineSourceSpec(bad);
    CHECK_MESSAGE(!r.ok(), bad);
    if (!r.ok()) CHECK(r.status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("SGLang's /server_info: endpoint, replay, topic, page size, DP size and model") {
  auto r = ParseSglangServerInfo(Info(
      R"({"publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5600",)"
      R"( "topic": "kv", "buffer_steps": 10000, "hwm": 100000})"));
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->format == "sglang");
  REQUIRE(r->publishers.size() == 1);
  CHECK(r->publishers[0].endpoint == "tcp://*:5557");
  CHECK(r->publishers[0].replay_endpoint == "tcp://*:5600");
  CHECK(r->publishers[0].topic == "kv");
  CHECK(r->block_size == 32);
  CHECK(r->dp_size == 2);
  CHECK(r->model == "served");

  auto resolved = ResolveEngineSource(Spec("e=auto@http://10.1.2.3:30000"), *r);
  REQUIRE_MESSAGE(resolved.ok(), resolved.status().ToString());
  REQUIRE(resolved->size() == 2);
  CHECK((*resolved)[0].endpoint == "tcp://10.1.2.3:5557");
  CHECK((*resolved)[1].endpoint == "tcp://10.1.2.3:5558");
  CHECK((*resolved)[1].replay_endpoint == "tcp://10.1.2.3:5601");
  CHECK((*resolved)[1].dp_rank == 1);
  CHECK((*resolved)[0].format == "sglang");
  CHECK((*resolved)[0].model == "served");
  CHECK((*resolved)[0].block_size == 32);
  CHECK((*resolved)[0].topic == "kv");
  CHECK((*resolved)[0].name == "e");
}

TEST_CASE("SGLang defaults: the default endpoint, no replay, model_path without a served name") {
  auto r = ParseSglangServerInfo(
      Info(R"({"publisher": "zmq"})", ", \"served_model_name\": null, \"dp_size\": null"));
  // A duplicate key: nlohmann keeps the last; what matters is that it parses and reads one.
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->publishers[0].endpoint == "tcp://*:5557");
  CHECK(r->publishers[0].replay_endpoint.empty());
  CHECK(r->model == "org/weights");
  CHECK(r->dp_size == 0);
  auto one = ResolveEngineSource(Spec("e=auto@http://[fd00::1]:1"), *r);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK(one->front().endpoint == "tcp://[fd00::1]:5557");
}

TEST_CASE("Explicit keys win over the engine's report") {
  auto r = ParseSglangServerInfo(Info(R"({"publisher": "zmq", "endpoint": "tcp://0.0.0.0:7000",)"
                                      R"( "replay_endpoint": "tcp://[::]:7100", "topic": "kv"})"));
  REQUIRE(r.ok());
  auto resolved = ResolveEngineSource(
      Spec("e=auto@http://h:1,model=mine,block-size=8,dp-size=1,topic=t,replay=tcp://r:9"), *r);
  REQUIRE_MESSAGE(resolved.ok(), resolved.status().ToString());
  REQUIRE(resolved->size() == 1);
  const SourceConfig& c = resolved->front();
  CHECK(c.endpoint == "tcp://h:7000");
  CHECK(c.replay_endpoint == "tcp://r:9");
  CHECK(c.model == "mine");
  CHECK(c.block_size == 8);
  CHECK(c.topic == "t");
  auto wild = ResolveEngineSource(Spec("e=auto@http://h:1"), *r);
  REQUIRE(wild.ok());
  CHECK((*wild)[0].replay_endpoint == "tcp://h:7100");
  CHECK((*wild)[1].replay_endpoint == "tcp://h:7101");
}

TEST_CASE("vLLM's /kv_event_sources: one bound endpoint per rank, the model from /v1/models") {
  auto r = ParseVllmEventSources(
      R"([{"data_parallel_rank": 1, "endpoint": "tcp://10.0.0.1:40001", "replay_endpoint": null,)"
      R"( "topic": ""}, {"data_parallel_rank": 0, "endpoint": "tcp://*:40000",)"
      R"( "replay_endpoint": "tcp://10.0.0.1:41000", "topic": "kv-events"}])");
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->format == "vllm");
  REQUIRE(r->publishers.size() == 2);
  auto model = ParseServedModel(R"({"object": "list", "data": [{"id": "qwen", "object": "model"}]})");
  REQUIRE(model.ok());
  CHECK(*model == "qwen");
  r->model = *model;
  auto resolved = ResolveEngineSource(Spec("e=auto@http://10.0.0.1:8000"), *r);
  REQUIRE_MESSAGE(resolved.ok(), resolved.status().ToString());
  REQUIRE(resolved->size() == 2);
  CHECK((*resolved)[0].endpoint == "tcp://10.0.0.1:40001");
  CHECK((*resolved)[0].dp_rank == 1);
  CHECK((*resolved)[0].replay_endpoint.empty());
  CHECK((*resolved)[1].endpoint == "tcp://10.0.0.1:40000");
  CHECK((*resolved)[1].dp_rank == 0);
  CHECK((*resolved)[1].topic == "kv-events");
  CHECK((*resolved)[1].model == "qwen");
  CHECK((*resolved)[1].format == "vllm");
  auto mismatch = ResolveEngineSource(Spec("e=auto@http://h:1,dp-size=3"), *r);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.status().code() == StatusCode::kNotFound);
}

TEST_CASE("Hostile answers are one-line errors, never a crash") {
  const std::string deep(100000, '[');
  const std::string huge(kMaxEngineReportBytes + 1, ' ');
  for (const std::string& body :
       {std::string(), std::string("null"), std::string("garbage"), std::string("[]"),
        std::string("{}"), std::string("{\"kv_events_config\": 5}"),
        std::string("{\"kv_events_config\": \"\"}"), std::string("{\"kv_events_config\": \"[1]\"}"),
        std::string("{\"kv_events_config\": \"{\\\"publisher\\\": 1}\"}"),
        std::string("{\"kv_events_config\": {\"publisher\": \"zmq\", \"endpoint\": 7}}"),
        std::string("{\"kv_events_config\": \"{\\\"publisher\\\": \\\"zmq\\\"\"}"),
        Info(R"({"publisher": "zmq"})", ", \"page_size\": -1"),
        Info(R"({"publisher": "zmq"})", ", \"page_size\": 1e30"),
        Info(R"({"publisher": "zmq"})", ", \"dp_size\": 99999999999999999999"),
        Info(R"({"publisher": "zmq"})", ", \"dp_size\": 0"),
        Info(R"({"publisher": "zmq"})", ", \"served_model_name\": [\"x\"]"),
        "{\"kv_events_config\": " + deep, deep, huge}) {
    auto r = ParseSglangServerInfo(body);
    REQUIRE_FALSE_MESSAGE(r.ok(), body.substr(0, 80));
    CHECK(r.status().message().find('\n') == std::string::npos);
    CHECK(r.status().code() != StatusCode::kInvalidArgument);
  }
  for (const std::string& body :
       {std::string("{}"), std::string("[1]"), std::string("[{}]"),
        std::string("[{\"endpoint\": 1}]"),
        std::string("[{\"endpoint\": \"tcp://h:1\", \"data_parallel_rank\": -1}]"),
        std::string("[{\"endpoint\": \"tcp://h:1\", \"data_parallel_rank\": 1.5}]"),
        std::string("[{\"endpoint\": \"tcp://h:1\", \"topic\": {}}]"), deep, huge}) {
    CHECK_FALSE_MESSAGE(ParseVllmEventSources(body).ok(), body.substr(0, 80));
  }
  for (const std::string& body :
       {std::string("[]"), std::string("{\"data\": []}"), std::string("{\"data\": [1]}"),
        std::string("{\"data\": [{\"id\": 3}]}"), std::string("{\"data\": [{\"id\": \"\"}]}"),
        std::string("{\"data\": {}}"), deep}) {
    CHECK_FALSE_MESSAGE(ParseServedModel(body).ok(), body.substr(0, 80));
  }
}

TEST_CASE("Reported endpoints kvindex cannot connect to are refused") {
  EngineReport report;
  report.format = "vllm";
  report.model = "m";
  for (const char* endpoint : {"ipc:///tmp/kv", "inproc://cache", "tcp://h", "tcp://h:0",
                               "tcp://h:1/x", "tcp://h :1", ""}) {
    report.publishers = {EnginePublisher{endpoint, "", "", std::nullopt}};
    CHECK_FALSE_MESSAGE(ResolveEngineSource(Spec("e=auto@http://h:1"), report).ok(), endpoint);
  }
  report.publishers.clear();
  CHECK_FALSE(ResolveEngineSource(Spec("e=auto@http://h:1"), report).ok());
  report.publishers = {EnginePublisher{"tcp://*:65535", "", "", std::nullopt}};
  report.format = "sglang";
  report.dp_size = 2;  // rank 1 would be port 65536
  CHECK_FALSE(ResolveEngineSource(Spec("e=auto@http://h:1"), report).ok());
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
