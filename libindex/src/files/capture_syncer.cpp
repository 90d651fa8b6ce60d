#include "capture_syncer.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "kvindex/core/clock.h"

#include "capture_format.h"

namespace kvindex {

using capture_internal::ErrnoText;

void CaptureWriter::Syncer::Run() {
  std::unique_lock lock(mu_);
  const auto tick = drop_behind_ ? std::min(interval_, kDropBehindTick) : interval_;
  auto next_sync = SteadyClock::now() + interval_;
  while (!stop_) {
    cv_.wait_for(lock, tick, [this] { return stop_; });
    if (stop_ || fd_ < 0) continue;
    const uint64_t end = end_.load(std::memory_order_relaxed);
    if (drop_file_) DropBehind(end);
    const auto now = SteadyClock::now();
    if (now < next_sync) continue;
    next_sync = now + interval_;
    if (end == synced_end_) continue;
    if (::fdatasync(fd_) != 0 && error_.ok()) {
      error_ = Status::IoError(path_ + ": fsync: " + ErrnoText(errno));
      failed_.store(true, std::memory_order_relaxed);
    }
    synced_end_ = end;
    syncs_.fetch_add(1, std::memory_order_relaxed);
  }
}

void CaptureWriter::Syncer::DropBehind(uint64_t end) {
  if (started_ > dropped_) {
    (void)::sync_file_range(
        fd_, static_cast<off_t>(dropped_), static_cast<off_t>(started_ - dropped_),
        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    if (::posix_fadvise(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(started_ - dropped_),
                        POSIX_FADV_DONTNEED) == 0) {
      dropped_total_.fetch_add(started_ - dropped_, std::memory_order_relaxed);
    }
    dropped_ = started_;
  }
  if (end > started_) {
    (void)::sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(end - started_),
                            SYNC_FILE_RANGE_WRITE);
    started_ = end;
  }
}

}  // namespace kvindex
