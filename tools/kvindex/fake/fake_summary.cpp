#include "fake/fake_summary.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "report.h"

namespace kvindex::cli {
namespace {

// Sums over the sources, for the totals and the stderr line.
struct Totals {
  uint64_t batches = 0, events = 0, stored = 0, removed = 0, bytes = 0;
  uint64_t dropped = 0, duplicated = 0, corrupted = 0, restarts = 0, lost = 0;
  uint64_t replay_requests = 0, replay_batches = 0, replay_malformed = 0, live = 0;
};

nlohmann::json SourceJson(const FakeSource& s, size_t blocks) {
  nlohmann::json j = {{"name", FakeSourceName(s.config)},
                      {"instance", s.instance},
                      {"endpoint", s.config.endpoint},
                      {"replay_endpoint", s.config.replay_endpoint},
                      {"batches", s.batches},
                      {"events", s.events},
                      {"blocks_stored", s.stored},
                      {"blocks_removed", s.removed},
                      {"cleared", s.cleared},
                      {"payload_bytes", s.bytes},
                      {"first_seq", s.items.empty() ? 0 : s.items.front().seq},
                      {"last_seq", s.items.empty() ? 0 : s.items.back().seq},
                      {"faults",
                       {{"dropped", s.dropped},
                        {"duplicated", s.duplicated},
                        {"corrupted", s.corrupted},
                        {"restarts", s.restarts}}},
                      {"expected_lost", s.lost},
                      {"model_blocks", blocks}};
  nlohmann::json seqs = {{"dropped", nlohmann::json::array()},
                         {"duplicated", nlohmann::json::array()},
                         {"corrupted", nlohmann::json::array()}};
  for (const FakeBatch& it : s.items) {
    if (it.fault == Fault::kDrop) seqs["dropped"].push_back(it.seq);
    if (it.fault == Fault::kDuplicate) seqs["duplicated"].push_back(it.seq);
    if (it.fault == Fault::kCorrupt) seqs["corrupted"].push_back(it.seq);
  }
  if (s.items.size() <= 10000) j["fault_seqs"] = seqs;
  return j;
}

void Add(Totals& t, const FakeSource& s) {
  t.batches += s.batches;
  t.events += s.events;
  t.stored += s.stored;
  t.removed += s.removed;
  t.bytes += s.bytes;
  t.dropped += s.dropped;
  t.duplicated += s.duplicated;
  t.corrupted += s.corrupted;
  t.restarts += s.restarts;
  t.lost += s.lost;
}

void PrintLine(const PublishFakeOptions& o, size_t sources, const Totals& t) {
  std::fprintf(
      stderr,
      "publish-fake: %s, %zu source(s): %llu batches, %llu events, %llu blocks stored, "
      "%llu removed; faults: %llu dropped, %llu duplicated, %llu corrupted, %llu "
      "restarts; replay: %llu requests, %llu batches\n",
      o.format.c_str(), sources, static_cast<unsigned long long>(t.batches),
      static_cast<unsigned long long>(t.events), static_cast<unsigned long long>(t.stored),
      static_cast<unsigned long long>(t.removed), static_cast<unsigned long long>(t.dropped),
      static_cast<unsigned long long>(t.duplicated), static_cast<unsigned long long>(t.corrupted),
      static_cast<unsigned long long>(t.restarts),
      static_cast<unsigned long long>(t.replay_requests),
      static_cast<unsigned long long>(t.replay_batches));
}

}  // namespace

Status WriteSummary(const PublishFakeOptions& o, ReplayStyle style,
                    const std::vector<FakeSource>& sources,
                    const std::vector<size_t>& model_blocks, const PublishRun* run) {
  nlohmann::json summary;
  summary["format"] = o.format;
  summary["replay_style"] = std::string(ReplayStyleName(style));
  Totals t;
  summary["sources"] = nlohmann::json::array();
  for (size_t k = 0; k < sources.size(); ++k) {
    nlohmann::json j = SourceJson(sources[k], model_blocks[k]);
    if (run != nullptr) {
      const PublisherCounters& c = run->publishers[k]->counters();
      j["live_messages"] = c.batches;
      j["replay_requests"] = c.replay_requests;
      j["replay_batches"] = c.replay_batches;
      j["replay_malformed"] = c.replay_malformed;
      t.replay_requests += c.replay_requests;
      t.replay_batches += c.replay_batches;
      t.replay_malformed += c.replay_malformed;
      t.live += c.batches;
    }
    summary["sources"].push_back(j);
    Add(t, sources[k]);
  }
  summary["batches"] = t.batches;
  summary["events"] = t.events;
  summary["blocks_stored"] = t.stored;
  summary["blocks_removed"] = t.removed;
  summary["payload_bytes"] = t.bytes;
  summary["faults"] = {{"dropped", t.dropped},
                       {"duplicated", t.duplicated},
                       {"corrupted", t.corrupted},
                       {"restarts", t.restarts}};
  summary["expected_lost"] = t.lost;
  if (run != nullptr) {
    summary["live_messages"] = t.live;
    summary["replay_requests"] = t.replay_requests;
    summary["replay_batches"] = t.replay_batches;
    summary["replay_malformed"] = t.replay_malformed;
    summary["send_seconds"] = run->send_seconds;
    if (run->send_seconds > 0) {
      summary["batches_per_second"] = static_cast<double>(t.batches) / run->send_seconds;
      summary["blocks_per_second"] = static_cast<double>(t.stored + t.removed) / run->send_seconds;
    }
  }
  if (!o.out.empty()) summary["out"] = o.out;
  // The JSON first: a summary that cannot be written leaves its error as the one stderr line.
  if (!o.json.empty()) {
    KVINDEX_RETURN_IF_ERROR(WriteTextFile(o.json, DumpJson(summary, 1) + "\n"));
  }
  PrintLine(o, sources.size(), t);
  return Status::Ok();
}

}  // namespace kvindex::cli
