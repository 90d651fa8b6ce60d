#include "kvindex/codec/source_spec.h"

#include <doctest/doctest.h>

#include "test_util.h"

namespace kvindex {
namespace {

TEST_SUITE("source_spec") {

TEST_CASE("A --source with every key parses into one SourceConfig") {
  auto r = ParseSourceSpec(
      "vllm-0=vllm@tcp://10.0.0.1:5557,replay=tcp://10.0.0.1:5558,model=qwen,block-size=16,"
      "dp-rank=2,tenant=acme,lora=adapter,salt=s1,topic=kv,bind,hash-seed=7");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  const SourceConfig& c = r->front();
  CHECK(c.name == "vllm-0");
  CHECK(c.format == "vllm");
  CHECK(c.endpoint == "tcp://10.0.0.1:5557");
  CHECK(c.replay_endpoint == "tcp://10.0.0.1:5558");
  CHECK(c.model == "qwen");
  CHECK(c.block_size == 16);
  CHECK(c.dp_rank == 2);
  CHECK(c.tenant == "acme");
  CHECK(c.lora == "adapter");
  CHECK(c.salt == "s1");
  CHECK(c.topic == "kv");
  CHECK(c.bind);
  CHECK(c.hash_seed == 7);
  CHECK_FALSE(c.hash_standard);
}

TEST_CASE("The endpoint is everything up to the first comma, and defaults apply") {
  auto r = ParseSourceSpec("a=AUTO@ipc:///tmp/x.sock");
  REQUIRE(r.ok());
  CHECK(r->front().endpoint == "ipc:///tmp/x.sock");
  CHECK(r->front().format == "auto");
  CHECK(r->front().tenant == "default");
  CHECK(r->front().block_size == 0);
  CHECK_FALSE(r->front().dp_rank.has_value());
  CHECK(r->front().hash_seed == kDefaultHashSeed);
}

TEST_CASE("dp-size expands into one source per rank on port + r, replay port + r") {
  auto r = ParseSourceSpec("e=vllm@tcp://h:5557,replay=tcp://h:6557,dp-size=3,model=m");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  for (int i = 0; i < 3; ++i) {
    const SourceConfig& c = (*r)[static_cast<size_t>(i)];
    CHECK(c.name == "e");
    CHECK(c.dp_rank == i);
    CHECK(c.dp_size == 1);
    CHECK(c.endpoint == "tcp://h:" + std::to_string(5557 + i));
    CHECK(c.replay_endpoint == "tcp://h:" + std::to_string(6557 + i));
    CHECK(c.model == "m");
  }
  // ipc: rank r > 0 on PATH_dp<r> (sglang_dp_report_test); a path-less one has nothing to name.
  CHECK(ParseSourceSpec("e=vllm@ipc:///x,dp-size=2").ok());
  CHECK_FALSE(ParseSourceSpec("e=vllm@tcp://h,dp-size=2").ok());
  CHECK_FALSE(ParseSourceSpec("e=vllm@tcp://h:65535,dp-size=2").ok());
}

TEST_CASE("Store sources: serves lists and hash=standard") {
  auto r = ParseSourceSpec("store=mooncake@tcp://h:19997,serves=a+b,hash=standard");
  REQUIRE(r.ok());
  CHECK(r->front().serves == std::vector<std::string>{"a", "b"});
  CHECK(r->front().hash_standard);
  CHECK(r->front().is_store());
  auto all = ParseSourceSpec("store=mooncake@tcp://h:19997,serves=*");
  REQUIRE(all.ok());
  CHECK(all->front().serves_all());
  CHECK_FALSE(ParseSourceSpec("store=mooncake@tcp://h:1,serves=*+a").ok());
}

TEST_CASE("Bad --source values fail with one line naming the part") {
  struct Case {
    const char* spec;
    const char* says;
  };
  const Case cases[] = {
      {"novalue", "expected NAME=FORMAT@ENDPOINT"},
      {"a=vllm", "expected NAME=FORMAT@ENDPOINT"},
      {"=vllm@tcp://h:1", "empty instance name"},
      {"a=kafka@tcp://h:1", "unknown format 'kafka'"},
      {"a=vllm@", "empty endpoint"},
      {"a=vllm@tcp://h:1,blok-size=4", "unknown key 'blok-size'"},
      {"a=vllm@tcp://h:1,block-size=0", "block-size must be a positive integer"},
      {"a=vllm@tcp://h:1,block-size=x", "block-size must be a positive integer"},
      {"a=vllm@tcp://h:1,dp-rank=-1", "dp-rank must be a non-negative integer"},
      {"a=vllm@tcp://h:1,dp-size=0", "dp-size must be an integer"},
      {"a=vllm@tcp://h:1,hash=md5", "hash must be 'standard'"},
      {"a=vllm@tcp://h:1,model", "key 'model' needs a value"},
      {"a=vllm@tcp://h:1,bind=maybe", "bind takes no value"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.spec);
    auto r = ParseSourceSpec(c.spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(c.says) != std::string::npos);
    CHECK(r.status().message().find(c.spec) != std::string::npos);
    CHECK(r.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("The upstream conductor's example config parses, honouring instance_id") {
  const auto path = test::TestDataDir() / "mooncake/conductor_config.json";
  auto r = ParseSourcesConfig(test::ReadFile(path), "conductor_config.json");
  REQUIRE(r.ok());
  REQUIRE(r->sources.size() == 2);
  CHECK(r->http_port == 13333);
  // Both entries name instance_id "vllm-prefill-node1"; upstream ignores it (docs/cli.md
  // "Sources"), kvindex honours it, so the Mooncake store's blocks belong to that instance.
  for (const SourceConfig& c : r->sources) {
    CHECK(c.name == "vllm-prefill-node1");
    CHECK(c.model == "qwen2.5");
    CHECK(c.lora == "xx-adapter");
    CHECK(c.block_size == 128);
    CHECK(c.dp_rank == 0);
    CHECK(c.tenant == "default");
  }
  CHECK(r->sources[0].format == "mooncake");  // keys are read in sorted order: "mooncake" first
  CHECK(r->sources[0].endpoint == "tcp://127.0.0.1:6667");
  CHECK(r->sources[1].format == "vllm");
  CHECK(r->sources[1].replay_endpoint == "tcp://127.0.0.1:5558");
}

TEST_CASE("The README's ip/port form, lora_id, numeric tenants and kvindex keys are accepted") {
  auto r = ParseSourcesConfig(R"({"kvevent_instance": {
      "vllm-1": {"ip": "127.0.0.1", "port": 5557, "type": "vLLM", "modelname": "q", "lora_id": -1},
      "lora": {"endpoint": "tcp://h:1", "type": "sglang", "lora_id": 3, "tenant_id": 42},
      "store": {"endpoint": "tcp://h:2", "type": "Mooncake", "serves": ["vllm-1"], "hash": "standard"},
      "dp": {"endpoint": "tcp://h:7000", "type": "vllm", "dp_size": 2}}})",
                              "c.json");
  REQUIRE(r.ok());
  CHECK_FALSE(r->http_port.has_value());
  REQUIRE(r->sources.size() == 5);
  // nlohmann orders object keys: dp, dp, lora, store, vllm-1.
  CHECK(r->sources[0].endpoint == "tcp://h:7000");
  CHECK(r->sources[1].endpoint == "tcp://h:7001");
  CHECK(r->sources[1].dp_rank == 1);
  CHECK(r->sources[2].lora == "id:3");
  CHECK(r->sources[2].tenant == "42");
  CHECK(r->sources[2].format == "sglang");
  CHECK(r->sources[3].serves == std::vector<std::string>{"vllm-1"});
  CHECK(r->sources[3].hash_standard);
  CHECK(r->sources[4].endpoint == "tcp://127.0.0.1:5557");
  CHECK(r->sources[4].lora.empty());
}

TEST_CASE("Bad configs fail with the file and the entry named") {
  struct Case {
    const char* json;
    const char* says;
  };
  const Case cases[] = {
      {"{", "c.json: byte"},
      {"[]", "expected a JSON object"},
      {"{}", "no 'kvevent_instance'"},
      {R"({"kvevent_instance": {}})", "is empty"},
      {R"({"kvevent_instance": {"a": {"type": "vLLM"}}})", "'a': no 'endpoint'"},
      {R"({"kvevent_instance": {"a": {"endpoint": "tcp://h:1", "type": "TGI"}}})", "unknown type 'TGI'"},
      {R"({"kvevent_instance": {"a": {"endpoint": "tcp://h:1", "block_size": "big"}}})", "'block_size'"},
      {R"({"kvevent_instance": {"a": {"endpoint": "tcp://h:1", "block_size": -4}}})", "'block_size'"},
      {R"({"kvevent_instance": {"a": 5}})", "expected an object"},
      {R"({"kvevent_instance": {"a": {"endpoint": "tcp://h:1"}}, "http_server_port": 70000})", "http_server_port"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    auto r = ParseSourcesConfig(c.json, "c.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("A source definition round-trips through its capture JSON") {
  SourceConfig c;
  c.name = "n";
  c.format = "sglang";
  c.endpoint = "tcp://h:1";
  c.replay_endpoint = "tcp://h:2";
  c.model = "m";
  c.block_size = 32;
  c.dp_rank = 3;
  c.tenant = "t";
  c.lora = "l";
  c.salt = "s";
  c.topic = "kv";
  c.serves = {"*"};
  c.bind = true;
  c.hash_standard = true;
  c.hash_seed = 99;
  auto back = SourceConfigFromJson(SourceConfigToJson(c));
  REQUIRE(back.ok());
  CHECK(back->name == c.name);
  CHECK(back->format == c.format);
  CHECK(back->endpoint == c.endpoint);
  CHECK(back->replay_endpoint == c.replay_endpoint);
  CHECK(back->model == c.model);
  CHECK(back->block_size == c.block_size);
  CHECK(back->dp_rank == c.dp_rank);
  CHECK(back->tenant == c.tenant);
  CHECK(back->lora == c.lora);
  CHECK(back->salt == c.salt);
  CHECK(back->topic == c.topic);
  CHECK(back->serves == c.serves);
  CHECK(back->bind);
  CHECK(back->hash_standard);
  CHECK(back->hash_seed == 99);
  auto minimal = SourceConfigFromJson(R"({"name":"x","future_key":[1,2]})");
  REQUIRE(minimal.ok());
  CHECK(minimal->tenant == "default");
  CHECK_FALSE(SourceConfigFromJson(R"({"format":"vllm"})").ok());
  CHECK_FALSE(SourceConfigFromJson("not json").ok());
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
