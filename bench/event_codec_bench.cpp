// BM_EventCodec_Decode/<format>/<events>x<blocks>: DecodeEventBatch of one payload into a fresh
// EventBatch; BM_EventCodec_DecodeInto/...: DecodeEventBatchInto of the same payload into one
// reused EventBatch (what the live and capture-replay paths do);
// BM_EventCodec_Encode/<format>/<events>x<blocks>: EncodeEventBatch of the same batch;
// BM_MsgpackUnpack_Baseline/<format>/<events>x<blocks>: msgpack-cxx's generic msgpack::unpack of
// the same payload into an object tree (the floor a tree-building decoder pays, before it has
// filled any EventBatch). Bytes = payload bytes; items = blocks.
//
// Workload (fixed seed 42): every event a BlockStored of <blocks> blocks of 16 tokens (token ids
// uniform in [0, 151936), a Qwen-sized vocabulary; hashes uniform u64; a parent on every event),
// tier GPU where the format has one. Mooncake RFC events carry the store publisher's keys;
// mooncake-seed events are a BlockStoreEvent (hashes as an array) each.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <msgpack.hpp>

#include "kvindex/codec/event_codec.h"

namespace {

using kvindex::WireFormat;

constexpr uint32_t kBlockSize = 16;

kvindex::EventBatch MakeBatch(WireFormat format, int events, int blocks) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint32_t> token(0, 151935);
  kvindex::EventBatch batch;
  batch.ts = 1750000000.25;
  if (format != WireFormat::kVllmV09 && format != WireFormat::kMooncakeSeed) batch.dp_rank = 0;
  for (int e = 0; e < events; ++e) {
    kvindex::BlockStored s;
    for (int b = 0; b < blocks; ++b) s.block_hashes.push_back(kvindex::EngineHash{rng()});
    s.parent = kvindex::EngineHash{rng()};
    for (int t = 0; t < blocks * static_cast<int>(kBlockSize); ++t) s.token_ids.push_back(token(rng));
    s.scope.block_size = kBlockSize;
    switch (format) {
      case WireFormat::kVllmV09: break;
      case WireFormat::kVllm:
      case WireFormat::kVllmMap:
      case WireFormat::kTrtllm:
      case WireFormat::kSglang: s.tier = kvindex::Tier::Gpu(); break;
      case WireFormat::kLmcache: s.tier = kvindex::Tier::Cpu(); break;
      case WireFormat::kSglangEagle:
        s.tier = kvindex::Tier::Gpu();
        s.wire.eagle_next = 1;
        break;
      case WireFormat::kMooncake:
        s.tier = kvindex::Tier::Cpu();
        s.wire.tier_spelling = "cpu";
        s.scope.model = "qwen";
        s.scope.tenant = "default";
        s.wire.event_id = static_cast<uint64_t>(e);
        s.wire.timestamp_ms = 1750000000250;
        s.wire.backend_id = "store-0";
        s.wire.base_block_idx = 0;
        break;
      case WireFormat::kMooncakeSeed:
        s.scope.model = "qwen";
        s.wire.object_key = "key-" + std::to_string(e);
        break;
    }
    const std::string key = s.wire.object_key.value_or("");
    batch.events.push_back(std::move(s));
    if (format == WireFormat::kMooncakeSeed) {
      batch.events.push_back(kvindex::StoreUpdate{
          key, {kvindex::Replica{kvindex::Tier::Cpu(), "tcp://10.0.0.1:6000", "memory"}}});
    }
  }
  return batch;
}

std::vector<std::byte> Encode(const kvindex::EventBatch& batch, WireFormat format) {
  std::vector<std::byte> out;
  if (!kvindex::EncodeEventBatch(batch, format, out).ok()) std::abort();
  return out;
}

void Report(benchmark::State& state, size_t bytes, int blocks_total) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * blocks_total);
  state.counters["payload_bytes"] = static_cast<double>(bytes);
}

void Decode(benchmark::State& state, WireFormat format, int events, int blocks) {
  const auto payload = Encode(MakeBatch(format, events, blocks), format);
  for (auto _ : state) {
    auto batch = kvindex::DecodeEventBatch(payload);
    if (!batch.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(batch);
  }
  Report(state, payload.size(), events * blocks);
}

// Into one reused EventBatch (DecodeEventBatchInto), as the live and capture-replay paths decode.
void DecodeInto(benchmark::State& state, WireFormat format, int events, int blocks) {
  const auto payload = Encode(MakeBatch(format, events, blocks), format);
  kvindex::EventBatch batch;
  for (auto _ : state) {
    if (!kvindex::DecodeEventBatchInto(payload, batch).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(batch.events.data());
    benchmark::ClobberMemory();
  }
  Report(state, payload.size(), events * blocks);
}

void EncodeBench(benchmark::State& state, WireFormat format, int events, int blocks) {
  const auto batch = MakeBatch(format, events, blocks);
  std::vector<std::byte> out;
  for (auto _ : state) {
    if (!kvindex::EncodeEventBatch(batch, format, out).ok()) state.SkipWithError("encode failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  Report(state, out.size(), events * blocks);
}

void Unpack(benchmark::State& state, WireFormat format, int events, int blocks) {
  const auto payload = Encode(MakeBatch(format, events, blocks), format);
  const char* data = reinterpret_cast<const char*>(payload.data());
  for (auto _ : state) {
    msgpack::object_handle handle = msgpack::unpack(data, payload.size());
    benchmark::DoNotOptimize(handle.get().type);
  }
  Report(state, payload.size(), events * blocks);
}

int RegisterAll() {
  const WireFormat formats[] = {WireFormat::kVllm, WireFormat::kVllmV09, WireFormat::kVllmMap,
                                WireFormat::kSglang, WireFormat::kMooncake,
                                WireFormat::kMooncakeSeed};
  const std::pair<int, int> sizes[] = {{50, 1}, {50, 32}, {1, 1}};
  for (WireFormat f : formats) {
    for (auto [events, blocks] : sizes) {
      const std::string suffix = "/" + std::string(kvindex::WireFormatName(f)) + "/" +
                                 std::to_string(events) + "x" + std::to_string(blocks);
      benchmark::RegisterBenchmark(("BM_EventCodec_Decode" + suffix).c_str(), Decode, f, events,
                                   blocks);
      benchmark::RegisterBenchmark(("BM_EventCodec_DecodeInto" + suffix).c_str(), DecodeInto, f,
                                   events, blocks);
      benchmark::RegisterBenchmark(("BM_EventCodec_Encode" + suffix).c_str(), EncodeBench, f,
                                   events, blocks);
      benchmark::RegisterBenchmark(("BM_MsgpackUnpack_Baseline" + suffix).c_str(), Unpack, f,
                                   events, blocks);
    }
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace

BENCHMARK_MAIN();
