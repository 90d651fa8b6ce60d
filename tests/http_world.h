// The small index behind the HTTP server test and the HTTP handler fuzz target: vllm-0 rank 0
// holds blocks [1..4][5..8] on GPU, vllm-0 rank 1 holds [1..4], vllm-1 holds [1..4] on GPU and CPU
// (block size 4, model "m"). Expected answers in http_server_test are hand-computed from this.
#ifndef KVINDEX_TESTS_HTTP_WORLD_H_
#define KVINDEX_TESTS_HTTP_WORLD_H_

#include <optional>
#include <string>
#include <utility>

#include "kvindex/query/server_backend.h"
#include "prefix_index_builders.h"

namespace kvindex::test {

inline SourceConfig HttpWorldSource(std::string name, std::string endpoint,
                                    std::optional<DpRank> rank = 0) {
  SourceConfig c;
  c.name = std::move(name);
  c.format = "vllm";
  c.endpoint = std::move(endpoint);
  c.model = "m";
  c.block_size = 4;
  c.dp_rank = rank;
  return c;
}

struct HttpWorldSources {
  SourceId a0, a1, b;
};

// Defines the three sources on `backend` and stores their blocks.
inline Result<HttpWorldSources> FillHttpWorld(LocalBackend& backend) {
  HttpWorldSources s;
  KVINDEX_ASSIGN_OR_RETURN(s.a0, backend.AddSource(HttpWorldSource("vllm-0", "tcp://10.0.0.5:5557", 0)));
  KVINDEX_ASSIGN_OR_RETURN(s.a1, backend.AddSource(HttpWorldSource("vllm-0", "tcp://10.0.0.5:5558", 1)));
  KVINDEX_ASSIGN_OR_RETURN(s.b, backend.AddSource(HttpWorldSource("vllm-1", "tcp://10.0.0.6:5557", 0)));
  const std::pair<SourceId, EventBatch> batches[] = {
      {s.a0, Batch({Stored({11, 12}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8})})},
      {s.a1, Batch({Stored({21}, std::nullopt, {1, 2, 3, 4})})},
      {s.b, Batch({Stored({31}, std::nullopt, {1, 2, 3, 4})})},
      {s.b, Batch({Stored({31}, std::nullopt, {1, 2, 3, 4}, Tier::Cpu())})},
  };
  for (const auto& [source, batch] : batches) {
    KVINDEX_RETURN_IF_ERROR(backend.Apply(source, batch).status());
  }
  return s;
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_HTTP_WORLD_H_
