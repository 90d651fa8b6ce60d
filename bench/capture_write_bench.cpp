// BM_CaptureWrite: what recording costs, as `record` and `subscribe --record` write — 1,000,000
// message records of 163 bytes (a 1-event vLLM batch: topic, sequence and a 98-byte payload), with
// a background fsync thread, drop-behind and coalescing, one Flush() per "poll cycle" of
// range(1) records, then Close(). The file is a real one in the temporary directory ($TMPDIR, else
// /tmp), removed after each iteration.
//
// range(0): 0 = write(2) per cycle (the baseline of docs/benchmarks.md "Capture"), 1 = mapped
// windows with 4 KiB pages, 2 = mapped windows with large folios (what the tools use). Time is the
// process's CPU time over all its threads (the writer's fsync and window threads included), so the
// figure is the whole cost of recording, not only the recording thread's share; real time is
// reported too. Items = records. Mode 0 in the same run is the baseline: report modes 1 and 2 as
// ratios to it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "kvindex/files/capture.h"

namespace {

constexpr int kRecords = 1'000'000;

void BM_CaptureWrite(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int per_cycle = static_cast<int>(state.range(1));
  const std::string topic = "kv-events";
  std::vector<std::byte> seq(8, std::byte{0});
  const std::vector<std::byte> payload(98, std::byte{0x93});
  const std::vector<std::span<const std::byte>> frames = {
      std::as_bytes(std::span<const char>(topic.data(), topic.size())), seq, payload};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kvindex-write-bench-" + std::to_string(::getpid()) + ".kvcap"))
                               .string();
  kvindex::CaptureWriterOptions options;
  options.overwrite = true;
  options.background_sync = true;  // as record.cpp and subscribe.cpp set them
  options.drop_behind = true;
  options.mapped = mode != 0;
  options.map_large_folios = mode == 2;
  uint64_t bytes = 0;
  for (auto _ : state) {
    auto writer = kvindex::CaptureWriter::Create(path, options);
    if (!writer.ok() || (*writer)->mapped() != (mode != 0)) {
      state.SkipWithError("cannot create the capture (or map it)");
      return;
    }
    kvindex::CaptureWriter& w = **writer;
    w.set_coalescing(true);
    for (int i = 0; i < kRecords; ++i) {
      seq[7] = static_cast<std::byte>(i);
      if (!w.WriteFrames(kvindex::CaptureRecordType::kMessage, kvindex::SourceId{0}, i, frames).ok()) {
        state.SkipWithError("write failed");
        return;
      }
      if ((i + 1) % per_cycle == 0 && (!w.Flush().ok() || !w.MaybeSync().ok())) {
        state.SkipWithError("flush failed");
        return;
      }
    }
    if (!w.Close().ok()) {
      state.SkipWithError("close failed");
      return;
    }
    bytes = w.bytes_written();
    std::filesystem::remove(path);
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_CaptureWrite)
    ->ArgNames({"mode", "per_cycle"})
    ->ArgsProduct({{0, 1, 2}, {1, 8, 64}})
    ->MeasureProcessCPUTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
