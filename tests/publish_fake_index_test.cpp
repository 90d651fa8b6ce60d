// publish-fake's expected answers against the real offline path: `publish-fake --out` captures
// (with faults, restarts and DP ranks, in every format) are replayed through CaptureReplayer,
// Ingestor and PrefixIndex, and every `--emit-queries` query is answered at its `after` position
// (or at the end) and compared with the fake's own model. Two independent implementations of
// docs/sequence-rules.md and docs/index-rules.md must agree; a disagreement names the query.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/files/capture.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/capture_replay.h"
#include "kvindex/ingest/ingest.h"
#include "test_util.h"

namespace kvindex {
namespace {

struct Query {
  std::string id;
  std::vector<TokenId> tokens;
  std::string model;
  std::optional<std::pair<std::string, uint64_t>> after;
  nlohmann::json expect;
  bool answered = false;
};

nlohmann::json Answer(const PrefixIndex& index, const Query& q) {
  MatchQuery mq;
  mq.model = q.model;
  auto match = index.MatchTokens(mq, q.tokens);
  REQUIRE(match.ok());
  nlohmann::json out = nlohmann::json::object();
  for (const InstanceMatch& im : match->instances) {
    nlohmann::json dp = nlohmann::json::object();
    for (const DpTokens& d : im.dp) dp[std::to_string(d.rank)] = d.tokens;
    out[std::string(im.instance)] = {{"longest_matched", im.longest_matched}, {"GPU", im.gpu},
                                     {"CPU", im.cpu}, {"DISK", im.disk}, {"DP", dp}};
  }
  return out;
}

struct Checker : IngestObserver {
  Ingestor* ingestor = nullptr;
  PrefixIndex* index = nullptr;
  std::vector<Query>* queries = nullptr;
  size_t compared = 0;
  void Check(Query& q) {
    q.answered = true;
    const nlohmann::json got = Answer(*index, q);
    for (auto it = q.expect.begin(); it != q.expect.end(); ++it) {
      const std::string instance = it.key();
      const nlohmann::json want = it.value();
      CAPTURE(q.id);
      CAPTURE(instance);
      REQUIRE_MESSAGE(got.contains(instance), "index has no answer for " << instance);
      CHECK_MESSAGE(got[instance] == want, q.id << " " << instance << ": index " << got[instance].dump()
                                                << " fake " << want.dump());
      ++compared;
    }
  }
  void OnApplied(SourceId source, uint64_t seq, int64_t, const EventBatch&) override {
    const std::string name = SourceDisplayName(ingestor->config(source));
    for (Query& q : *queries) {
      if (!q.answered && q.after && q.after->first == name && q.after->second == seq) Check(q);
    }
  }
};

void CrossCheck(const std::string& flags) {
  CAPTURE(flags);
  const std::filesystem::path binary = KVINDEX_CLI_BINARY;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvindex_fake_index_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const std::string cap = (dir / "f.kvcap").string(), qfile = (dir / "q.jsonl").string();
  const std::string command = binary.string() + " publish-fake " + flags + " --out " + cap +
                              " --emit-queries " + qfile + " 2>/dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  std::vector<Query> queries;
  std::ifstream in(qfile);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    Query q;
    q.id = j["id"];
    q.model = j["query"]["model"];
    q.tokens = j["query"]["token_ids"].get<std::vector<TokenId>>();
    if (j.contains("after")) q.after = {{j["after"]["source"], j["after"]["seq"].get<uint64_t>()}};
    q.expect = j["expect"];
    queries.push_back(std::move(q));
  }
  REQUIRE(!queries.empty());
  PrefixIndex index;
  Checker checker;
  Ingestor ingestor(&index, &checker);
  checker.ingestor = &ingestor;
  checker.index = &index;
  checker.queries = &queries;
  CaptureReplayer replayer(ingestor);
  auto reader = CaptureReader::Open({cap});
  REQUIRE(reader.ok());
  REQUIRE(replayer.ApplyAll(**reader).ok());
  for (Query& q : queries) {
    if (!q.after) checker.Check(q);
    CHECK_MESSAGE(q.answered, q.id << ": its after position was never applied");
  }
  CHECK(checker.compared > 0);
  std::filesystem::remove_all(dir);
}

TEST_SUITE("publish_fake") {
  TEST_CASE("The fake's expected answers agree with the index on a clean stream, every format") {
    for (const char* format : {"vllm-v0.9", "vllm", "vllm-map", "sglang", "mooncake", "mooncake-seed"}) {
      CrossCheck(std::string("--format ") + format +
                 " --count 30 --events-per-batch 2 --capacity 24 --prompt-blocks 6 --prefix-blocks 3"
                 " --prefixes 4 --block-size 4 --query-every 5");
    }
  }
  TEST_CASE("The fake's expected answers agree with the index through faults, restarts and DP ranks") {
    CrossCheck("--format vllm --instances 2 --dp-ranks 2 --count 40 --events-per-batch 3 --capacity 20"
               " --prompt-blocks 5 --prefix-blocks 2 --block-size 4 --drop-every 4 --corrupt-every 7"
               " --duplicate-every 3 --restart-after 25 --replay-port 7000 --query-every 3");
    CrossCheck("--format sglang --dp-ranks 2 --count 30 --drop-every 5 --replay-port 7000 --ring 1"
               " --capacity 16 --prompt-blocks 4 --block-size 2 --query-every 2");
    CrossCheck("--format vllm-map --count 30 --drop-every 3 --corrupt-every 4 --capacity 16"
               " --prompt-blocks 4 --block-size 2 --query-every 2");
  }
}

}  // namespace
}  // namespace kvindex
