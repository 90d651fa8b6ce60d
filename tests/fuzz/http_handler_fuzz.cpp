// Fuzz target for the HTTP request handler (QueryService::Handle, what the server runs for every
// request, without the transport): any method, path and body give a JSON answer with a known
// status code, never a crash, an exception or a hang. Input layout: the first line is
// "METHOD PATH", the rest is the body. The index holds a few blocks (two instances, two DP
// ranks, GPU and CPU, block size 4) so that queries walk real chains; a request that writes
// (/register, /unregister) runs against a fresh copy so that one input cannot change what the
// next one sees.
//
// Corpus (tests/fuzz/corpus/http_handler/): one real request for every endpoint — the bodies of
// docs/http-api.md, the upstream proxy's /cache body, the upstream conductor's /register and
// /unregister bodies — plus wrong methods, an unknown path and bad bodies.
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvindex/index/prefix_index.h"
#include "kvindex/query/query_service.h"
#include "kvindex/query/server_backend.h"
#include "http_world.h"

namespace {

using namespace kvindex;

struct World {
  PrefixIndex index;
  LocalBackend backend{&index};
  QueryService service{index, backend};

  World() {
    if (!test::FillHttpWorld(backend).ok()) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* shared = new World();  // read-only requests share it
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  const std::string_view line = input.substr(0, eol);
  const std::string body(eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1));
  const size_t space = line.find(' ');
  const std::string method(line.substr(0, space));
  const std::string path(space == std::string_view::npos ? std::string_view() : line.substr(space + 1));

  std::unique_ptr<World> fresh;
  World* world = shared;
  if (path == "/register" || path == "/unregister") {
    fresh = std::make_unique<World>();
    world = fresh.get();
  }
  const ServiceAnswer served = world->service.Handle(method, path, body);
  const int code = served.status;
  const std::string& out = served.body;
  const std::string_view content_type = served.content_type;
  switch (code) {
    case 200: case 400: case 404: case 405: case 413: case 501: break;
    default: std::abort();
  }
  if (path == "/metrics" && code == 200) {
    if (content_type.rfind("text/plain", 0) != 0) std::abort();
    return 0;
  }
  if (content_type != "application/json") std::abort();
  const nlohmann::json answer = nlohmann::json::parse(out, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) std::abort();
  if (code != 200) {
    // Errors are {"error": "<one line>"}.
    auto it = answer.find("error");
    if (it == answer.end() || !it->is_string() || it->get<std::string>().empty() ||
        it->get<std::string>().find('\n') != std::string::npos) {
      std::abort();
    }
  } else if (path == "/query" || path == "/query_by_hash") {
    // Every answered instance's figures are consistent: no tier or rank above longest_matched.
    if (!answer.contains("data") || !answer["data"].is_object()) std::abort();
    for (const auto& [tenant, instances] : answer["data"].items()) {
      for (const auto& [name, m] : instances.items()) {
        const uint64_t longest = m.at("longest_matched").get<uint64_t>();
        if (longest > 8 || m.at("GPU").get<uint64_t>() > longest ||
            m.at("CPU").get<uint64_t>() > longest) {
          std::abort();
        }
        for (const auto& [rank, tokens] : m.at("DP").items()) {
          if (tokens.get<uint64_t>() > longest) std::abort();
        }
      }
    }
  }
  return 0;
}
