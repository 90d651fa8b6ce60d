// BM_CaptureReplay: a capture of 1-event batches (vLLM positional, one 16-token block each, chains
// of 32 blocks, 4 sources) read, checksum-verified, decoded and applied to a PrefixIndex through
// CaptureReplayer — the whole offline path. Items = batches. Target (docs/benchmarks.md
// "Headline figures"): >= 1 M batches/s. Baselines in the same binary: BM_CaptureRead (read +
// verify only), BM_CaptureDecode (read + verify + decode into a fresh EventBatch per record, no
// index) and BM_CaptureDecodeInto (the same into one reused EventBatch, as the Ingestor decodes),
// so the cost of each stage shows as a ratio.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/files/capture.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/capture_replay.h"
#include "kvindex/ingest/ingest.h"

namespace {

constexpr int kBatches = 200'000;
constexpr int kSources = 4;
constexpr uint32_t kBlock = 16;
constexpr int kChain = 32;

const std::string& CapturePath() {
  static const std::string path = [] {
    std::string p = "/tmp/kvindex-capture-bench-" + std::to_string(::getpid()) + ".kvcap";
    kvindex::CaptureWriterOptions options;
    options.overwrite = true;
    options.fsync_interval = std::chrono::hours(1);
    auto writer = kvindex::CaptureWriter::Create(p, options);
    if (!writer.ok()) std::abort();
    for (int s = 0; s < kSources; ++s) {
      kvindex::SourceConfig config;
      config.name = "vllm-" + std::to_string(s);
      config.format = "vllm";
      config.model = "m";
      config.block_size = kBlock;
      if (!(*writer)->WriteSourceDefinition(kvindex::SourceId{static_cast<uint32_t>(s)},
                                            kvindex::SourceConfigToJson(config), 0).ok()) {
        std::abort();
      }
    }
    std::vector<std::byte> payload;
    const std::string topic = "kv-events";
    for (int i = 0; i < kBatches; ++i) {
      const int source = i % kSources;
      const uint64_t seq = static_cast<uint64_t>(i / kSources);
      const uint64_t position = seq % kChain;  // chains of kChain blocks, then a new root
      kvindex::BlockStored stored;
      stored.block_hashes = {kvindex::EngineHash{seq + 1}};
      if (position != 0) stored.parent = kvindex::EngineHash{seq};
      for (uint32_t t = 0; t < kBlock; ++t) stored.token_ids.push_back(static_cast<uint32_t>(seq * 31 + t));
      stored.scope.block_size = kBlock;
      stored.tier = kvindex::Tier::Gpu();
      kvindex::EventBatch batch;
      batch.ts = 1750000000.0 + i;
      batch.dp_rank = 0;
      batch.events.emplace_back(std::move(stored));
      if (!kvindex::EncodeEventBatch(batch, kvindex::WireFormat::kVllm, payload).ok()) std::abort();
      const auto frames = kvindex::BuildEventMessage(
          std::as_bytes(std::span<const char>(topic.data(), topic.size())), seq, payload);
      std::vector<std::span<const std::byte>> spans(frames.begin(), frames.end());
      if (!(*writer)->WriteFrames(kvindex::CaptureRecordType::kMessage,
                                  kvindex::SourceId{static_cast<uint32_t>(source)}, i, spans).ok()) {
        std::abort();
      }
    }
    if (!(*writer)->Close().ok()) std::abort();
    std::atexit([] { std::remove(CapturePath().c_str()); });
    return p;
  }();
  return path;
}

void BM_CaptureRead(benchmark::State& state) {
  const std::string& path = CapturePath();
  for (auto _ : state) {
    auto reader = kvindex::CaptureReader::Open({path});
    kvindex::CaptureRecord record;
    int64_t n = 0;
    while ((*reader)->Next(record)) ++n;
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations() * kBatches);
}
BENCHMARK(BM_CaptureRead)->Unit(benchmark::kMillisecond);

// Reads the capture and calls `decode(payload)` (returning the events decoded) per message.
template <typename Decode>
void ReadAndDecode(benchmark::State& state, Decode&& decode) {
  const std::string& path = CapturePath();
  for (auto _ : state) {
    auto reader = kvindex::CaptureReader::Open({path});
    kvindex::CaptureRecord record;
    int64_t events = 0;
    while ((*reader)->Next(record)) {
      if (record.type != kvindex::CaptureRecordType::kMessage) continue;
      events += decode(record.frames[2]);
    }
    benchmark::DoNotOptimize(events);
  }
  state.SetItemsProcessed(state.iterations() * kBatches);
}

void BM_CaptureDecode(benchmark::State& state) {
  ReadAndDecode(state, [](std::span<const std::byte> payload) -> int64_t {
    auto batch = kvindex::DecodeEventBatch(payload);
    return batch.ok() ? static_cast<int64_t>(batch->events.size()) : 0;
  });
}
BENCHMARK(BM_CaptureDecode)->Unit(benchmark::kMillisecond);

// As BM_CaptureDecode, but into one reused EventBatch (DecodeEventBatchInto), as the Ingestor
// decodes: the decode stage of BM_CaptureReplay.
void BM_CaptureDecodeInto(benchmark::State& state) {
  kvindex::EventBatch batch;
  ReadAndDecode(state, [&batch](std::span<const std::byte> payload) -> int64_t {
    return kvindex::DecodeEventBatchInto(payload, batch).ok()
               ? static_cast<int64_t>(batch.events.size())
               : 0;
  });
}
BENCHMARK(BM_CaptureDecodeInto)->Unit(benchmark::kMillisecond);

void BM_CaptureReplay(benchmark::State& state) {
  const std::string& path = CapturePath();
  for (auto _ : state) {
    kvindex::PrefixIndex index;
    kvindex::Ingestor ingestor(&index);
    kvindex::CaptureReplayer replayer(ingestor);
    auto reader = kvindex::CaptureReader::Open({path});
    if (!replayer.ApplyAll(**reader).ok()) state.SkipWithError("replay failed");
    state.PauseTiming();
    if (index.stats().presences == 0) state.SkipWithError("nothing applied");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBatches);
}
BENCHMARK(BM_CaptureReplay)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
