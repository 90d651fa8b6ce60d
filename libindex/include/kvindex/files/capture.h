// Capture files: what `record` writes and `replay` reads — every received ZeroMQ message with its
// raw frames *unchanged*, when it arrived and from which source, plus the subscriber's own
// observations (gaps, lost batches, restarts, malformed messages). Format: docs/capture-format.md.
//
// A capture is a sequence of records behind a versioned file header. Each record carries its
// length, type, a checksum over the whole record, the realtime receive time in ns, and a source id;
// a source is defined by a record of its own (sources can appear mid-file). A capture may be
// several files (rotation), read in order; each file repeats the source definitions it needs.
//
// CaptureWriter makes each record reach the kernel with write(2) before Write*() returns, so a
// process killed with SIGKILL loses no complete record; fsync runs every `fsync_interval` (power
// loss risks that much). A recorder with a poll loop may coalesce instead (set_coalescing()): the
// records of one poll cycle are appended to a buffer and reach the kernel with one write(2) by
// Flush(), which it calls before it blocks in poll again (docs/capture-format.md "Durability").
// With CaptureWriterOptions::mapped each record is built in a shared mapping of the file instead
// (or copied there when it would cross a window boundary): it is in the page cache as soon as it is
// built, and there is nothing to coalesce. The fsync may run on a thread of the writer's own
// (CaptureWriterOptions::background_sync). CaptureReader streams with memory bounded by the largest
// record: a torn or corrupt tail is reported with its byte offset and everything before it is read;
// a corrupt record in the middle is reported and skipped (by its length when that is sane, else by
// scanning forward to the next record that verifies).
//
// Thread safety: a writer or reader is used by one thread at a time (a writer's own fsync thread
// aside, which only touches the file under the writer's lock).
#ifndef KVINDEX_FILES_CAPTURE_H_
#define KVINDEX_FILES_CAPTURE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/clock.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/status.h"

namespace kvindex {

inline constexpr uint16_t kCaptureVersion = 1;
inline constexpr size_t kCaptureFileHeaderSize = 32;
inline constexpr size_t kCaptureRecordHeaderSize = 32;
// The largest body a record may have: one maximal payload (64 MiB) plus its frame overhead.
inline constexpr size_t kCaptureMaxBody = (64u << 20) + 4096;
// A coalescing writer writes its buffer once it holds this many bytes (bounds its memory).
inline constexpr size_t kCaptureCoalesceBytes = size_t{1} << 20;
// The text of the note recorded, with the source's id, for each source of an instance removed by
// HTTP /unregister (docs/capture-format.md): replay purges the instance there.
inline constexpr std::string_view kUnregisterNote = "unregister";

enum class CaptureRecordType : uint8_t {
  kSourceDefinition = 1,  // body: the source's definition as UTF-8 JSON (docs/capture-format.md)
  kMessage = 2,           // body: the frames of one live message, verbatim
  kReplayed = 3,          // body: the frames of one replay reply (batch or end marker), verbatim
  kGap = 4,               // body: le64 expected seq, le64 received seq
  kLost = 5,              // body: le64 first lost seq, le64 count
  kRestart = 6,           // body: le64 previous watermark, le64 new seq
  kMalformed = 7,         // body: UTF-8 reason (the message itself is its own kMessage record)
  kNote = 8,              // body: UTF-8 free text (e.g. "recording started", rotation reasons)
  kTimeout = 9,           // body: le64 watermark, le64 0: the subscriber stopped waiting for a
                          // replay here (replay re-applies this decision)
};

// Returns e.g. "message"; "unknown" for a value outside the enum.
std::string_view CaptureRecordTypeName(CaptureRecordType type);

// One record as read. `frames` is filled for kMessage and kReplayed; `body` holds the raw body of
// every record type (for message types, the encoded frame list). Views into a reader's buffer are
// not used: a record owns its bytes.
struct CaptureRecord {
  CaptureRecordType type = CaptureRecordType::kNote;
  uint8_t flags = 0;
  int64_t recv_ns = 0;  // realtime (CLOCK_REALTIME) nanoseconds since the epoch
  SourceId source;
  std::vector<std::byte> body;
  std::vector<std::vector<std::byte>> frames;
  // Where the record starts: file index within the capture set and byte offset within that file.
  size_t file_index = 0;
  uint64_t offset = 0;

  // The two le64 fields of kGap / kLost / kRestart bodies (0 when the body is shorter).
  uint64_t first() const;
  uint64_t second() const;
  // The body as text (kSourceDefinition, kMalformed, kNote).
  std::string_view text() const {
    return std::string_view(reinterpret_cast<const char*>(body.data()), body.size());
  }
};

// One record as read, borrowed: `body` and `frames` point into the reader's buffer and stay valid
// until the reader's next Next() or NextView() call. CaptureReplayer reads this way, so a replay
// copies no record. `frames` keeps its capacity across calls.
struct CaptureRecordView {
  CaptureRecordType type = CaptureRecordType::kNote;
  uint8_t flags = 0;
  int64_t recv_ns = 0;
  SourceId source;
  std::span<const std::byte> body;
  std::vector<std::span<const std::byte>> frames;  // kMessage and kReplayed; else empty
  size_t file_index = 0;
  uint64_t offset = 0;

  // As CaptureRecord's.
  uint64_t first() const;
  uint64_t second() const;
  std::string_view text() const {
    return std::string_view(reinterpret_cast<const char*>(body.data()), body.size());
  }
};

// A problem the reader found and stepped over: which file, at which byte, what.
struct CaptureProblem {
  std::string file;
  uint64_t offset = 0;
  Status status;
  uint64_t skipped_bytes = 0;  // bytes not read as records because of it
  bool tail = false;           // true: a torn or corrupt end of file
};

struct CaptureWriterOptions {
  // fsync(2) at most this often (checked on each write when not coalescing, and by MaybeSync());
  // 0 = after every record (when coalescing: after every MaybeSync()).
  std::chrono::milliseconds fsync_interval{1000};
  // Start a new file once the current one exceeds this many bytes (0 = never).
  uint64_t rotate_bytes = 0;
  // Start a new file once the current one is older than this (0 = never).
  std::chrono::seconds rotate_interval{0};
  // Truncate an existing file instead of refusing to overwrite it.
  bool overwrite = false;
  // fsync on a thread of the writer's own, every `fsync_interval` while there is unsynced data,
  // instead of in MaybeSync() (which then only reports that thread's errors). The recording thread
  // never waits for the disk: an fsync of a second of 1 M blocks/s takes ~60 ms here. Ignored when
  // fsync_interval is 0. Sync(), rotation and Close() still fsync on the calling thread.
  bool background_sync = false;
  // With background_sync: that thread also writes back what was written and drops it from the
  // page cache about every 50 ms, so a long recording does not fill the page cache (pushing out
  // what other programs cache) and keeps reusing the same recently freed pages.
  bool drop_behind = false;
  // Append through shared memory mappings of the file instead of write(2): a record reaches the
  // page cache as it is copied, with no system call on the recording thread (the file is reserved
  // with fallocate(2) and prefaulted a window ahead by a thread of the writer's own; with
  // drop_behind that thread also drops written windows from the page cache). A file that cannot
  // be mapped (a FIFO, a file system without fallocate) is written with write(2) instead. A
  // process killed before Close() leaves the unused part of its reserved windows as zero bytes at
  // the end of the file; readers report it as the tail and read every record before it.
  bool mapped = false;
  // The size of a mapped window (rounded up to whole pages): the file grows by this much at a
  // time, and two windows' worth of page cache is in use at once.
  size_t map_window_bytes = size_t{8} << 20;
  // Advise large folios (transparent huge pages) for the mapped windows: the kernel's per-page
  // work is most of what recording costs it, and large folios cut it by 1.3-2.2x on ext4
  // (bench/capture_write_bench.cpp). Off only to measure that.
  bool map_large_folios = true;
};

namespace internal {
class MappedAppender;  // capture_map.h
}  // namespace internal

class CaptureWriter {
 public:
  // Creates `path` and writes the file header. Rotated files are named by RotatedCapturePath().
  // Fails with kIoError if the file exists (unless options.overwrite) or cannot be created.
  static Result<std::unique_ptr<CaptureWriter>> Create(std::string path,
                                                       CaptureWriterOptions options = {});
  ~CaptureWriter();  // Close()s, ignoring errors.
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // Defines (or redefines) `source`; `definition_json` is kept and repeated at the head of every
  // rotated file.
  Status WriteSourceDefinition(SourceId source, std::string_view definition_json, int64_t recv_ns);
  // Writes one message's frames (kMessage or kReplayed). Fails with kLimitExceeded when the body
  // would exceed kCaptureMaxBody (nothing is written).
  Status WriteFrames(CaptureRecordType type, SourceId source, int64_t recv_ns,
                     std::span<const std::span<const std::byte>> frames);
  // Writes an observation with two le64 fields (kGap, kLost, kRestart).
  Status WriteObservation(CaptureRecordType type, SourceId source, int64_t recv_ns, uint64_t first,
                          uint64_t second);
  // Writes a text record (kMalformed, kNote).
  Status WriteText(CaptureRecordType type, SourceId source, int64_t recv_ns, std::string_view text);

  // Coalescing: while on, Write*() append each record to an in-memory buffer instead of writing
  // it, and Flush() writes the buffer with one write(2). The buffer is also written when it holds
  // kCaptureCoalesceBytes or more, before an fsync or a rotation, by Close(), and when coalescing
  // is turned off. Off by default (one write(2) per record). A caller that turns it on promises to
  // Flush() before it waits for input again, so that a record still reaches the kernel before the
  // next poll cycle, and to call MaybeSync() then (the fsync interval is not checked per record
  // while coalescing: reading the clock per record was a visible share of recording).
  void set_coalescing(bool on);
  bool coalescing() const { return coalescing_; }
  // Writes the buffered records (one write(2)); a no-op when nothing is buffered. On failure the
  // buffered records are dropped and the error returned.
  Status Flush();

  // Flushes and fsyncs if the interval has passed since the last fsync. With background_sync: only
  // returns (once) an error of the background fsync.
  Status MaybeSync();
  // Flushes and fsyncs now.
  Status Sync();
  // Flushes, fsyncs and closes; further writes fail. Idempotent.
  Status Close();

  // Every file written so far, in order.
  const std::vector<std::string>& paths() const { return paths_; }
  uint64_t records_written() const { return records_written_; }
  uint64_t bytes_written() const { return bytes_written_; }
  // fsyncs done by the background_sync thread so far (0 without one, and after Close()).
  uint64_t background_syncs() const;
  // Bytes the drop_behind thread has dropped from the page cache so far (0 without one).
  uint64_t dropped_bytes() const;
  // True while the current file is written through mappings (options.mapped, and the file could
  // be mapped).
  bool mapped() const { return appender_ != nullptr; }

 private:
  class Syncer;  // the background fsync thread (capture_syncer.h)

  CaptureWriter(std::string path, CaptureWriterOptions options);
  Status OpenFile(const std::string& path);
  // Flushes, cuts a mapped file to its data, fsyncs and closes the current file.
  Status CloseFile();
  Status MaybeRotate();
  Status WriteRecord(CaptureRecordType type, SourceId source, int64_t recv_ns,
                     std::span<const std::span<const std::byte>> body_parts);
  // Appends a record header for a body of `body_size` bytes to pending_ and returns where the
  // body goes; FinishRecord() checksums the record and writes or keeps it.
  std::byte* BeginRecord(CaptureRecordType type, SourceId source, int64_t recv_ns,
                         size_t body_size);
  std::byte* ReservePending(size_t total);  // room for a record of `total` bytes in pending_
  Status FinishRecord();

  std::string base_path_;
  CaptureWriterOptions options_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  // The bytes a new file opens with (its header and the repeated source definitions): a file
  // holding no more than that is never rotated, so a threshold below it cannot rotate forever.
  uint64_t file_preamble_bytes_ = 0;
  bool rotating_ = false;  // writing a new file's preamble: no rotation inside it
  SteadyClock::time_point file_opened_;
  SteadyClock::time_point last_sync_;
  bool dirty_ = false;
  std::vector<std::string> paths_;
  std::vector<std::pair<SourceId, std::string>> definitions_;
  uint64_t records_written_ = 0;
  uint64_t bytes_written_ = 0;
  bool coalescing_ = false;
  // Records not yet written (coalescing), or the one being built: pending_size_ bytes of a buffer
  // of pending_capacity_ that grows without being zeroed first (a record is written in place).
  std::unique_ptr<std::byte[]> pending_;
  size_t pending_size_ = 0;
  size_t pending_capacity_ = 0;
  size_t record_start_ = 0;  // where the record being built starts in pending_
  bool in_place_ = false;    // the record being built is in the mapped window, not in pending_
  std::unique_ptr<Syncer> syncer_;
  std::unique_ptr<internal::MappedAppender> appender_;  // the current file's, when mapped
  bool map_unsupported_ = false;  // a file could not be mapped: write(2) from then on
  uint64_t dropped_closed_ = 0;   // dropped_bytes() of the appenders of closed files
};

// The path of rotated file `index` (0 = `base` itself): "cap.kvcap" -> "cap.1.kvcap", ...
std::string RotatedCapturePath(const std::string& base, size_t index);

class CaptureReader {
 public:
  // Opens the files of one capture, to be read in order. Fails with kNotFound / kIoError if a file
  // cannot be opened; a file that is not a capture (bad magic or version) fails with kMalformed /
  // kUnsupported naming the file.
  static Result<std::unique_ptr<CaptureReader>> Open(std::vector<std::string> paths);
  // Reads a capture held in memory (tests, fuzzing). `name` is used in problems.
  static Result<std::unique_ptr<CaptureReader>> FromBuffer(std::vector<std::byte> bytes,
                                                          std::string name = "<memory>");
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  // Reads the next good record into `record`. Returns false at the end of the last file (or on an
  // I/O error, then reported by io_status()). Problems stepped over are appended to problems().
  bool Next(CaptureRecord& record);
  // The same, borrowed (see CaptureRecordView): no copy of the record's bytes.
  bool NextView(CaptureRecordView& view);

  const std::vector<CaptureProblem>& problems() const { return problems_; }
  // The first read error from the operating system, if any (reading then stopped).
  const Status& io_status() const { return io_status_; }
  uint64_t records_read() const { return records_read_; }
  uint64_t bytes_read() const { return bytes_consumed_total_; }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  CaptureReader() = default;
  Status OpenFileAt(size_t index);
  bool Fill(size_t wanted);  // ensures `wanted` bytes are buffered unless EOF; false on EOF/err
  // Verifies the record at `pos` and, when `record` is not null, fills it (a CaptureRecord with
  // copies, a CaptureRecordView with views). ReadNext() is Next() and NextView().
  template <typename Record>
  bool ParseAt(size_t pos, size_t available, Record* record, size_t* record_size,
               Status* why) const;
  template <typename Record>
  bool ReadNext(Record& record);
  // A record at begin_ of `size` bytes (0: its length is impossible) did not verify: how many
  // bytes to step over, up to the next record that verifies or the end of the data.
  size_t BytesToSkip(size_t size);
  // How far the next record that verifies is from begin_ (searched from begin_ + 1), or how far
  // the end of the data is.
  size_t ScanForRecord();
  void Report(Status status, uint64_t offset, uint64_t skipped, bool tail);

  std::vector<std::string> paths_;
  size_t file_index_ = 0;
  int fd_ = -1;
  bool memory_ = false;
  bool eof_ = false;
  std::vector<std::byte> buffer_;
  size_t begin_ = 0;  // first unconsumed byte of buffer_
  size_t end_ = 0;    // one past the last valid byte of buffer_
  uint64_t file_offset_of_begin_ = 0;
  std::vector<CaptureProblem> problems_;
  Status io_status_;
  uint64_t records_read_ = 0;
  uint64_t bytes_consumed_total_ = 0;
};

// Returns true if `prefix` starts with the capture file magic (for input auto-detection).
bool LooksLikeCapture(std::span<const std::byte> prefix);

}  // namespace kvindex

#endif  // KVINDEX_FILES_CAPTURE_H_
