// Appending to a capture file through shared memory mappings instead of write(2) (private to the
// library; CaptureWriterOptions::mapped).
//
// Why: a recorder of 1-event batches made one write(2) per poll cycle, and that system call was
// the largest part of what recording cost the ingest thread. A store into a MAP_SHARED mapping
// lands in the page cache itself, so a record is in the kernel's hands as soon as it is copied
// (a process killed with SIGKILL loses no complete record: docs/capture-format.md "Durability")
// and no system call is made.
//
// How: the file is mapped in windows of `window_bytes` at offsets that are multiples of it. A
// window is first reserved with fallocate(2) (so a full disk is an error here, not a SIGBUS when a
// page is first touched) and then prefaulted writable (MADV_POPULATE_WRITE), so the recording
// thread neither allocates blocks nor takes page faults. A thread of the appender's own prepares
// the next window while the current one fills, and unmaps the windows left behind (with
// drop_behind, it also writes them back and drops them from the page cache). Close() cuts the file
// to what was appended. A process killed before Close() leaves the rest of its reserved windows as
// zero bytes after the last record; readers treat zeros from a record boundary to the end of the
// file as that (docs/capture-format.md).
//
// Thread safety: Append() and Close() are called by one thread; the appender's thread only works
// on windows that thread has handed over or not yet taken, under mu_.
#ifndef KVINDEX_CAPTURE_MAP_H_
#define KVINDEX_CAPTURE_MAP_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvindex/core/status.h"

namespace kvindex::internal {

class MappedAppender {
 public:
  struct Options {
    size_t window_bytes = size_t{8} << 20;  // rounded up to a multiple of the page size
    bool drop_behind = false;
    bool large_folios = true;  // MADV_HUGEPAGE on each window
  };

  // Appends to `fd` (open for reading and writing) from byte `offset` on; bytes before it stay as
  // they are. Fails with kUnsupported when the file cannot be reserved with fallocate(2) or mapped
  // (a FIFO, a file system without either): the caller then writes with write(2). Other failures
  // (a full disk) are kIoError naming `path`.
  static Result<std::unique_ptr<MappedAppender>> Open(int fd, std::string path, uint64_t offset,
                                                      Options options);
  ~MappedAppender();  // Close()s, ignoring errors
  MappedAppender(const MappedAppender&) = delete;
  MappedAppender& operator=(const MappedAppender&) = delete;

  // Copies `size` bytes to the end of the appended data. Fails (kIoError) only when a new window
  // cannot be reserved or mapped; then the bytes of this call that were copied do not count (end()
  // stays where it was, and Close() cuts them off), so the file never ends in a torn record.
  Status Append(const std::byte* data, size_t size);
  // Room for `size` bytes at the end of the data, inside the current window (moving to the next
  // window first if this one is full), or null when they would cross into the next window or a
  // window cannot be had: then use Append(). Commit() then counts them as appended; Reserved() is
  // where they start.
  std::byte* Reserve(size_t size) {
    if (pos_ == window_.size && (closed_ || !failed_.ok() || !(failed_ = Advance()).ok())) {
      return nullptr;
    }
    return window_.size - pos_ >= size && !closed_ ? window_.base + pos_ : nullptr;
  }
  std::byte* Reserved() const { return window_.base + pos_; }
  void Commit(size_t size) {
    pos_ += size;
    end_ = window_.offset + pos_;
  }
  // Where the appended data ends (the file's logical size).
  uint64_t end() const { return end_; }
  // Stops the thread, unmaps every window and cuts the file to end(). The descriptor stays open
  // (the caller fsyncs and closes it). Idempotent.
  Status Close();
  // Bytes the drop_behind work has dropped from the page cache so far.
  uint64_t dropped_bytes() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Window {
    std::byte* base = nullptr;
    uint64_t offset = 0;  // in the file
    size_t size = 0;
  };

  MappedAppender(int fd, std::string path, Options options);
  Result<Window> MapWindow(uint64_t offset);
  Status Advance();  // the current window is full: take the next one
  void Run();        // the appender's thread
  void Retire(const Window& window);

  const int fd_;
  const std::string path_;
  const Options options_;
  // The recording thread's.
  Window window_;
  size_t pos_ = 0;    // bytes of window_ in use
  uint64_t end_ = 0;  // the end of the last whole Append()
  Status failed_;     // an Append() failed: every later one fails the same way
  bool closed_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Window> next_;    // prepared, not yet taken; guarded by mu_
  uint64_t next_offset_ = 0;      // where the window after window_ starts; guarded by mu_
  std::vector<Window> retired_;   // handed over to be unmapped; guarded by mu_
  bool preparing_ = false;        // the thread is mapping next_offset_; guarded by mu_
  bool stop_ = false;             // guarded by mu_
  Status error_;                  // the thread's failure to map; guarded by mu_
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;  // started last, by Open()
};

}  // namespace kvindex::internal

#endif  // KVINDEX_CAPTURE_MAP_H_
