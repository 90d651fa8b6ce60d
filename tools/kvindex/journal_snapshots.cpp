// JournalSnapshotter and the replica's start from a snapshot (journal_snapshots.h).
#include "journal_snapshots.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <string>
#include <utility>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"
#include "kvindex/snapshot/snapshot.h"

#include "snapshot_keeper.h"
#include "snapshot_tools.h"

namespace kvindex::cli {
namespace {

// The state, its sequence states and the journal cut of one moment on the I/O thread.
struct CutState {
  ConsistentState state;
  JournalCut cut;
};

// Takes a CutState on the I/O thread if no source waits for a replay or holds batches behind a
// hole there (the index would then miss batches the journal already holds before the cut).
// nullopt: not such a moment, or the I/O thread did not answer within 2 s.
std::optional<CutState> TakeCut(Subscriber& subscriber, const PrefixIndex& index,
                                JournalPublisher& journal) {
  auto promise = std::make_shared<std::promise<std::optional<CutState>>>();
  std::future<std::optional<CutState>> future = promise->get_future();
  subscriber.Submit([promise, &index, &journal](Ingestor& ingestor) {
    for (size_t i = 0; i < ingestor.source_count(); ++i) {
      const SourceId id{static_cast<uint32_t>(i)};
      if (ingestor.waiting(id) || ingestor.held(id) != 0 || ingestor.replay_outstanding(id)) {
        promise->set_value(std::nullopt);
        return;
      }
    }
    CutState out{ConsistentState{index.CopyState(), SequenceStates(ingestor)}, journal.Cut()};
    promise->set_value(std::move(out));
  });
  if (future.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return std::nullopt;
  return future.get();
}

// This process among the ingesters of a journal: host, pid and a random word.
std::string WriterId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device random;
  char tail[32];
  std::snprintf(tail, sizeof tail, ":%d:%08x", static_cast<int>(getpid()), random());
  return std::string(host[0] != '\0' ? host : "host") + tail;
}

}  // namespace

JournalSnapshotter::JournalSnapshotter(JournalOptions options, double interval_s, size_t keep,
                                       Subscriber& subscriber, const PrefixIndex& index,
                                       JournalPublisher& journal, bool warm)
    : options_(std::move(options)),
      interval_s_(interval_s),
      keep_(keep),
      subscriber_(subscriber),
      index_(index),
      journal_(journal),
      warm_(warm),
      writer_id_(WriterId()) {}

JournalSnapshotter::~JournalSnapshotter() { Stop(); }

Result<bool> JournalSnapshotter::HoldLease() {
  const JournalPublisherStatus journal = journal_.status();
  if (!journal.stream_start_known) return false;  // not connected yet
  if (!warm_ && journal.stream_start_seq != 0) {
    bool first;
    {
      std::lock_guard lock(mu_);
      first = !announced_;
      announced_ = true;
    }
    if (first) {
      Log(LogLevel::kInfo,
          "journal snapshots: not written by this ingester: it started with an empty index on a "
          "journal that already held " +
              std::to_string(journal.stream_start_seq) +
              " records (warm-start it from a sibling, --warm-from http://HOST:PORT, to let it "
              "write them)");
    }
    return false;
  }
  if (!store_) {
    KVINDEX_ASSIGN_OR_RETURN(store_, JournalSnapshotStore::Open(options_, std::chrono::seconds(2),
                                                                /*create=*/true));
  }
  const auto ttl = std::max(std::chrono::milliseconds(10000),
                            std::chrono::milliseconds(static_cast<int64_t>(interval_s_ * 3000)));
  const Result<JournalSnapshotLease> held = store_->HoldWriterLease(writer_id_, ttl);
  if (!held.ok()) {
    // Not known to hold it: this round writes nothing, and /healthz does not claim the lease.
    std::lock_guard lock(mu_);
    status_.writer = false;
    return held.status();
  }
  const JournalSnapshotLease& lease = *held;
  bool changed;
  {
    std::lock_guard lock(mu_);
    changed = status_.writer != lease.held || !announced_;
    status_.writer = lease.held;
    announced_ = true;
  }
  if (changed) {
    Log(LogLevel::kInfo,
        lease.held ? "journal snapshots: this ingester (" + writer_id_ + ") writes them"
                   : "journal snapshots: ingester " +
                         (lease.holder.empty() ? std::string("(unknown)") : lease.holder) +
                         " writes them; this one stands by");
  }
  return lease.held;
}

void JournalSnapshotter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void JournalSnapshotter::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A clean stop hands the lease over at once.
  bool writer;
  {
    std::lock_guard lock(mu_);
    writer = status_.writer && !released_;
    released_ = true;
  }
  if (writer && store_) store_->ReleaseWriterLease(writer_id_);
}

JournalSnapshotterStatus JournalSnapshotter::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

Status JournalSnapshotter::WriteOne() {
  KVINDEX_ASSIGN_OR_RETURN(const bool writer, HoldLease());
  if (!writer) return Status::Ok();
  // A moment when no source waits: tried every 200 ms for up to 10 s.
  std::optional<CutState> taken;
  for (int attempt = 0; attempt < 50 && !taken; ++attempt) {
    {
      std::unique_lock lock(mu_);
      if (attempt > 0 &&
          cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
        return Status::Ok();
      }
    }
    taken = TakeCut(subscriber_, index_, journal_);
  }
  if (!taken) {
    return Status::Unavailable("no moment without a source waiting for a replay in 10 s");
  }
  KVINDEX_ASSIGN_OR_RETURN(const uint64_t covered,
                           journal_.WaitCovered(taken->cut, std::chrono::seconds(10)));
  std::vector<uint64_t> keys = std::move(taken->cut.source_keys);
  keys.resize(taken->state.index.sources.size(), 0);
  std::vector<std::optional<JournalLink>> links = std::move(taken->cut.last_links);
  links.resize(keys.size());
  const ConsistentState& state = taken->state;
  const auto started = SteadyClock::now();
  KVINDEX_ASSIGN_OR_RETURN(
      const JournalSnapshotManifest manifest,
      store_->Write(covered, std::move(keys), std::move(links),
                    [&state](const std::function<bool(std::string_view)>& sink) {
                      return WriteSnapshot(state.index, state.seq, RealtimeNs(), sink).status();
                    }));
  const Result<size_t> pruned = store_->Prune(keep_);
  if (!pruned.ok())
    Log(LogLevel::kWarn, "journal snapshots not pruned: " + pruned.status().message());
  const size_t removed = pruned.ok() ? *pruned : 0;
  {
    std::lock_guard lock(mu_);
    ++status_.written;
    status_.last_covered_seq = covered;
  }
  Log(LogLevel::kInfo, "journal snapshot " + std::to_string(manifest.id) + ": covers seq " +
                           std::to_string(covered) + ", " + std::to_string(manifest.bytes) +
                           " bytes in " + std::to_string(manifest.chunks.size()) + " chunk(s), " +
                           std::to_string(state.index.presences) + " presences, written in " +
                           std::to_string(static_cast<int64_t>(SecondsSince(started) * 1000)) +
                           " ms" +
                           (removed != 0 ? ", " + std::to_string(removed) + " older removed" : ""));
  return Status::Ok();
}

void JournalSnapshotter::Loop() {
  const auto period =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(interval_s_));
  auto next = SteadyClock::now() + period;
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (cv_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    const Status written = WriteOne();
    if (!written.ok()) {
      Log(LogLevel::kWarn, "journal snapshot not written: " + written.message());
      if (written.code() == StatusCode::kUnavailable) store_.reset();  // reconnect next time
    }
    lock.lock();
    if (!written.ok()) ++status_.failed;
    next = SteadyClock::now() + period;
  }
}

Result<ReplicaStart> StartFromJournalSnapshot(const JournalOptions& journal, IndexOptions options,
                                              std::chrono::milliseconds connect_wait,
                                              std::unique_ptr<PrefixIndex>& index,
                                              std::unique_ptr<JournalApplier>& applier) {
  const auto fresh = [&] {
    applier.reset();
    index = std::make_unique<PrefixIndex>(options);
    applier = std::make_unique<JournalApplier>(index.get());
  };
  fresh();
  Result<std::unique_ptr<JournalSnapshotStore>> store =
      JournalSnapshotStore::Open(journal, connect_wait, /*create=*/false);
  if (!store.ok()) {
    if (store.status().code() == StatusCode::kInvalidArgument) return store.status();
    Log(LogLevel::kInfo, "replica: no journal snapshot (" + store.status().message() +
                             "): starting from the stream's first record");
    return ReplicaStart{};
  }
  std::vector<std::string> problems;
  Result<std::vector<JournalSnapshotManifest>> manifests = (*store)->List(problems);
  for (const std::string& problem : problems) {
    Log(LogLevel::kWarn, "replica: skipping journal snapshot: " + problem);
  }
  if (!manifests.ok()) {
    Log(LogLevel::kWarn, "replica: journal snapshots not listed: " + manifests.status().message());
    return ReplicaStart{};
  }
  for (const JournalSnapshotManifest& manifest : *manifests) {
    fresh();
    const std::string name = "journal snapshot " + std::to_string(manifest.id);
    SnapshotReader reader(name, index.get());
    const Status fed =
        (*store)->Read(manifest, [&reader](std::string_view bytes) { return reader.Feed(bytes); });
    Result<SnapshotInfo> info = fed.ok() ? reader.Finish() : Result<SnapshotInfo>(fed);
    if (!info.ok()) {
      Log(LogLevel::kWarn, "replica: skipping " + name + " (covers seq " +
                               std::to_string(manifest.covered_seq) +
                               "): " + info.status().message());
      continue;
    }
    KVINDEX_RETURN_IF_ERROR(
        applier->StartFrom(info->sources, info->seq, manifest.source_keys, manifest.last_links,
                           manifest.covered_seq)
            .WithContext(name));
    Log(LogLevel::kInfo, "replica: loaded " + name + ": covers seq " +
                             std::to_string(manifest.covered_seq) + ", " +
                             std::to_string(info->blocks) + " blocks, " +
                             std::to_string(info->presences) + " presences");
    return ReplicaStart{"snapshot", manifest.covered_seq, manifest.id};
  }
  if (!manifests->empty() || !problems.empty()) {
    Log(LogLevel::kWarn,
        "replica: no journal snapshot reads: starting from the stream's first "
        "record");
  }
  fresh();
  return ReplicaStart{};
}

}  // namespace kvindex::cli
