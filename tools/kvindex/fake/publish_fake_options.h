// The options of `kvindex publish-fake` (docs/cli.md) as the command line sets them. The command
// fills them once; every part of the fake then only reads them.
//
// Thread safety: a plain value.
#ifndef KVINDEX_TOOLS_FAKE_PUBLISH_FAKE_OPTIONS_H_
#define KVINDEX_TOOLS_FAKE_PUBLISH_FAKE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "fake/fake_workload.h"

namespace kvindex::cli {

struct PublishFakeOptions {
  std::string format = "vllm";
  std::string replay_style;
  bool synthetic = false;
  std::string trace;
  std::string capture;
  std::string batches_file;
  double speed = 1.0;
  uint32_t instances = 1;
  uint32_t dp_ranks = 1;
  uint32_t port = 5557;
  uint32_t replay_port = 0;
  bool bind = false;
  std::string connect_host;
  std::string topic;
  std::string model = "fake-model";
  uint64_t count = 100;
  uint32_t events_per_batch = 1;
  double rate = 100;
  uint64_t seed = 1;
  bool blast = false;
  uint64_t drop_every = 0;
  uint64_t duplicate_every = 0;
  uint64_t corrupt_every = 0;
  uint64_t restart_after = 0;
  uint64_t ring = 10000;
  double linger = 0;
  uint64_t wait_subscribers = 0;
  double wait_timeout = 30;
  int hwm = 100000;
  std::string emit_queries;
  uint64_t query_every = 0;
  std::string out;
  std::string json;
  SyntheticOptions synth;
  uint32_t capacity = 256;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_PUBLISH_FAKE_OPTIONS_H_
