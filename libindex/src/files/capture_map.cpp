#include "capture_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace kvindex::internal {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// fallocate(2) or mmap(2) failed because the file cannot be used this way at all.
bool NotMappable(int err) {
  return err == EOPNOTSUPP || err == ENODEV || err == ESPIPE || err == ENOSYS || err == EACCES;
}

}  // namespace

MappedAppender::MappedAppender(int fd, std::string path, Options options)
    : fd_(fd), path_(std::move(path)), options_(options) {}

MappedAppender::~MappedAppender() { (void)Close(); }

Result<std::unique_ptr<MappedAppender>> MappedAppender::Open(int fd, std::string path,
                                                             uint64_t offset, Options options) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  options.window_bytes = std::max(page, (options.window_bytes + page - 1) / page * page);
  std::unique_ptr<MappedAppender> appender(new MappedAppender(fd, std::move(path), options));
  const uint64_t start = offset / options.window_bytes * options.window_bytes;
  Result<Window> first = appender->MapWindow(start);
  if (!first.ok()) {
    // fallocate may have grown the file before mmap failed: give the caller the file as it was.
    (void)::ftruncate(fd, static_cast<off_t>(offset));
    return first.status();
  }
  appender->window_ = *first;
  appender->pos_ = offset - start;
  appender->end_ = offset;
  appender->next_offset_ = start + options.window_bytes;
  appender->thread_ = std::thread([a = appender.get()] { a->Run(); });
  return appender;
}

Result<MappedAppender::Window> MappedAppender::MapWindow(uint64_t offset) {
  const size_t size = options_.window_bytes;
  int rc;
  do {
    rc = ::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    std::string what = path_ + ": cannot reserve " + std::to_string(size) + " bytes at byte " +
                       std::to_string(offset) + ": " + ErrnoText(err);
    return NotMappable(err) ? Status::Unsupported(std::move(what))
                            : Status::IoError(std::move(what));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                      static_cast<off_t>(offset));
  if (base == MAP_FAILED) {
    const int err = errno;
    std::string what = path_ + ": cannot map " + std::to_string(size) + " bytes at byte " +
                       std::to_string(offset) + ": " + ErrnoText(err);
    return NotMappable(err) ? Status::Unsupported(std::move(what))
                            : Status::IoError(std::move(what));
  }
  // Ask for large folios in the page cache (transparent huge pages for a file mapping, where the
  // file system supports them: ext4 on our Linux 6.18 does). Each page of a capture is allocated,
  // mapped, written back and dropped once, so the per-page work is most of what recording costs
  // the kernel (bench/capture_write_bench.cpp measures it with and without). Advice only:
  // ignored where unsupported.
  if (options_.large_folios) (void)::madvise(base, size, MADV_HUGEPAGE);
  // Prefault writable, so the recording thread takes no page fault here. Kernels before 5.14 lack
  // MADV_POPULATE_WRITE: touch each page instead (a byte copied onto itself: this window's bytes
  // are not being written by anyone else now).
  if (::madvise(base, size, MADV_POPULATE_WRITE) != 0) {
    const int err = errno;
    if (err == EINVAL) {
      const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      auto* bytes = static_cast<volatile std::byte*>(base);
      for (size_t at = 0; at < size; at += page) bytes[at] = bytes[at];
    } else if (err == EFAULT || err == EHWPOISON) {
      // A page that cannot be faulted in would be a SIGBUS for the recording thread.
      ::munmap(base, size);
      return Status::IoError(path_ + ": cannot fault in the window at byte " +
                             std::to_string(offset) + ": " + ErrnoText(err));
    }
    // ENOMEM, EINTR, EAGAIN: the pages fault in when written.
  }
  return Window{static_cast<std::byte*>(base), offset, size};
}

Status MappedAppender::Append(const std::byte* data, size_t size) {
  if (closed_) return Status::IoError(path_ + ": capture file is closed");
  if (!failed_.ok()) return failed_;
  while (size > 0) {
    if (pos_ == window_.size) {
      failed_ = Advance();  // sticky: pos_ may now be past end_
      if (!failed_.ok()) return failed_;
    }
    const size_t n = std::min(size, window_.size - pos_);
    std::memcpy(window_.base + pos_, data, n);
    pos_ += n;
    data += n;
    size -= n;
  }
  end_ = window_.offset + pos_;
  return Status::Ok();
}

Status MappedAppender::Advance() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !preparing_; });
  if (!next_) {
    if (!error_.ok()) return error_;
    // The thread has not got to it yet (a burst, or a window too small for the rate): map it here.
    KVINDEX_ASSIGN_OR_RETURN(Window window, MapWindow(next_offset_));
    next_ = window;
  }
  retired_.push_back(window_);
  window_ = *next_;
  next_.reset();
  pos_ = 0;
  next_offset_ = window_.offset + window_.size;
  lock.unlock();
  cv_.notify_all();
  return Status::Ok();
}

void MappedAppender::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !retired_.empty() || (!next_ && error_.ok()); });
    if (stop_) return;
    const bool prepare = !next_ && error_.ok();
    const uint64_t at = next_offset_;
    std::vector<Window> retired = std::exchange(retired_, {});
    if (prepare) {
      preparing_ = true;
      lock.unlock();
      Result<Window> window = MapWindow(at);
      lock.lock();
      preparing_ = false;
      if (window.ok()) {
        next_ = *window;
      } else {
        error_ = window.status();
      }
      cv_.notify_all();
    }
    if (retired.empty()) continue;
    lock.unlock();
    for (const Window& window : retired) Retire(window);
    lock.lock();
  }
}

// Best effort: a failure only leaves pages cached (fsync reports write errors).
void MappedAppender::Retire(const Window& window) {
  ::munmap(window.base, window.size);
  if (!options_.drop_behind) return;
  (void)::sync_file_range(
      fd_, static_cast<off_t>(window.offset), static_cast<off_t>(window.size),
      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  if (::posix_fadvise(fd_, static_cast<off_t>(window.offset), static_cast<off_t>(window.size),
                      POSIX_FADV_DONTNEED) == 0) {
    dropped_.fetch_add(window.size, std::memory_order_relaxed);
  }
}

Status MappedAppender::Close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Alone now: unmap what is left, then cut off the reserved space beyond the data.
  for (const Window& window : retired_) ::munmap(window.base, window.size);
  retired_.clear();
  if (next_) ::munmap(next_->base, next_->size);
  next_.reset();
  if (window_.base != nullptr) ::munmap(window_.base, window_.size);
  window_.base = nullptr;
  const uint64_t size = end();
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return Status::IoError(path_ + ": cannot cut the file to " + std::to_string(size) +
                           " bytes: " + ErrnoText(errno));
  }
  return Status::Ok();
}

}  // namespace kvindex::internal
