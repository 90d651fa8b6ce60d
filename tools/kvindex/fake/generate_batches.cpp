#include "fake/generate_batches.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/core/clock.h"
#include "kvindex/files/capture.h"

#include "fake/logical_batch.h"

namespace kvindex::cli {
namespace {

std::string SourceFormatHint(WireFormat f) {
  switch (f) {
    case WireFormat::kSglang:
      return "sglang";
    case WireFormat::kSglangEagle:
      return "sglang-eagle";
    case WireFormat::kTrtllm:
      return "trtllm";
    case WireFormat::kLmcache:
      return "lmcache";
    case WireFormat::kMooncake:
    case WireFormat::kMooncakeSeed:
      return "mooncake";
    default:
      return "vllm";
  }
}

// How a FakeCache spells its events in `format`.
FakeEventStyle EngineStyle(const PublishFakeOptions& o, WireFormat format) {
  FakeEventStyle style;
  style.block_size = o.synth.block_size;
  style.skipped_context = o.format == "vllm-hybrid-skipped";
  style.sparse = o.format == "vllm-hybrid-sparse" || style.skipped_context;
  style.hybrid = o.format == "vllm-hybrid" || style.sparse;
  switch (format) {
    case WireFormat::kVllmV09:
      break;  // no medium in v0.9
    case WireFormat::kSglang:
      break;  // the earliest SGLang era has no medium either
    case WireFormat::kSglangEagle:
      style.eagle = true;  // bigram pairs: a block is stored once the token after it is known
      break;
    case WireFormat::kVllm:
    case WireFormat::kVllmMap:
    case WireFormat::kTrtllm:
      style.tier = Tier::Gpu();
      break;
    case WireFormat::kLmcache:
      style.tier = Tier::Cpu();  // LMCache's connector reports its CPU store
      break;
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
  return style;
}

// Synthetic or trace prompts (exactly one of `synthetic`, `trace`) served by a FakeCache per
// source; every batch takes --events-per-batch wire events of what the cache published.
Status GenerateEngineItems(const PublishFakeOptions& o, WireFormat format,
                           std::vector<FakeSource>& sources, SyntheticPrompts* synthetic,
                           TracePrompts* trace) {
  const FakeEventStyle style = EngineStyle(o, format);
  const bool carries_rank =
      format == WireFormat::kVllm || format == WireFormat::kVllmMap ||
      format == WireFormat::kTrtllm || format == WireFormat::kLmcache ||
      format == WireFormat::kMooncake ||
      ((format == WireFormat::kSglang || format == WireFormat::kSglangEagle) && o.dp_ranks > 1);
  // Timestamps in whole milliseconds (Mooncake RFC batches carry integer milliseconds).
  const int64_t t0_ms = RealtimeNs() / 1'000'000;
  // Every prompt is materialised before the first send: bounded, so that no flag or trace line
  // ends in an allocation failure.
  uint64_t generated = 0;
  for (size_t si = 0; si < sources.size(); ++si) {
    FakeSource& src = sources[si];
    FakeCache cache(o.capacity, style);
    std::vector<Event> pending;
    std::vector<TokenId> recent;
    std::deque<std::pair<std::vector<TokenId>, uint64_t>> served;  // prompt, events through it
    uint64_t produced = 0, consumed = 0, idle_prompts = 0;
    uint64_t seq = src.first_seq;
    bool exhausted = false;
    for (uint64_t k = 0; o.count == 0 || k < o.count; ++k) {
      FakeBatch item;
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
        const uint64_t next_tokens = synthetic
                                         ? uint64_t{o.synth.prompt_blocks} * o.synth.block_size
                                         : trace->NextTokens(si);
        if (next_tokens > kMaxGeneratedTokens - std::min(generated, kMaxGeneratedTokens)) {
          return Status::InvalidArgument(
              "the workload exceeds the 200000000 token ids publish-fake generates before "
              "sending: lower --count, --events-per-batch or --block-size");
        }
        generated += next_tokens;
        std::optional<std::vector<TokenId>> prompt;
        if (synthetic)
          prompt = synthetic->Next(si);
        else
          prompt = trace->Next(si);
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

// --batches FILE: the logical batches of the file, on the one source.
Status GenerateListedItems(const PublishFakeOptions& o, WireFormat format,
                           std::vector<FakeSource>& sources) {
  std::ifstream in(o.batches_file);
  if (!in) return Status::NotFound(o.batches_file + ": cannot open");
  std::string line;
  size_t line_no = 0;
  uint64_t seq = sources[0].first_seq;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    KVINDEX_ASSIGN_OR_RETURN(
        EventBatch batch,
        ParseLogicalBatch(line, o.batches_file + ": line " + std::to_string(line_no)));
    FakeBatch item;
    item.source = 0;
    item.index = sources[0].items.size();
    item.seq = seq++;
    item.batch = std::move(batch);
    sources[0].items.push_back(std::move(item));
    if (o.count > 0 && sources[0].items.size() >= o.count) break;
  }
  if (format == WireFormat::kMooncake || format == WireFormat::kMooncakeSeed) {
    // Mooncake events carry the model (--model) as the synthetic workload's do.
    for (FakeBatch& item : sources[0].items) {
      for (Event& event : item.batch->events) {
        if (auto* stored = std::get_if<BlockStored>(&event); stored && !stored->scope.model) {
          stored->scope.model = o.model;
        }
      }
    }
  }
  return Status::Ok();
}

// --capture FILE: one source per source definition, with its well-formed live messages (at the
// recorded pace scaled by --speed).
Status GenerateCaptureItems(const PublishFakeOptions& o, std::vector<FakeSource>& sources) {
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
      FakeSource src;
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
    FakeSource& src = sources[static_cast<size_t>(index_of[record.source.value])];
    if (o.count > 0 && src.items.size() >= o.count) continue;
    if (first_ns < 0) first_ns = record.recv_ns;
    FakeBatch item;
    item.source = static_cast<size_t>(index_of[record.source.value]);
    item.index = src.items.size();
    item.seq = view->seq;
    item.payload.assign(view->payload.begin(), view->payload.end());
    item.offset_ns = static_cast<int64_t>(static_cast<double>(record.recv_ns - first_ns) / o.speed);
    auto decoded = DecodeEventBatch(item.payload, FormatHint::kAuto);
    if (decoded.ok()) item.batch = std::move(*decoded);
    if (!src.items.empty() && item.seq <= src.items.back().seq && item.seq <= 1)
      item.restart = true;
    src.items.push_back(std::move(item));
  }
  if (!reader->io_status().ok()) return reader->io_status().WithContext(o.capture);
  return Status::Ok();
}

// The fake's own sources: instance i, rank r is source i*R + r.
std::vector<FakeSource> EngineSources(const PublishFakeOptions& o, WireFormat format) {
  std::vector<FakeSource> sources;
  for (uint32_t i = 0; i < o.instances; ++i) {
    for (uint32_t r = 0; r < o.dp_ranks; ++r) {
      FakeSource src;
      src.instance = "fake-" + std::to_string(i);
      src.rank = static_cast<DpRank>(r);
      if (o.dp_ranks > 1) src.rank_label = static_cast<DpRank>(r);
      src.first_seq = (format == WireFormat::kMooncake) ? 1 : 0;
      sources.push_back(std::move(src));
    }
  }
  return sources;
}

// Source k publishes on port P + k (replay Q + k), bound or connected; its definition says how a
// subscriber reaches it. A capture's sources keep their recorded definitions otherwise.
void SetEndpoints(const PublishFakeOptions& o, WireFormat format,
                  std::vector<FakeSource>& sources) {
  for (size_t k = 0; k < sources.size(); ++k) {
    FakeSource& src = sources[k];
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
}

// Counts every batch and encodes it in `format` (a capture's payloads stay as recorded).
Status EncodeItems(const PublishFakeOptions& o, WireFormat format,
                   std::vector<FakeSource>& sources) {
  for (FakeSource& src : sources) {
    for (FakeBatch& item : src.items) {
      CountEvents(item);
      if (o.capture.empty()) {
        Status st = EncodeEventBatch(*item.batch, format, item.payload);
        if (!st.ok()) {
          return st.WithContext(FakeSourceName(src.config) + " batch " +
                                std::to_string(item.index) + " (" + o.format + ")");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<FakeStream> GenerateStream(const PublishFakeOptions& o, WireFormat format) {
  FakeStream stream;
  std::vector<FakeSource>& sources = stream.sources;
  if (o.capture.empty()) {
    sources = EngineSources(o, format);
  } else {
    KVINDEX_RETURN_IF_ERROR(GenerateCaptureItems(o, sources));
    if (sources.empty()) return Status::Malformed(o.capture + ": no sources in capture");
  }
  SetEndpoints(o, format, sources);
  if (!o.trace.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(stream.trace,
                             TracePrompts::Load(o.trace, o.synth.block_size, sources.size()));
    KVINDEX_RETURN_IF_ERROR(GenerateEngineItems(o, format, sources, nullptr, &*stream.trace));
  } else if (!o.batches_file.empty()) {
    KVINDEX_RETURN_IF_ERROR(GenerateListedItems(o, format, sources));
  } else if (o.capture.empty()) {
    stream.synthetic.emplace(o.synth, sources.size());
    KVINDEX_RETURN_IF_ERROR(GenerateEngineItems(o, format, sources, &*stream.synthetic, nullptr));
  }
  KVINDEX_RETURN_IF_ERROR(EncodeItems(o, format, sources));
  return stream;
}

}  // namespace kvindex::cli
