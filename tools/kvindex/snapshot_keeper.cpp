// SnapshotKeeper and the consistent state (snapshot_keeper.h).
#include "snapshot_keeper.h"

#include <chrono>
#include <filesystem>
#include <future>
#include <utility>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"

#include "snapshot_tools.h"

namespace kvindex::cli {

// The I/O thread only fixes the copy's point beside the sequence states (a short pause); the
// records and maps are copied here, while it goes on (StateCopy, index_state.h).
std::optional<ConsistentState> TakeState(Subscriber& subscriber, const PrefixIndex& index) {
  struct Begun {
    StateCopy copy;
    std::vector<SourceSeqState> seq;
  };
  auto promise = std::make_shared<std::promise<Begun>>();
  std::future<Begun> future = promise->get_future();
  subscriber.Submit([promise, &index](Ingestor& ingestor) {
    StateCopy copy = index.BeginCopy();
    promise->set_value(Begun{std::move(copy), SequenceStates(ingestor)});
  });
  if (future.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return std::nullopt;
  Begun begun = future.get();
  return ConsistentState{begun.copy.Finish(), std::move(begun.seq)};
}

std::optional<SnapshotInfo> LoadNewestSnapshot(const std::string& dir, IndexOptions options,
                                               std::unique_ptr<PrefixIndex>& index) {
  for (const std::string& path : ListSnapshots(dir)) {
    index = std::make_unique<PrefixIndex>(options);
    Result<SnapshotInfo> info = ReadSnapshotFile(path, index.get());
    if (info.ok()) {
      Log(LogLevel::kInfo, "loaded snapshot " + path + ": " + std::to_string(info->blocks) +
                               " blocks, " + std::to_string(info->presences) + " presences");
      return *info;
    }
    Log(LogLevel::kWarn, "skipping snapshot: " + info.status().message());
  }
  index = std::make_unique<PrefixIndex>(options);
  return std::nullopt;
}

SnapshotKeeper::SnapshotKeeper(std::string dir, double interval_s, size_t keep,
                               Subscriber& subscriber, const PrefixIndex& index)
    : dir_(std::move(dir)), interval_s_(interval_s), keep_(keep), subscriber_(subscriber),
      index_(index) {}

SnapshotKeeper::~SnapshotKeeper() { Stop(); }

void SnapshotKeeper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SnapshotKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status SnapshotKeeper::Write(const ConsistentState& state) {
  const std::string path = SnapshotPath(dir_, RealtimeNs());
  const auto started = SteadyClock::now();
  Result<uint64_t> bytes = WriteSnapshotFile(path, state.index, state.seq, RealtimeNs());
  if (!bytes.ok()) return bytes.status();
  PruneSnapshots(dir_, keep_);
  Log(LogLevel::kInfo, "snapshot " + path + ": " + std::to_string(*bytes) + " bytes, " +
                           std::to_string(state.index.presences) + " presences, writer paused " +
                           std::to_string(state.index.pause_ns / 1000) + " us at the point and " +
                           std::to_string(state.index.writer_max_ns / 1000) + " us at most (" +
                           std::to_string(state.index.writer_cpu_max_ns / 1000) + " us CPU, " +
                           std::to_string(state.index.writer_copies) + " pieces copied, " +
                           std::to_string(state.index.writer_ns / 1000) + " us), written in " +
                           std::to_string(static_cast<int64_t>(SecondsSince(started) * 1000)) +
                           " ms");
  return Status::Ok();
}

void SnapshotKeeper::Loop() {
  const auto period = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(interval_s_));
  auto next = SteadyClock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (cv_.wait_until(lock, next, [this] { return stop_; })) break;
    next = SteadyClock::now() + period;
    lock.unlock();
    std::optional<ConsistentState> state = TakeState(subscriber_, index_);
    if (state) {
      if (Status st = Write(*state); !st.ok()) Log(LogLevel::kWarn, "snapshot: " + st.message());
    }
    lock.lock();
  }
}

}  // namespace kvindex::cli
