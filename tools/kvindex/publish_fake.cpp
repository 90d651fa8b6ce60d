// kvindex publish-fake: a real ZeroMQ publisher of synthetic, trace-driven, listed or recorded KV
// events in every supported wire format, with fault injection and the exact answers a correct
// subscriber must give (SPEC §7, docs/cli.md).
//
// Everything is generated before the first send (so --blast measures the subscriber, not this
// process): per source a list of batches with their sequence numbers, payloads and faults. A
// global schedule interleaves the sources round by round. The same schedule drives the sockets,
// the `--out` capture (written as a correct subscriber would have recorded it) and FakeModel (the
// `--emit-queries` answers), so the three agree.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "fake_model.h"
#include "fake_workload.h"
#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/core/log.h"
#include "kvindex/core/source.h"
#include "kvindex/files/capture.h"
#include "kvindex/zmq/publisher.h"

namespace kvindex::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::byte>;

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

enum class Fault : uint8_t { kNone, kDrop, kDuplicate, kCorrupt };

struct Item {
  size_t source = 0;
  uint64_t index = 0;         // position within the source (0-based)
  uint64_t seq = 0;
  bool restart = false;       // the engine restarted just before this batch
  Fault fault = Fault::kNone;
  Bytes payload;
  std::optional<EventBatch> batch;  // what was encoded (absent for undecodable capture payloads)
  std::vector<TokenId> recent;      // the latest prompt served when the batch was cut
  int64_t offset_ns = 0;            // --capture: when to send, relative to the first message
  uint64_t events = 0, stored = 0, removed = 0, cleared = 0;
};

struct SourceInfo {
  std::string instance;
  std::optional<DpRank> rank_label;  // the source definition's dp_rank (set with --dp-ranks > 1)
  DpRank rank = 0;
  std::string endpoint;
  std::string replay_endpoint;
  uint64_t first_seq = 0;
  SourceConfig config;
  std::vector<Item> items;
  // Counters for the summary.
  uint64_t batches = 0, events = 0, stored = 0, removed = 0, cleared = 0, bytes = 0;
  uint64_t dropped = 0, duplicated = 0, corrupted = 0, restarts = 0, lost = 0;
};

// A source's display name as SourceDisplayName() (ingest.h) spells it: the instance, plus "/dp<r>"
// with a DP rank label. Re-stated here so publish-fake does not link the index it tests.
std::string SourceDisplayName(const SourceConfig& config) {
  if (!config.dp_rank) return config.name;
  return config.name + "/dp" + std::to_string(*config.dp_rank);
}

ReplayStyle DefaultReplayStyle(WireFormat f) {
  switch (f) {
    case WireFormat::kVllmMap: return ReplayStyle::kVllmTopic;  // map era = vLLM >= 0.26
    case WireFormat::kMooncake:
    case WireFormat::kMooncakeSeed: return ReplayStyle::kMooncake;
    default: return ReplayStyle::kVllm;
  }
}

std::string SourceFormatHint(WireFormat f) {
  switch (f) {
    case WireFormat::kSglang: return "sglang";
    case WireFormat::kMooncake:
    case WireFormat::kMooncakeSeed: return "mooncake";
    default: return "vllm";
  }
}

void CountEvents(Item& item) {
  if (!item.batch) return;
  const auto& events = item.batch->events;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    ++item.events;
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      item.stored += s->block_hashes.size();
      // A seed-era BlockStoreEvent: the StoreUpdate after it is part of the same wire event.
      if (s->wire.object_key && i + 1 < events.size() &&
          std::holds_alternative<StoreUpdate>(events[i + 1])) {
        ++i;
      }
    }
    if (const auto* r = std::get_if<BlockRemoved>(&e)) item.removed += r->block_hashes.size();
    if (std::holds_alternative<AllCleared>(e)) ++item.cleared;
    if (const auto* u = std::get_if<StoreUpdate>(&e)) {
      if (u->replicas.empty()) ++item.removed;
    }
  }
}

// --- --batches FILE: logical batches, one JSON object per line (the golden files' `logical`). ---

Result<uint64_t> JsonHash(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  return Status::Malformed(where + ": expected an integer hash");
}

Result<EventBatch> ParseLogicalBatch(const std::string& line, const std::string& where) {
  auto doc = nlohmann::json::parse(line, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Status::Malformed(where + ": not a JSON object");
  EventBatch batch;
  batch.ts = doc.value("ts", 0.0);
  for (const char* key : {"dp_rank", "data_parallel_rank", "attn_dp_rank"}) {
    if (doc.contains(key) && doc[key].is_number_integer()) batch.dp_rank = doc[key].get<DpRank>();
  }
  if (!doc.contains("events") || !doc["events"].is_array()) {
    return Status::Malformed(where + ": events: expected an array");
  }
  for (const auto& e : doc["events"]) {
    const std::string type = e.value("type", "");
    auto opt_str = [&](const char* k) -> std::optional<std::string> {
      if (e.contains(k) && e[k].is_string()) return e[k].get<std::string>();
      return std::nullopt;
    };
    auto tier = [&]() -> std::optional<Tier> {
      auto m = opt_str("medium");
      if (!m) return std::nullopt;
      return ParseTier(*m);
    };
    std::vector<EngineHash> hashes;
    if (e.contains("block_hashes")) {
      for (const auto& h : e["block_hashes"]) {
        KVINDEX_ASSIGN_OR_RETURN(uint64_t v, JsonHash(h, where + ": block_hashes"));
        hashes.push_back(EngineHash{v});
      }
    }
    if (type == "BlockStored") {
      BlockStored s;
      s.block_hashes = std::move(hashes);
      if (e.contains("parent_block_hash") && !e["parent_block_hash"].is_null()) {
        KVINDEX_ASSIGN_OR_RETURN(uint64_t v, JsonHash(e["parent_block_hash"], where + ": parent"));
        s.parent = EngineHash{v};
      }
      for (const auto& t : e.value("token_ids", nlohmann::json::array())) {
        s.token_ids.push_back(t.get<TokenId>());
      }
      if (e.contains("block_size") && e["block_size"].is_number_integer()) {
        s.scope.block_size = e["block_size"].get<uint32_t>();
      }
      if (e.contains("lora_id") && e["lora_id"].is_number_integer()) {
        s.scope.lora_id = e["lora_id"].get<int64_t>();
      }
      s.scope.lora_name = opt_str("lora_name");
      s.scope.salt = opt_str("cache_salt");  // the request's cache_salt (vLLM: in extra_keys)
      s.tier = tier();
      batch.events.push_back(std::move(s));
    } else if (type == "BlockRemoved") {
      BlockRemoved r;
      r.block_hashes = std::move(hashes);
      r.tier = tier();
      batch.events.push_back(std::move(r));
    } else if (type == "AllBlocksCleared") {
      batch.events.push_back(AllCleared{});
    } else {
      return Status::Malformed(where + ": unknown event type '" + type + "'");
    }
  }
  return batch;
}

// --- generation ---

Status GenerateEngineItems(const PublishFakeOptions& o, WireFormat format,
                           std::vector<SourceInfo>& sources, SyntheticPrompts* synthetic,
                           TracePrompts* trace) {
  FakeEventStyle style;
  style.block_size = o.synth.block_size;
  switch (format) {
    case WireFormat::kVllmV09: break;  // no medium in v0.9
    case WireFormat::kSglang: break;   // the earliest SGLang era has no medium either
    case WireFormat::kVllm:
    case WireFormat::kVllmMap: style.tier = Tier::Gpu(); break;
    case WireFormat::kMooncake:
      style.tier = Tier::Cpu();
      style.model = o.model;
      break;
    case WireFormat::kMooncakeSeed:
      style.tier = Tier::Cpu();
      style.model = o.model;
      style.store_objects = true;
      break;
  }
  const bool carries_rank = format == WireFormat::kVllm || format == WireFormat::kVllmMap ||
                            format == WireFormat::kMooncake ||
                            (format == WireFormat::kSglang && o.dp_ranks > 1);
  // Timestamps in whole milliseconds (Mooncake RFC batches carry integer milliseconds).
  const int64_t t0_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  for (size_t si = 0; si < sources.size(); ++si) {
    SourceInfo& src = sources[si];
    FakeCache cache(o.capacity, style);
    std::vector<Event> pending;
    std::vector<TokenId> recent;
    std::deque<std::pair<std::vector<TokenId>, uint64_t>> served;  // prompt, events through it
    uint64_t produced = 0, consumed = 0, idle_prompts = 0;
    uint64_t seq = src.first_seq;
    bool exhausted = false;
    for (uint64_t k = 0; o.count == 0 || k < o.count; ++k) {
      Item item;
      item.source = si;
      item.index = k;
      if (o.restart_after > 0 && k == o.restart_after) {
        cache.Reset();
        pending.clear();
        served.clear();
        recent.clear();
        consumed = produced;
        seq = src.first_seq;
        item.restart = true;
      }
      while (pending.size() < (style.store_objects ? 2u : 1u) * o.events_per_batch && !exhausted) {
        std::optional<std::vector<TokenId>> prompt;
        if (synthetic) prompt = synthetic->Next(si);
        else prompt = trace->Next(si);
        if (!prompt) {
          exhausted = true;
          break;
        }
        const size_t before = pending.size();
        cache.Serve(*prompt, pending);
        produced += pending.size() - before;
        if (pending.size() == before) {
          // A full hit publishes nothing; a workload that only hits would never fill a batch.
          if (++idle_prompts > 10000) exhausted = true;
        } else {
          idle_prompts = 0;
        }
        served.emplace_back(std::move(*prompt), produced);
      }
      if (pending.empty()) break;
      EventBatch batch;
      // Take events_per_batch wire events; a Mooncake-seed BlockStoreEvent is a BlockStored and
      // the StoreUpdate of its object, one wire event that is never split.
      size_t take = 0;
      for (uint32_t wire = 0; wire < o.events_per_batch && take < pending.size(); ++wire) {
        const bool pair = style.store_objects && std::holds_alternative<BlockStored>(pending[take]);
        take += pair ? 2 : 1;
      }
      take = std::min(take, pending.size());
      batch.events.assign(std::make_move_iterator(pending.begin()),
                          std::make_move_iterator(pending.begin() + static_cast<ptrdiff_t>(take)));
      pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(take));
      // The latest prompt whose events are all published by now (queries probe it).
      consumed += take;
      while (!served.empty() && served.front().second <= consumed) {
        recent = std::move(served.front().first);
        served.pop_front();
      }
      batch.ts = static_cast<double>(t0_ms + static_cast<int64_t>(k)) / 1000.0;
      if (carries_rank) batch.dp_rank = src.rank;
      item.seq = seq++;
      item.recent = recent;
      item.batch = std::move(batch);
      src.items.push_back(std::move(item));
    }
  }
  return Status::Ok();
}

Status GenerateListedItems(const PublishFakeOptions& o, std::vector<SourceInfo>& sources) {
  std::ifstream in(o.batches_file);
  if (!in) return Status::NotFound(o.batches_file + ": cannot open");
  std::string line;
  size_t line_no = 0;
  uint64_t seq = sources[0].first_seq;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    KVINDEX_ASSIGN_OR_RETURN(EventBatch batch,
                             ParseLogicalBatch(line, o.batches_file + ": line " +
                                                         std::to_string(line_no)));
    Item item;
    item.source = 0;
    item.index = sources[0].items.size();
    item.seq = seq++;
    item.batch = std::move(batch);
    sources[0].items.push_back(std::move(item));
    if (o.count > 0 && sources[0].items.size() >= o.count) break;
  }
  return Status::Ok();
}

Status GenerateCaptureItems(const PublishFakeOptions& o, std::vector<SourceInfo>& sources,
                            WireFormat format) {
  KVINDEX_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open({o.capture}));
  CaptureRecord record;
  std::vector<int64_t> index_of;  // capture source id -> our source index (-1: undefined)
  int64_t first_ns = -1;
  while (reader->Next(record)) {
    if (record.type == CaptureRecordType::kSourceDefinition) {
      if (record.source.value >= index_of.size()) index_of.resize(record.source.value + 1, -1);
      if (index_of[record.source.value] >= 0) continue;
      auto config = SourceConfigFromJson(record.text());
      if (!config.ok()) return config.status().WithContext(o.capture);
      const size_t k = sources.size();
      SourceInfo src;
      src.instance = config->name;
      src.rank_label = config->dp_rank;
      src.rank = config->dp_rank.value_or(0);
      src.config = *config;
      sources.push_back(std::move(src));
      index_of[record.source.value] = static_cast<int64_t>(k);
      continue;
    }
    if (record.type != CaptureRecordType::kMessage) continue;
    if (record.source.value >= index_of.size() || index_of[record.source.value] < 0) continue;
    auto view = ParseEventMessage(record.frames);
    if (!view.ok()) continue;  // not a well-formed live message: nothing to re-publish
    SourceInfo& src = sources[static_cast<size_t>(index_of[record.source.value])];
    if (o.count > 0 && src.items.size() >= o.count) continue;
    if (first_ns < 0) first_ns = record.recv_ns;
    Item item;
    item.source = static_cast<size_t>(index_of[record.source.value]);
    item.index = src.items.size();
    item.seq = view->seq;
    item.payload.assign(view->payload.begin(), view->payload.end());
    item.offset_ns = static_cast<int64_t>(static_cast<double>(record.recv_ns - first_ns) / o.speed);
    auto decoded = DecodeEventBatch(item.payload, FormatHint::kAuto);
    if (decoded.ok()) item.batch = std::move(*decoded);
    if (!src.items.empty() && item.seq <= src.items.back().seq && item.seq <= 1) item.restart = true;
    src.items.push_back(std::move(item));
  }
  if (!reader->io_status().ok()) return reader->io_status().WithContext(o.capture);
  (void)format;
  return Status::Ok();
}

// Assigns faults: the k-th batch (1-based within its source) gets drop when k % drop_every == 0,
// else corrupt, else duplicate. The last batch of a source is never dropped (nothing after it
// would reveal the hole), and the first batch after a restart is never dropped or corrupted (the
// subscriber learns of the restart from the next sequence and would never ask for it).
void AssignFaults(const PublishFakeOptions& o, SourceInfo& src) {
  for (size_t i = 0; i < src.items.size(); ++i) {
    Item& item = src.items[i];
    const uint64_t k = i + 1;
    const bool last = i + 1 == src.items.size();
    if (o.drop_every > 0 && k % o.drop_every == 0 && !last && !item.restart) {
      item.fault = Fault::kDrop;
    } else if (o.corrupt_every > 0 && k % o.corrupt_every == 0 && !item.restart) {
      item.fault = Fault::kCorrupt;
    } else if (o.duplicate_every > 0 && k % o.duplicate_every == 0) item.fault = Fault::kDuplicate;
  }
}

Bytes CorruptCopy(const Bytes& payload) {
  // 0xc1 is the one byte msgpack never uses: the copy cannot decode, so a subscriber sees a
  // malformed payload with intact frames (a hole for that sequence), never different content.
  Bytes bad = payload;
  if (bad.empty()) bad.push_back(std::byte{0xc1});
  else bad[0] = std::byte{0xc1};
  return bad;
}

// One step of the global schedule: source `source`'s item `index`.
struct Step {
  size_t source;
  size_t index;
};

std::vector<Step> Schedule(const std::vector<SourceInfo>& sources, bool by_time) {
  std::vector<Step> steps;
  size_t longest = 0;
  for (const auto& s : sources) longest = std::max(longest, s.items.size());
  for (size_t k = 0; k < longest; ++k) {
    for (size_t si = 0; si < sources.size(); ++si) {
      if (k < sources[si].items.size()) steps.push_back({si, k});
    }
  }
  if (by_time) {
    std::stable_sort(steps.begin(), steps.end(), [&](const Step& a, const Step& b) {
      return sources[a.source].items[a.index].offset_ns < sources[b.source].items[b.index].offset_ns;
    });
  }
  return steps;
}

// The ring as the publisher holds it right after item `upto` of `src` was remembered: the last
// `ring` batches of the current incarnation.
std::vector<const Item*> RingAfter(const SourceInfo& src, size_t upto, uint64_t ring) {
  std::vector<const Item*> kept;
  size_t begin = upto + 1;
  while (begin > 0 && kept.size() < ring) {
    const Item& it = src.items[begin - 1];
    kept.push_back(&it);
    --begin;
    if (it.restart) break;
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

// --- the simulated correct subscriber: FakeModel in subscriber order, queries, --out ---

struct QueryWriter {
  std::ofstream out;
  uint64_t next_id = 0;
  std::mt19937_64 rng{7};
  void Write(const std::string& model, const std::vector<TokenId>& tokens,
             const std::optional<std::pair<std::string, uint64_t>>& after,
             const nlohmann::json& expect) {
    nlohmann::json q;
    q["id"] = "q" + std::to_string(next_id++);
    q["query"] = {{"model", model}, {"token_ids", tokens}};
    if (after) q["after"] = {{"source", after->first}, {"seq", after->second}};
    q["expect"] = expect;
    out << q.dump() << "\n";
  }
};

struct Simulation {
  const PublishFakeOptions& o;
  std::vector<SourceInfo>& sources;
  ReplayStyle style;
  bool has_replay;
  FakeModel model;
  std::unique_ptr<CaptureWriter> capture;
  std::optional<QueryWriter> queries;
  std::vector<std::optional<size_t>> pending_drop;  // per source: a dropped item awaiting k+1
  std::vector<std::optional<uint64_t>> last_seq;    // per source: last live seq (restart check)
  std::vector<std::optional<uint64_t>> max_seq_before;  // highest seq of earlier incarnations
  std::vector<uint64_t> max_seq_now;                    // highest seq of this incarnation
  int64_t base_ns = 0;
  uint64_t record_no = 0;
  std::vector<TokenId> probe_unseen;
  const SyntheticPrompts* synthetic = nullptr;
  const TracePrompts* trace = nullptr;

  int64_t Now() { return base_ns + static_cast<int64_t>(record_no++) * 1000; }

  Status WriteMessage(size_t si, CaptureRecordType type, const std::vector<Frame>& frames) {
    std::vector<std::span<const std::byte>> spans(frames.begin(), frames.end());
    return capture->WriteFrames(type, SourceId{static_cast<uint32_t>(si)}, Now(), spans);
  }

  Status WriteReplies(size_t si, size_t upto, uint64_t from_seq) {
    if (!capture || !has_replay) return Status::Ok();
    const SourceInfo& src = sources[si];
    const auto topic = std::as_bytes(std::span(o.topic.data(), o.topic.size()));
    for (const Item* it : RingAfter(src, upto, o.ring)) {
      if (it->seq < from_seq) continue;
      KVINDEX_RETURN_IF_ERROR(
          WriteMessage(si, CaptureRecordType::kReplayed, BuildReplayReply(style, topic, it->seq, it->payload)));
    }
    return WriteMessage(si, CaptureRecordType::kReplayed, BuildReplayEnd(style));
  }

  Status WriteLive(size_t si, const Item& item, const Bytes& payload) {
    if (!capture) return Status::Ok();
    const auto topic = std::as_bytes(std::span(o.topic.data(), o.topic.size()));
    return WriteMessage(si, CaptureRecordType::kMessage, BuildEventMessage(topic, item.seq, payload));
  }

  // A subscriber without a replay endpoint gives up on a hole at once: a timeout record.
  Status WriteGiveUp(size_t si, uint64_t watermark) {
    if (!capture || has_replay) return Status::Ok();
    return capture->WriteObservation(CaptureRecordType::kTimeout, SourceId{static_cast<uint32_t>(si)},
                                     Now(), watermark, 0);
  }

  void ApplyToModel(size_t si, const Item& item) {
    if (item.batch) model.Apply(si, *item.batch);
    // After a restart a sequence number may repeat; an `after` naming it would be ambiguous, so
    // only sequences above every earlier incarnation's are used as query points.
    const bool unique_seq = !max_seq_before[si] || item.seq > *max_seq_before[si];
    if (queries && o.query_every > 0 && (item.index + 1) % o.query_every == 0 && unique_seq) {
      const std::string name = SourceDisplayName(sources[si].config);
      Probe({{name, item.seq}}, item);
    }
  }

  void Probe(const std::optional<std::pair<std::string, uint64_t>>& after, const Item& item) {
    std::vector<std::vector<TokenId>> prompts;
    if (!item.recent.empty()) prompts.push_back(item.recent);
    if (synthetic && synthetic->prefix_count() > 0) prompts.push_back(synthetic->prefix(0));
    if (trace) prompts.push_back(trace->first());
    prompts.push_back(probe_unseen);
    for (const auto& p : prompts) queries->Write(o.model, p, after, model.Expect(p));
  }

  Status Step(size_t si, size_t idx) {
    SourceInfo& src = sources[si];
    const Item& item = src.items[idx];
    max_seq_now[si] = std::max(max_seq_now[si], item.seq);
    if (item.restart) {
      if (last_seq[si]) {
        max_seq_before[si] = std::max(max_seq_before[si].value_or(0), max_seq_now[si]);
      }
      max_seq_now[si] = 0;
      model.Clear(si);
      pending_drop[si].reset();
      ++src.restarts;
      if (capture && last_seq[si]) {
        KVINDEX_RETURN_IF_ERROR(capture->WriteObservation(
            CaptureRecordType::kRestart, SourceId{static_cast<uint32_t>(si)}, Now(), *last_seq[si], item.seq));
      }
    }
    ++src.batches;
    src.events += item.events;
    src.stored += item.stored;
    src.removed += item.removed;
    src.cleared += item.cleared;
    src.bytes += item.payload.size();
    switch (item.fault) {
      case Fault::kDrop:
        ++src.dropped;
        pending_drop[si] = idx;
        return Status::Ok();
      case Fault::kCorrupt: {
        ++src.corrupted;
        KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, CorruptCopy(item.payload)));
        if (capture) {
          KVINDEX_RETURN_IF_ERROR(capture->WriteText(CaptureRecordType::kMalformed,
                                                     SourceId{static_cast<uint32_t>(si)}, Now(),
                                                     "corrupt payload (publish-fake --corrupt-every)"));
        }
        // A malformed payload is a hole for its own sequence, requested at once (with a drop
        // just before it, the hole starts there).
        const uint64_t from = pending_drop[si] ? src.items[*pending_drop[si]].seq : item.seq;
        KVINDEX_RETURN_IF_ERROR(WriteReplies(si, idx, from));
        if (pending_drop[si]) {
          const Item& dropped = src.items[*pending_drop[si]];
          if (has_replay && o.ring >= 2) ApplyToModel(si, dropped);
          else ++src.lost;
          pending_drop[si].reset();
        }
        if (has_replay && o.ring >= 1) ApplyToModel(si, item);
        else ++src.lost;
        KVINDEX_RETURN_IF_ERROR(WriteGiveUp(si, item.seq));
        last_seq[si] = item.seq;
        return Status::Ok();
      }
      case Fault::kDuplicate:
        ++src.duplicated;
        break;
      case Fault::kNone:
        break;
    }
    KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, item.payload));
    if (item.fault == Fault::kDuplicate) KVINDEX_RETURN_IF_ERROR(WriteLive(si, item, item.payload));
    if (pending_drop[si]) {
      const Item& dropped = src.items[*pending_drop[si]];
      if (capture) {
        KVINDEX_RETURN_IF_ERROR(capture->WriteObservation(CaptureRecordType::kGap,
                                                          SourceId{static_cast<uint32_t>(si)}, Now(),
                                                          dropped.seq, item.seq));
      }
      KVINDEX_RETURN_IF_ERROR(WriteReplies(si, idx, dropped.seq));
      KVINDEX_RETURN_IF_ERROR(WriteGiveUp(si, dropped.seq - 1));
      if (has_replay && o.ring >= 2) ApplyToModel(si, dropped);
      else ++src.lost;
      pending_drop[si].reset();
    }
    ApplyToModel(si, item);
    last_seq[si] = item.seq;
    return Status::Ok();
  }
};

// --- live publishing ---

struct LiveRun {
  std::vector<std::unique_ptr<Publisher>> publishers;
  double send_seconds = 0;
  uint64_t live_messages = 0;
};

Status ServeAll(LiveRun& run, std::chrono::milliseconds wait) {
  for (auto& p : run.publishers) {
    auto served = p->ServeReplay(wait);
    if (!served.ok()) return served.status();
    wait = std::chrono::milliseconds(0);
  }
  return Status::Ok();
}

// Sleeps until `deadline`, answering replay requests meanwhile.
Status SleepServing(LiveRun& run, Clock::time_point deadline) {
  while (true) {
    const auto now = Clock::now();
    if (now >= deadline) return Status::Ok();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (left.count() == 0) {
      std::this_thread::sleep_until(deadline);
      return Status::Ok();
    }
    KVINDEX_RETURN_IF_ERROR(ServeAll(run, std::min(left, std::chrono::milliseconds(50))));
  }
}

Status PublishLive(const PublishFakeOptions& o, std::vector<SourceInfo>& sources,
                   const std::vector<Step>& steps, ReplayStyle style, LiveRun& run) {
  for (SourceInfo& src : sources) {
    PublisherOptions po;
    po.endpoint = src.endpoint;
    po.connect = o.connect_host.empty() ? PublisherConnect::kBind : PublisherConnect::kConnect;
    po.replay_endpoint = src.replay_endpoint;
    po.replay_style = style;
    po.topic = o.topic;
    po.ring_size = o.ring;
    po.send_hwm = o.blast ? 0 : o.hwm;
    po.count_subscribers = o.wait_subscribers > 0;
    po.linger_ms = 5000;
    KVINDEX_ASSIGN_OR_RETURN(auto pub, Publisher::Create(po));
    Log(LogLevel::kInfo, "publish-fake: " + SourceDisplayName(src.config) + " on " +
                             pub->live_endpoint() +
                             (src.replay_endpoint.empty() ? "" : ", replay " + pub->replay_endpoint()));
    run.publishers.push_back(std::move(pub));
  }
  if (o.wait_subscribers > 0) {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.wait_timeout * 1000));
    for (size_t i = 0; i < run.publishers.size(); ++i) {
      Status st = run.publishers[i]->WaitForSubscribers(o.wait_subscribers, timeout);
      if (!st.ok()) return st.WithContext("--wait-subscribers");
    }
  }
  const auto start = Clock::now();
  const bool paced_by_capture = !o.capture.empty() && !o.blast;
  for (size_t n = 0; n < steps.size(); ++n) {
    const Step& step = steps[n];
    SourceInfo& src = sources[step.source];
    const Item& item = src.items[step.index];
    Publisher& pub = *run.publishers[step.source];
    if (!o.blast) {
      if (paced_by_capture) {
        KVINDEX_RETURN_IF_ERROR(SleepServing(run, start + std::chrono::nanoseconds(item.offset_ns)));
      } else if (o.rate > 0) {
        const auto due = start + std::chrono::nanoseconds(
                                     static_cast<int64_t>(static_cast<double>(step.index) * 1e9 / o.rate));
        KVINDEX_RETURN_IF_ERROR(SleepServing(run, due));
      }
    }
    if (item.restart) pub.ClearRing();
    switch (item.fault) {
      case Fault::kDrop:
        pub.Remember(item.seq, item.payload);
        break;
      case Fault::kCorrupt:
        pub.Remember(item.seq, item.payload);
        KVINDEX_RETURN_IF_ERROR(pub.Send(item.seq, CorruptCopy(item.payload)));
        break;
      case Fault::kDuplicate:
        KVINDEX_RETURN_IF_ERROR(pub.Publish(item.seq, item.payload));
        KVINDEX_RETURN_IF_ERROR(pub.Send(item.seq, item.payload));
        break;
      case Fault::kNone:
        KVINDEX_RETURN_IF_ERROR(pub.Publish(item.seq, item.payload));
        break;
    }
    if (!o.blast || (n & 255) == 0) KVINDEX_RETURN_IF_ERROR(ServeAll(run, std::chrono::milliseconds(0)));
  }
  run.send_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (o.linger > 0) {
    // Keep answering until `linger` seconds pass without a replay request (well-formed or not).
    const auto quiet = std::chrono::milliseconds(static_cast<int64_t>(o.linger * 1000));
    auto requests = [&run] {
      uint64_t n = 0;
      for (const auto& p : run.publishers) {
        n += p->counters().replay_requests + p->counters().replay_malformed;
      }
      return n;
    };
    uint64_t seen = requests();
    auto deadline = Clock::now() + quiet;
    while (Clock::now() < deadline) {
      KVINDEX_RETURN_IF_ERROR(SleepServing(run, std::min(deadline, Clock::now() + std::chrono::milliseconds(50))));
      if (requests() != seen) {
        seen = requests();
        deadline = Clock::now() + quiet;
      }
    }
  }
  return Status::Ok();
}

Status CheckOptions(const PublishFakeOptions& o) {
  const int workloads = (o.synthetic ? 1 : 0) + (!o.trace.empty() ? 1 : 0) +
                        (!o.capture.empty() ? 1 : 0) + (!o.batches_file.empty() ? 1 : 0);
  if (workloads > 1) {
    return Status::InvalidArgument("--synthetic, --trace, --capture and --batches are exclusive");
  }
  if (o.instances == 0 || o.dp_ranks == 0) {
    return Status::InvalidArgument("--instances and --dp-ranks must be at least 1");
  }
  if (!o.batches_file.empty() && o.instances * o.dp_ranks != 1) {
    return Status::InvalidArgument("--batches publishes one source: use --instances 1 --dp-ranks 1");
  }
  if (o.bind && !o.connect_host.empty()) {
    return Status::InvalidArgument("--bind and --connect are exclusive");
  }
  const uint64_t sources = uint64_t{o.instances} * o.dp_ranks;
  if (o.port == 0 || o.port + sources - 1 > 65535) {
    return Status::InvalidArgument("--port " + std::to_string(o.port) + ": ports up to port + " +
                                   std::to_string(sources - 1) + " must lie in 1..65535");
  }
  if (o.replay_port > 0 && o.replay_port + sources - 1 > 65535) {
    return Status::InvalidArgument("--replay-port " + std::to_string(o.replay_port) +
                                   ": ports must lie in 1..65535");
  }
  if (o.events_per_batch == 0) return Status::InvalidArgument("--events-per-batch must be at least 1");
  if (o.synth.block_size == 0) return Status::InvalidArgument("--block-size must be at least 1");
  if (o.synth.prompt_blocks == 0) return Status::InvalidArgument("--prompt-blocks must be at least 1");
  if (o.synth.prefix_blocks > o.synth.prompt_blocks) {
    return Status::InvalidArgument("--prefix-blocks " + std::to_string(o.synth.prefix_blocks) +
                                   " exceeds --prompt-blocks " + std::to_string(o.synth.prompt_blocks));
  }
  if (o.capacity < o.synth.prompt_blocks && o.trace.empty()) {
    return Status::InvalidArgument("--capacity " + std::to_string(o.capacity) +
                                   " is smaller than a prompt (--prompt-blocks " +
                                   std::to_string(o.synth.prompt_blocks) + ")");
  }
  if (o.drop_every == 1) return Status::InvalidArgument("--drop-every must be at least 2");
  if (o.restart_after == 1) {
    return Status::InvalidArgument("--restart-after must be at least 2 (a restart shows as a "
                                   "sequence going back below the watermark)");
  }
  if (!(o.speed > 0)) return Status::InvalidArgument("--speed must be positive");
  if (o.rate < 0) return Status::InvalidArgument("--rate must not be negative");
  if (o.synth.zipf < 0) return Status::InvalidArgument("--zipf must not be negative");
  return Status::Ok();
}

}  // namespace

Status RunPublishFake(PublishFakeOptions o) {
  KVINDEX_RETURN_IF_ERROR(CheckOptions(o));
  KVINDEX_ASSIGN_OR_RETURN(WireFormat format, ParseWireFormat(o.format));
  ReplayStyle style = DefaultReplayStyle(format);
  if (!o.replay_style.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(style, ParseReplayStyle(o.replay_style));
  }
  const bool network = o.out.empty();

  // Sources: instance i, rank r on port P + i*R + r (replay Q + i*R + r).
  std::vector<SourceInfo> sources;
  if (o.capture.empty()) {
    for (uint32_t i = 0; i < o.instances; ++i) {
      for (uint32_t r = 0; r < o.dp_ranks; ++r) {
        const uint32_t k = i * o.dp_ranks + r;
        SourceInfo src;
        src.instance = "fake-" + std::to_string(i);
        src.rank = static_cast<DpRank>(r);
        if (o.dp_ranks > 1) src.rank_label = static_cast<DpRank>(r);
        src.first_seq = (format == WireFormat::kMooncake) ? 1 : 0;
        sources.push_back(std::move(src));
        (void)k;
      }
    }
  } else {
    KVINDEX_RETURN_IF_ERROR(GenerateCaptureItems(o, sources, format));
    if (sources.empty()) return Status::Malformed(o.capture + ": no sources in capture");
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    SourceInfo& src = sources[k];
    const std::string host = o.connect_host.empty() ? "*" : o.connect_host;
    src.endpoint = "tcp://" + host + ":" + std::to_string(o.port + k);
    if (o.replay_port > 0) src.replay_endpoint = "tcp://*:" + std::to_string(o.replay_port + k);
    SourceConfig& c = src.config;
    if (o.capture.empty()) {
      c.name = src.instance;
      c.format = SourceFormatHint(format);
      c.model = o.model;
      c.block_size = o.synth.block_size;
      c.dp_rank = src.rank_label;
    }
    // How a subscriber reaches this source: connect to the bound port (or bind where we connect).
    const std::string sub_host = o.connect_host.empty() ? "127.0.0.1" : o.connect_host;
    c.endpoint = "tcp://" + sub_host + ":" + std::to_string(o.port + k);
    c.bind = !o.connect_host.empty();
    c.replay_endpoint =
        o.replay_port > 0 ? "tcp://127.0.0.1:" + std::to_string(o.replay_port + k) : std::string();
    c.topic = o.topic;
  }

  // Workload.
  std::optional<SyntheticPrompts> synthetic;
  std::optional<TracePrompts> trace;
  if (!o.trace.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(trace, TracePrompts::Load(o.trace, o.synth.block_size, sources.size()));
    KVINDEX_RETURN_IF_ERROR(GenerateEngineItems(o, format, sources, nullptr, &*trace));
  } else if (!o.batches_file.empty()) {
    KVINDEX_RETURN_IF_ERROR(GenerateListedItems(o, sources));
    if (format == WireFormat::kMooncake || format == WireFormat::kMooncakeSeed) {
      // Mooncake events carry the model (--model) as the synthetic workload's do.
      for (Item& item : sources[0].items) {
        for (Event& event : item.batch->events) {
          if (auto* stored = std::get_if<BlockStored>(&event); stored && !stored->scope.model) {
            stored->scope.model = o.model;
          }
        }
      }
    }
  } else if (o.capture.empty()) {
    synthetic.emplace(o.synth, sources.size());
    KVINDEX_RETURN_IF_ERROR(GenerateEngineItems(o, format, sources, &*synthetic, nullptr));
  }
  // Encode everything up front.
  for (SourceInfo& src : sources) {
    for (Item& item : src.items) {
      CountEvents(item);
      if (o.capture.empty()) {
        Status st = EncodeEventBatch(*item.batch, format, item.payload);
        if (!st.ok()) {
          return st.WithContext(SourceDisplayName(src.config) + " batch " +
                                std::to_string(item.index) + " (" + o.format + ")");
        }
      }
    }
    AssignFaults(o, src);
  }
  const std::vector<Step> steps = Schedule(sources, !o.capture.empty());

  // The correct subscriber's view: model, queries, --out capture.
  Simulation sim{o, sources, style, o.replay_port > 0, {}, nullptr, std::nullopt, {}, {}, {}, {},
                 0, 0, {}, synthetic ? &*synthetic : nullptr, trace ? &*trace : nullptr};
  sim.pending_drop.assign(sources.size(), std::nullopt);
  sim.last_seq.assign(sources.size(), std::nullopt);
  sim.max_seq_before.assign(sources.size(), std::nullopt);
  sim.max_seq_now.assign(sources.size(), 0);
  sim.base_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  {
    std::mt19937_64 rng(o.seed ^ 0x5eedULL);
    const size_t n = size_t{o.synth.prompt_blocks} * o.synth.block_size;
    for (size_t i = 0; i < n; ++i) sim.probe_unseen.push_back(static_cast<TokenId>(rng() % 1000003 + 1000000));
  }
  for (SourceInfo& src : sources) {
    // The rank the index knows a source's blocks by: the batch's rank when the format sends one
    // (publish-fake sends the source's), else the source's dp_rank label, else rank 0 for an
    // engine and none for a Mooncake store (SourceConfig::dp_rank).
    std::optional<DpRank> rank = src.rank_label;
    const bool store = src.config.is_store();
    if (o.capture.empty() && o.batches_file.empty() && format != WireFormat::kMooncakeSeed &&
        format != WireFormat::kVllmV09 && !(format == WireFormat::kSglang && o.dp_ranks == 1)) {
      rank = src.rank;
    }
    if (!rank && !store) rank = 0;
    sim.model.AddSource(src.instance, rank,
                        src.config.block_size ? src.config.block_size : o.synth.block_size);
  }
  if (!o.emit_queries.empty()) {
    sim.queries.emplace();
    sim.queries->out.open(o.emit_queries, std::ios::trunc);
    if (!sim.queries->out) return Status::IoError(o.emit_queries + ": cannot create");
  }
  if (!o.out.empty()) {
    CaptureWriterOptions wo;
    wo.overwrite = true;
    KVINDEX_ASSIGN_OR_RETURN(sim.capture, CaptureWriter::Create(o.out, wo));
    for (size_t k = 0; k < sources.size(); ++k) {
      KVINDEX_RETURN_IF_ERROR(sim.capture->WriteSourceDefinition(
          SourceId{static_cast<uint32_t>(k)}, SourceConfigToJson(sources[k].config), sim.Now()));
    }
  }
  for (const Step& step : steps) KVINDEX_RETURN_IF_ERROR(sim.Step(step.source, step.index));
  if (sim.queries) {
    // Final queries, answered at the end of the stream (valid for live recordings too).
    for (size_t si = 0; si < sources.size(); ++si) {
      if (sources[si].items.empty()) continue;
      sim.Probe(std::nullopt, sources[si].items.back());
    }
    sim.queries->out.flush();
    if (!sim.queries->out) return Status::IoError(o.emit_queries + ": write failed");
  }
  if (sim.capture) KVINDEX_RETURN_IF_ERROR(sim.capture->Close());

  LiveRun run;
  if (network) KVINDEX_RETURN_IF_ERROR(PublishLive(o, sources, steps, style, run));

  // Summary.
  nlohmann::json summary;
  summary["format"] = o.format;
  summary["replay_style"] = std::string(ReplayStyleName(style));
  uint64_t tb = 0, te = 0, ts = 0, tr = 0, tbytes = 0, drops = 0, dups = 0, corr = 0, rst = 0,
           lost = 0, rreq = 0, rbat = 0, rbad = 0, live = 0;
  summary["sources"] = nlohmann::json::array();
  for (size_t k = 0; k < sources.size(); ++k) {
    const SourceInfo& s = sources[k];
    nlohmann::json j = {{"name", SourceDisplayName(s.config)},
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
                        {"faults", {{"dropped", s.dropped}, {"duplicated", s.duplicated},
                                    {"corrupted", s.corrupted}, {"restarts", s.restarts}}},
                        {"expected_lost", s.lost},
                        {"model_blocks", sim.model.blocks(k)}};
    nlohmann::json seqs = {{"dropped", nlohmann::json::array()},
                           {"duplicated", nlohmann::json::array()},
                           {"corrupted", nlohmann::json::array()}};
    for (const Item& it : s.items) {
      if (it.fault == Fault::kDrop) seqs["dropped"].push_back(it.seq);
      if (it.fault == Fault::kDuplicate) seqs["duplicated"].push_back(it.seq);
      if (it.fault == Fault::kCorrupt) seqs["corrupted"].push_back(it.seq);
    }
    if (s.items.size() <= 10000) j["fault_seqs"] = seqs;
    if (network) {
      const PublisherCounters& c = run.publishers[k]->counters();
      j["live_messages"] = c.batches;
      j["replay_requests"] = c.replay_requests;
      j["replay_batches"] = c.replay_batches;
      j["replay_malformed"] = c.replay_malformed;
      rreq += c.replay_requests;
      rbat += c.replay_batches;
      rbad += c.replay_malformed;
      live += c.batches;
    }
    summary["sources"].push_back(j);
    tb += s.batches;
    te += s.events;
    ts += s.stored;
    tr += s.removed;
    tbytes += s.bytes;
    drops += s.dropped;
    dups += s.duplicated;
    corr += s.corrupted;
    rst += s.restarts;
    lost += s.lost;
  }
  summary["batches"] = tb;
  summary["events"] = te;
  summary["blocks_stored"] = ts;
  summary["blocks_removed"] = tr;
  summary["payload_bytes"] = tbytes;
  summary["faults"] = {{"dropped", drops}, {"duplicated", dups}, {"corrupted", corr},
                       {"restarts", rst}};
  summary["expected_lost"] = lost;
  if (network) {
    summary["live_messages"] = live;
    summary["replay_requests"] = rreq;
    summary["replay_batches"] = rbat;
    summary["replay_malformed"] = rbad;
    summary["send_seconds"] = run.send_seconds;
    if (run.send_seconds > 0) {
      summary["batches_per_second"] = static_cast<double>(tb) / run.send_seconds;
      summary["blocks_per_second"] = static_cast<double>(ts + tr) / run.send_seconds;
    }
  }
  if (!o.out.empty()) summary["out"] = o.out;
  std::fprintf(stderr,
               "publish-fake: %s, %zu source(s): %llu batches, %llu events, %llu blocks stored, "
               "%llu removed; faults: %llu dropped, %llu duplicated, %llu corrupted, %llu "
               "restarts; replay: %llu requests, %llu batches\n",
               o.format.c_str(), sources.size(), static_cast<unsigned long long>(tb),
               static_cast<unsigned long long>(te), static_cast<unsigned long long>(ts),
               static_cast<unsigned long long>(tr), static_cast<unsigned long long>(drops),
               static_cast<unsigned long long>(dups), static_cast<unsigned long long>(corr),
               static_cast<unsigned long long>(rst), static_cast<unsigned long long>(rreq),
               static_cast<unsigned long long>(rbat));
  if (!o.json.empty()) {
    if (o.json == "-") {
      std::cout << summary.dump(1) << "\n";
    } else {
      std::ofstream out(o.json, std::ios::trunc);
      out << summary.dump(1) << "\n";
      if (!out) return Status::IoError(o.json + ": cannot write");
    }
  }
  return Status::Ok();
}

void AddPublishFakeCommand(CLI::App& app, CommandOutcome& outcome) {
  auto opts = std::make_shared<PublishFakeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "publish-fake",
      "Publish synthetic, trace-driven, listed or recorded KV events over ZeroMQ in any wire "
      "format, with fault injection and expected query answers");
  PublishFakeOptions& o = *opts;
  cmd->add_option("--format", o.format,
                  "Wire format: vllm-v0.9, vllm, vllm-map, sglang, mooncake, mooncake-seed")
      ->check(CLI::IsMember({"vllm-v0.9", "vllm", "vllm-map", "sglang", "mooncake", "mooncake-seed"}))
      ->capture_default_str();
  cmd->add_option("--replay-style", o.replay_style,
                  "Replay reply layout: vllm, vllm-topic, mooncake (default: the format's own)")
      ->check(CLI::IsMember({"vllm", "vllm-topic", "mooncake"}));
  cmd->add_flag("--synthetic", o.synthetic,
                "Seeded synthetic workload (the default): shared prefixes with Zipf popularity, "
                "per-source LRU capacity");
  cmd->add_option("--trace", o.trace,
                  "Workload from a Mooncake/Bailian JSONL trace (hash_ids), request i to source "
                  "i mod sources; token ids derived from hash ids");
  cmd->add_option("--capture", o.capture,
                  "Re-publish a capture's live messages at the recorded pace x --speed");
  cmd->add_option("--batches", o.batches_file,
                  "Publish the logical batches of a JSONL file (one {ts, events, dp_rank?} per "
                  "line, events as vLLM names their fields) on one source");
  cmd->add_option("--speed", o.speed, "--capture pace multiplier (2 = twice as fast)")
      ->capture_default_str();
  cmd->add_option("--instances", o.instances, "Instances fake-0..fake-(N-1)")->capture_default_str();
  cmd->add_option("--dp-ranks", o.dp_ranks, "Data-parallel ranks (sources) per instance")
      ->capture_default_str();
  cmd->add_option("--port", o.port, "Instance i, rank r publishes on port P + i*R + r")
      ->capture_default_str();
  cmd->add_option("--replay-port", o.replay_port,
                  "Replay ROUTER of instance i, rank r on Q + i*R + r (0 = no replay endpoint)")
      ->capture_default_str();
  cmd->add_flag("--bind", o.bind, "Bind tcp://*:PORT (the default)");
  cmd->add_option("--connect", o.connect_host,
                  "Connect to tcp://HOST:PORT instead of binding (the subscriber binds)");
  cmd->add_option("--topic", o.topic, "Topic frame of every message (default empty)");
  cmd->add_option("--model", o.model, "Model name (sent by Mooncake formats; used in queries)")
      ->capture_default_str();
  cmd->add_option("--count", o.count, "Batches per source (0 = until the trace or list ends)")
      ->capture_default_str();
  cmd->add_option("--events-per-batch", o.events_per_batch, "Events per batch")
      ->capture_default_str();
  cmd->add_option("--rate", o.rate, "Batches per second per source (0 = as fast as possible)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the synthetic workload")->capture_default_str();
  cmd->add_flag("--blast", o.blast,
                "Send everything as fast as possible (payloads are pre-encoded; unlimited SNDHWM)");
  cmd->add_option("--drop-every", o.drop_every,
                  "Do not send every Nth batch live (it stays in the replay ring; N >= 2)");
  cmd->add_option("--duplicate-every", o.duplicate_every, "Send every Nth batch twice");
  cmd->add_option("--corrupt-every", o.corrupt_every,
                  "Send a corrupt live copy of every Nth batch (the ring keeps the good one)");
  cmd->add_option("--restart-after", o.restart_after,
                  "After N batches per source, restart: empty the cache and ring, reset the sequence");
  cmd->add_option("--ring", o.ring, "Replay ring size in batches")->capture_default_str();
  cmd->add_option("--linger", o.linger,
                  "After the last batch, keep serving replay requests until S seconds pass without one")
      ->capture_default_str();
  cmd->add_option("--wait-subscribers", o.wait_subscribers,
                  "Wait until N subscriptions reached every source (XPUB) before publishing");
  cmd->add_option("--wait-timeout", o.wait_timeout, "Seconds --wait-subscribers waits at most")
      ->capture_default_str();
  cmd->add_option("--hwm", o.hwm, "Send high-water mark in messages (--blast: unlimited)")
      ->capture_default_str();
  cmd->add_option("--emit-queries", o.emit_queries,
                  "Write the SPEC §5 query file with expected answers from publish-fake's own model");
  cmd->add_option("--query-every", o.query_every,
                  "With --emit-queries: also query after every Nth batch of each source");
  cmd->add_option("--out", o.out,
                  "Write the stream as a correct subscriber would have recorded it to a capture "
                  "file instead of publishing");
  cmd->add_option("--json", o.json, "Write the summary as JSON to FILE (- = stdout)");
  cmd->add_option("--block-size", o.synth.block_size, "Tokens per block")->capture_default_str();
  cmd->add_option("--prompt-blocks", o.synth.prompt_blocks, "Synthetic: full blocks per prompt")
      ->capture_default_str();
  cmd->add_option("--prefix-blocks", o.synth.prefix_blocks,
                  "Synthetic: leading blocks taken from a shared prefix")
      ->capture_default_str();
  cmd->add_option("--prefixes", o.synth.prefixes, "Synthetic: distinct shared prefixes")
      ->capture_default_str();
  cmd->add_option("--zipf", o.synth.zipf, "Synthetic: Zipf exponent of prefix popularity (0 = uniform)")
      ->capture_default_str();
  cmd->add_option("--capacity", o.capacity,
                  "Blocks each source's cache holds before evicting (LRU; evictions are removals)")
      ->capture_default_str();
  cmd->callback([opts, &outcome]() {
    outcome.command = "publish-fake";
    PublishFakeOptions run = *opts;
    run.synth.seed = run.seed;
    outcome.status = RunPublishFake(std::move(run));
  });
}

}  // namespace kvindex::cli
