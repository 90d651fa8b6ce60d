// SourceCounterFields: every key is exactly one counter. Each input counter gets a distinct value
// and the expected key -> value table below is written by hand from the documented meanings
// (docs/http-api.md "Per-source counters"), not from the code under test.
#include <map>
#include <set>
#include <string>

#include <doctest/doctest.h>

#include "kvindex/ingest/source_counters.h"

namespace kvindex {
namespace {

TEST_CASE("SourceCounterFields: one key per counter, in the documented meaning") {
  SourceCounters c;
  c.sequence.received = 1;
  c.sequence.replayed = 2;
  c.sequence.applied = 3;
  c.sequence.duplicates = 4;
  c.sequence.gaps = 5;
  c.sequence.recovered = 6;
  c.sequence.lost = 7;
  c.sequence.restarts = 8;
  c.sequence.malformed = 9;
  c.sequence.replay_requests = 10;
  c.sequence.dropped_held = 11;
  c.sequence.orphan_replays = 12;
  c.sequence.reapplied = 13;
  c.sequence.corrupt_seqs = 33;
  c.sequence.late_joins = 34;
  c.sequence.late_join_batches = 35;
  c.frame_errors = 14;
  c.replay_frame_errors = 15;
  c.event_errors = 16;
  c.events = 17;
  c.bigram_events = 36;
  c.token_form_mismatches = 37;
  c.index.stored = 18;
  c.index.duplicates = 1000;  // not a per-source key (the sequence's `duplicates` is)
  c.index.removed = 19;
  c.index.orphans = 20;
  c.index.tokenless = 21;
  c.index.unmapped = 22;
  c.index.evicted = 23;
  c.index.dp_rank_mismatches = 24;
  c.index.rejected = 25;
  TransportCounters t;
  t.messages = 26;
  t.bytes = 27;
  t.replay_messages = 28;
  t.replay_timeouts = 29;
  t.replay_send_failures = 30;
  t.unsupported = 31;
  t.unrecorded = 32;
  const std::map<std::string, uint64_t> want = {
      {"received", 1},        {"replayed", 2},        {"applied", 3},
      {"duplicates", 4},      {"gaps", 5},            {"recovered", 6},
      {"lost", 7},            {"restarts", 8},        {"malformed", 9},
      {"replay_requests", 10}, {"dropped_held", 11},  {"orphan_replays", 12},
      {"reapplied", 13},      {"frame_errors", 14},   {"replay_frame_errors", 15},
      {"event_errors", 16},   {"events", 17},         {"stored", 18},
      {"removed", 19},        {"orphans", 20},        {"tokenless", 21},
      {"unmapped", 22},       {"evicted", 23},        {"dp_rank_mismatches", 24},
      {"rejected", 25},       {"messages", 26},       {"bytes", 27},
      {"replay_messages", 28}, {"replay_timeouts", 29}, {"replay_send_failures", 30},
      {"unsupported", 31},    {"unrecorded", 32},     {"corrupt_seqs", 33},
      {"late_joins", 34},     {"late_join_batches", 35}, {"bigram_events", 36},
      {"token_form_mismatches", 37}};
  std::map<std::string, uint64_t> got;
  for (const SourceCounterField& f : SourceCounterFields(c, t)) {
    CHECK(!f.help.empty());
    CHECK(got.emplace(std::string(f.key), f.value).second);  // keys are unique
  }
  CHECK(got == want);

  // AddSourceCounters renders exactly these keys and values into any JSON-like object.
  std::map<std::string, uint64_t> rendered;
  AddSourceCounters(rendered, c, t);
  CHECK(rendered == want);
}

}  // namespace
}  // namespace kvindex
