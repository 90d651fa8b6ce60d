// CaptureWriter::Syncer: the background thread of CaptureWriterOptions::background_sync (private
// to the files layer). Every interval it fdatasyncs the current file if data reached it since the
// last fsync. With drop_behind it also wakes every kDropBehindTick: it starts the writeback of what
// was written since its last tick (sync_file_range), waits for the writeback it started one tick
// earlier, and drops those pages from the page cache (POSIX_FADV_DONTNEED).
//
// Thread safety: the writer swaps the file (SetFile) under the same lock the thread works under,
// so the thread never acts on a closed or reused descriptor; Written() is one atomic store on the
// recording thread, inline because it runs once per record. The counters may be read by any
// thread.
#ifndef KVINDEX_FILES_CAPTURE_SYNCER_H_
#define KVINDEX_FILES_CAPTURE_SYNCER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"

namespace kvindex {

class CaptureWriter::Syncer {
 public:
  // Starts the thread: it fsyncs at most every `interval` (and, with `drop_behind`, drops written
  // pages). No file yet: SetFile() gives it one.
  Syncer(std::chrono::milliseconds interval, bool drop_behind)
      : interval_(interval), drop_behind_(drop_behind), thread_([this] { Run(); }) {}
  // Stops and joins the thread.
  ~Syncer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // The file to work on from now on (-1: none), with nothing written to it yet; waits for an
  // fsync in progress. `path` names the file in errors (copied).
  // `drop_behind`: this file's pages are dropped by this thread (false for a mapped file, whose
  // appender drops whole windows itself).
  void SetFile(int fd, const std::string& path, bool drop_behind) {
    std::lock_guard lock(mu_);
    fd_ = fd;
    path_ = path;
    drop_file_ = drop_behind;
    end_.store(0, std::memory_order_relaxed);
    synced_end_ = started_ = dropped_ = 0;
  }
  // The file now holds `end` bytes (all of them passed to write(2)).
  void Written(uint64_t end) { end_.store(end, std::memory_order_relaxed); }
  // fsyncs done so far.
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
  // Bytes dropped from the page cache so far, all files.
  uint64_t dropped_bytes() const { return dropped_total_.load(std::memory_order_relaxed); }
  // The first fsync error since the last call (once), else Ok.
  Status TakeError() {
    if (!failed_.load(std::memory_order_relaxed)) return Status::Ok();
    std::lock_guard lock(mu_);
    failed_.store(false, std::memory_order_relaxed);
    return std::exchange(error_, Status::Ok());
  }

 private:
  static constexpr std::chrono::milliseconds kDropBehindTick{50};

  void Run();  // the thread
  // Best effort (a failure only leaves pages cached): errors are fdatasync's to report.
  void DropBehind(uint64_t end);

  const std::chrono::milliseconds interval_;
  const bool drop_behind_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                // guarded by mu_
  int fd_ = -1;                      // guarded by mu_
  std::string path_;                 // guarded by mu_
  bool drop_file_ = false;           // drop fd_'s pages behind; guarded by mu_
  uint64_t synced_end_ = 0;          // end_ as of the last fsync; guarded by mu_
  uint64_t started_ = 0;             // writeback started up to here; guarded by mu_
  uint64_t dropped_ = 0;             // dropped from the page cache up to here; guarded by mu_
  Status error_;                     // guarded by mu_
  std::atomic<uint64_t> end_{0};     // bytes of the current file passed to write(2)
  std::atomic<bool> failed_{false};  // error_ is set
  std::atomic<uint64_t> syncs_{0};   // fsyncs done
  std::atomic<uint64_t> dropped_total_{0};  // bytes dropped from the page cache, all files
  std::thread thread_;                      // last: starts once the rest is initialised
};

}  // namespace kvindex

#endif  // KVINDEX_FILES_CAPTURE_SYNCER_H_
