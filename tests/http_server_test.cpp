// QueryServer over loopback: every endpoint's shape, a table of bad requests, /cache with the
// upstream proxy's exact body, metrics that move as events flow, unregister during ingest, names
// that are not UTF-8.
// Expected answers are computed by hand from the events below (block size 4).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kvindex/core/utf8.h"
#include "kvindex/http/query_server.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_json.h"
#include "kvindex/query/query_service.h"
#include "http_world.h"

namespace kvindex {
namespace {

using Json = nlohmann::json;
using test::Batch;
using test::Stored;

// vllm-0 rank 0: blocks [1..4][5..8] on GPU; vllm-0 rank 1: [1..4]; vllm-1: [1..4] on GPU and CPU.
struct Fixture {
  PrefixIndex index;
  LocalBackend backend{&index};
  SourceId a0, a1, b;
  std::unique_ptr<QueryServer> server;
  std::unique_ptr<httplib::Client> client;

  explicit Fixture(bool compat = false) {
    auto world = test::FillHttpWorld(backend);
    REQUIRE(world.ok());
    a0 = world->a0;
    a1 = world->a1;
    b = world->b;
    QueryServerOptions options;
    options.port = 0;
    options.threads = 2;
    options.conductor_compat = compat;
    auto started = QueryServer::Start(index, backend, options);
    REQUIRE(started.ok());
    server = std::move(*started);
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }

  // POST and parse; returns (status, json).
  std::pair<int, Json> Post(const std::string& path, const std::string& body) {
    auto res = client->Post(path.c_str(), body, "application/json");
    REQUIRE(res);
    return {res->status, Json::parse(res->body)};
  }
  std::pair<int, std::string> Get(const std::string& path) {
    auto res = client->Get(path.c_str());
    REQUIRE(res);
    return {res->status, res->body};
  }
};

// An instance's answer; every source of the fixture is exact (nothing was lost).
Json Entry(uint64_t longest, uint64_t gpu, uint64_t cpu, Json dp) {
  return {{"longest_matched", longest},
          {"GPU", gpu},
          {"CPU", cpu},
          {"DISK", 0},
          {"DP", dp},
          {"state", "exact"}};
}

TEST_CASE("POST /query: every instance of the scope, by hand") {
  Fixture f;
  auto [code, body] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8,9,10]})");
  CHECK(code == 200);
  const Json expected = {
      {"data",
       {{"default",
         {{"vllm-0", Entry(8, 8, 0, {{"0", 8}, {"1", 4}})},
          {"vllm-1", Entry(4, 4, 4, {{"0", 4}})}}}}}};
  CHECK(body == expected);

  // instance_id restricts; an unknown model answers {"data": {}}.
  auto [c2, one] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4], "instance_id": "vllm-1"})");
  CHECK(c2 == 200);
  CHECK(one == Json{{"data", {{"default", {{"vllm-1", Entry(4, 4, 4, {{"0", 4}})}}}}}});
  auto [c3, none] = f.Post("/query", R"({"model": "other", "token_ids": [1,2,3,4]})");
  CHECK(c3 == 200);
  CHECK(none == Json{{"data", Json::object()}});
  // A block size that was not stored matches nothing (zeros listed).
  auto [c4, bs] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8], "block_size": 8})");
  CHECK(c4 == 200);
  CHECK(bs["data"]["default"]["vllm-0"]["longest_matched"] == 0);
}

TEST_CASE("POST /query_by_hash: engine hashes") {
  Fixture f;
  auto [code, body] = f.Post("/query_by_hash", R"({"model": "m", "block_hash": [11, 12]})");
  CHECK(code == 200);
  CHECK(body["data"]["default"]["vllm-0"]["longest_matched"] == 8);
  CHECK(body["data"]["default"]["vllm-1"]["longest_matched"] == 0);
}

TEST_CASE("--compat conductor: no data wrapper") {
  Fixture f(true);
  auto [code, body] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  CHECK(code == 200);
  CHECK(body["default"]["vllm-1"] == Entry(4, 4, 4, {{"0", 4}}));
  CHECK(!body.contains("data"));
}

TEST_CASE("POST /cache with the upstream proxy's exact body (hosts, model_name, lora_id -1)") {
  Fixture f;
  // cache_aware_disagg_proxy.py sends the prefill *hosts*.
  auto [code, body] = f.Post(
      "/cache",
      R"({"instances": ["10.0.0.5", "10.0.0.6", "10.0.0.9"], "token_ids": [1,2,3,4,5,6,7,8], "model_name": "m", "lora_id": -1})");
  CHECK(code == 200);
  const Json exact = {{"state", "exact"}};
  // The trust states beside HitStatus; a name that is no instance has none.
  CHECK(body == Json{{"HitStatus", {{"10.0.0.5", 8}, {"10.0.0.6", 4}, {"10.0.0.9", 0}}},
                     {"InstanceState", {{"10.0.0.5", exact}, {"10.0.0.6", exact}}}});
  // Instance names work too.
  auto [c2, named] = f.Post(
      "/cache", R"({"instances": ["vllm-1"], "token_ids": [1,2,3,4], "model_name": "m", "lora_id": -1})");
  CHECK(c2 == 200);
  CHECK(named == Json{{"HitStatus", {{"vllm-1", 4}}}, {"InstanceState", {{"vllm-1", exact}}}});
}

TEST_CASE("A body nested 100,000 levels deep is a 400 on every endpoint, never a crash") {
  Fixture f;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const char* path : {"/query", "/query_by_hash", "/cache", "/register", "/unregister"}) {
    CAPTURE(path);
    for (const std::string& body : {deep, "{\"model\": " + deep + "}",
                                    "{\"model\": \"m\", \"x\": " + deep + "}"}) {
      auto [code, answer] = f.Post(path, body);
      CHECK(code == 400);
      CHECK(answer.contains("error"));
    }
  }
  // The index still answers.
  auto [code, body] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  CHECK(code == 200);
}

TEST_CASE("Bad requests: status codes and JSON error bodies") {
  Fixture f;
  struct Case {
    const char* method;
    const char* path;
    std::string body;
    int status;
  };
  const std::string huge_tokens = [] {
    std::string s = R"({"model": "m", "token_ids": [)";
    for (int i = 0; i < (1 << 20) + 1; ++i) s += i == 0 ? "1" : ",1";
    return s + "]}";
  }();
  const std::vector<Case> cases = {
      {"POST", "/query", "{not json", 400},
      {"POST", "/query", "[]", 400},
      {"POST", "/query", R"({"token_ids": [1,2,3,4]})", 400},                 // no model
      {"POST", "/query", R"({"model": "m"})", 400},                            // no tokens
      {"POST", "/query", R"({"model": 5, "token_ids": [1]})", 400},            // wrong type
      {"POST", "/query", R"({"model": "m", "token_ids": "1,2"})", 400},        // wrong type
      {"POST", "/query", R"({"model": "m", "token_ids": [4294967296]})", 400},  // beyond u32
      {"POST", "/query", R"({"model": "m", "token_ids": [-1]})", 400},
      {"POST", "/query", R"({"model": "m", "token_ids": [1], "block_size": 0})", 400},
      {"POST", "/query", R"({"model": "m", "token_ids": [1], "lora_id": 3, "lora_name": "x"})", 400},
      {"POST", "/query", huge_tokens, 400},                                    // > 1 M ids
      {"POST", "/query_by_hash", R"({"model": "m"})", 400},
      {"POST", "/cache", R"({"token_ids": [1]})", 400},
      {"POST", "/unregister", R"({})", 400},
      {"POST", "/unregister", R"({"instance_id": "nobody"})", 404},
      {"POST", "/register", R"({"instance_id": 7})", 400},
      {"GET", "/query", "", 405},
      {"PUT", "/query", "{}", 405},
      {"POST", "/metrics", "", 405},
      {"DELETE", "/healthz", "", 405},
      {"GET", "/nope", "", 404},
      {"POST", "/", "", 404},
  };
  for (const Case& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.path);
    CAPTURE(c.body.substr(0, 80));
    httplib::Request req;
    req.method = c.method;
    req.path = c.path;
    req.body = c.body;
    if (!c.body.empty()) req.set_header("Content-Type", "application/json");
    auto res = f.client->send(req);
    REQUIRE(res);
    CHECK(res->status == c.status);
    CHECK(res->get_header_value("Content-Type") == "application/json");
    const Json error = Json::parse(res->body, nullptr, false);
    REQUIRE(error.is_object());
    CHECK(error.contains("error"));
    CHECK(error["error"].is_string());
  }
  // Over 16 MiB: 413 with the JSON error body, over the wire (the server answers before reading the
  // body and drops the rest of it, so the client still sending reads the answer) ...
  {
    httplib::Client big("127.0.0.1", f.server->port());
    auto res = big.Post("/query", std::string(kMaxQueryBodyBytes + 1, ' '), "application/json");
    REQUIRE(res);
    CHECK(res->status == 413);
    CHECK(res->get_header_value("Content-Type") == "application/json");
    CHECK(res->body == QueryService::TransportErrorBody(413));
    CHECK(Json::parse(res->body).contains("error"));
  }
  // ... and from the dispatcher behind it.
  std::string out, type;
  CHECK(f.server->Handle("POST", "/query", std::string(kMaxQueryBodyBytes + 1, ' '), out, type) ==
        413);
  CHECK(Json::parse(out).contains("error"));
  // Still serving.
  CHECK(f.Get("/healthz").first == 200);
}

TEST_CASE("GET /healthz, /instances, /global_view") {
  Fixture f;
  auto [hc, health] = f.Get("/healthz");
  CHECK(hc == 200);
  CHECK(Json::parse(health)["status"] == "ok");
  auto [ic, instances] = f.Get("/instances");
  CHECK(ic == 200);
  const Json inst = Json::parse(instances);
  REQUIRE(inst["sources"].size() == 3);
  CHECK(inst["sources"][0]["name"] == "vllm-0/dp0");
  CHECK(inst["sources"][1]["name"] == "vllm-0/dp1");
  CHECK(inst["sources"][1]["dp_rank"] == 1);
  CHECK(inst["sources"][0]["counters"]["applied"] == 1);
  CHECK(inst["sources"][2]["counters"]["applied"] == 2);
  CHECK(inst["instances"]["vllm-1"]["tiers"]["CPU"] == 1);
  auto [gc, view] = f.Get("/global_view");
  CHECK(gc == 200);
  const Json g = Json::parse(view);
  CHECK(g["context_count"] == 3);
  CHECK(g["model_contexts"][0]["model_name"] == "m");
  CHECK(g["model_contexts"][0]["block_size"] == 4);
  CHECK(g["blocks"] == 2);  // [1..4] and [1..4][5..8] in one scope
}

// The value of the metric line that starts with `prefix` (-1 when absent).
double Metric(const std::string& text, const std::string& prefix) {
  size_t pos = 0;
  while ((pos = text.find(prefix, pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      const size_t end = text.find('\n', pos);
      return std::stod(text.substr(pos + prefix.size(), end - pos - prefix.size()));
    }
    ++pos;
  }
  return -1;
}

TEST_CASE("GET /metrics moves as events and queries flow") {
  Fixture f;
  auto [code, before] = f.Get("/metrics");
  CHECK(code == 200);
  CHECK(Metric(before, "kvindex_source_applied_total{source=\"vllm-1/dp0\",instance=\"vllm-1\"} ") == 2);
  CHECK(Metric(before, "kvindex_resident_blocks{instance=\"vllm-0\",tier=\"GPU\"} ") == 3);
  CHECK(Metric(before, "kvindex_http_query_duration_seconds_count ") == 0);
  REQUIRE(f.backend.Apply(f.b, Batch({Stored({32}, 31, {5, 6, 7, 8})})).ok());
  f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  f.Post("/query", "bad");
  auto [c2, after] = f.Get("/metrics");
  CHECK(Metric(after, "kvindex_source_applied_total{source=\"vllm-1/dp0\",instance=\"vllm-1\"} ") == 3);
  CHECK(Metric(after, "kvindex_resident_blocks{instance=\"vllm-1\",tier=\"GPU\"} ") == 2);
  CHECK(Metric(after, "kvindex_http_query_duration_seconds_count ") == 3);
  CHECK(Metric(after, "kvindex_http_query_duration_seconds_bucket{le=\"+Inf\"} ") == 3);
  CHECK(Metric(after, "kvindex_http_requests_total{endpoint=\"/query\",code=\"200\"} ") == 2);
  CHECK(Metric(after, "kvindex_http_requests_total{endpoint=\"/query\",code=\"400\"} ") == 1);
  CHECK(Metric(after, "kvindex_index_bytes_per_presence ") > 0);
}

TEST_CASE("Names that are not UTF-8 are answered as valid UTF-8 on every endpoint") {
  Fixture f;
  // An instance name and a tier name with bytes that are not UTF-8 (a lone continuation byte, a
  // truncated 3-byte sequence): each maximal bad subpart becomes U+FFFD (EF BF BD).
  auto bad = f.backend.AddSource(test::HttpWorldSource("bad\x80name", "tcp://10.0.0.7:5557", 0));
  REQUIRE(bad.ok());
  REQUIRE(f.backend.Apply(*bad, Batch({Stored({41}, std::nullopt, {1, 2, 3, 4})})).ok());
  REQUIRE(f.backend.Apply(*bad, Batch({Stored({41}, std::nullopt, {1, 2, 3, 4},
                                              Tier::Other("hb\xe2\x82"))}))
              .ok());
  const std::string shown = "bad\xEF\xBF\xBDname";
  const std::string bad_tier = "HB\xEF\xBF\xBD";
  const auto raw_post = [&](const char* path, const std::string& body) {
    auto res = f.client->Post(path, body, "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    return res->body;
  };
  const std::string query = raw_post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  const std::string cache = raw_post(
      "/cache", R"({"instances": ["bad\ufffdname", "vllm-1"], "token_ids": [1,2,3,4], "model_name": "m"})");
  const std::string instances = f.Get("/instances").second;
  const std::string global = f.Get("/global_view").second;
  const std::string metrics = f.Get("/metrics").second;
  for (const std::string* body : {&query, &cache, &instances, &global, &metrics}) {
    CAPTURE(*body);
    CHECK(IsValidUtf8(*body));
    CHECK(body->find(std::string("bad\x80")) == std::string::npos);
  }
  CHECK(Json::parse(query)["data"]["default"][shown]["longest_matched"] == 4);
  CHECK(Json::parse(query)["data"]["default"][shown][bad_tier] == 4);
  CHECK(Json::parse(cache)["HitStatus"][shown] == 0);  // the index names it with the raw byte
  CHECK(Json::parse(instances)["instances"][shown]["tiers"][bad_tier] == 1);
  CHECK(Json::parse(global)["instances"][shown]["tiers"]["GPU"] == 1);
  CHECK(Metric(metrics, "kvindex_resident_blocks{instance=\"" + shown + "\",tier=\"" + bad_tier +
                            "\"} ") == 1);
  CHECK(Metric(metrics, "kvindex_source_applied_total{source=\"" + shown + "/dp0\",instance=\"" +
                            shown + "\"} ") == 2);
}

TEST_CASE("POST /unregister purges presence while ingest runs") {
  Fixture f;
  std::atomic<bool> stop{false};
  // Ingest keeps storing and removing on vllm-0 while the HTTP thread unregisters vllm-1.
  std::thread writer([&] {
    uint64_t h = 1000;
    while (!stop.load()) {
      (void)f.backend.Apply(f.a0, Batch({Stored({h}, 12, {9, 10, 11, 12})}));
      (void)f.backend.Apply(f.a0, Batch({test::Removed({h})}));
      ++h;
    }
  });
  auto [code, body] = f.Post("/unregister", R"({"instance_id": "vllm-1", "tenant_id": "default", "dp_rank": 0})");
  CHECK(code == 200);
  CHECK(body["removed_instances"] == Json::array({"vllm-1"}));
  CHECK(body["status"] == "unregistered successfully");
  CHECK(body["removed_presences"] == 2);
  auto [qc, q] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4,5,6,7,8]})");
  CHECK(qc == 200);
  CHECK(!q["data"]["default"].contains("vllm-1"));
  CHECK(q["data"]["default"]["vllm-0"]["longest_matched"] == 8);
  stop = true;
  writer.join();
  // Unregistering again: not found.
  CHECK(f.Post("/unregister", R"({"instance_id": "vllm-1"})").first == 404);
  // Register (the conductor's body) lists a new instance.
  auto [rc, reg] = f.Post("/register", R"({"endpoint": "tcp://10.0.0.7:5557", "type": "vLLM",
      "modelname": "m", "instance_id": "vllm-2", "block_size": 4, "dp_rank": 0})");
  CHECK(rc == 200);
  CHECK(reg == Json{{"instance_id", "vllm-2"}, {"status", "registered successfully"}});
  auto [q2c, q2] = f.Post("/query", R"({"model": "m", "token_ids": [1,2,3,4]})");
  CHECK(q2["data"]["default"]["vllm-2"]["longest_matched"] == 0);
}

TEST_CASE("POST /register is all or nothing") {
  Fixture f;
  auto [ic, before] = f.Get("/instances");
  auto [gc, view] = f.Get("/global_view");
  REQUIRE(ic == 200);
  // dp_size 3 of vllm-0: ranks 0 and 1 are registered already, rank 2 is new -> none is added.
  auto [rc, reg] = f.Post("/register", R"({"endpoint": "tcp://10.0.0.7:5557", "type": "vLLM",
      "modelname": "m", "instance_id": "vllm-0", "block_size": 4, "dp_size": 3})");
  CHECK(rc == 400);
  CHECK(reg["error"].get<std::string>().find("'vllm-0/dp0' is already registered") !=
        std::string::npos);
  CHECK(f.Get("/instances").second == before);
  CHECK(f.Get("/global_view").second == view);
}

TEST_CASE("Stop() is graceful and idempotent; the port is released") {
  Fixture f;
  const uint16_t port = f.server->port();
  f.server->Stop();
  f.server->Stop();
  httplib::Client late("127.0.0.1", port);
  late.set_connection_timeout(1, 0);
  CHECK(!late.Get("/healthz"));
  PrefixIndex index;
  LocalBackend backend(&index);
  QueryServerOptions options;
  options.port = port;
  auto again = QueryServer::Start(index, backend, options);
  CHECK(again.ok());
}

}  // namespace
}  // namespace kvindex
