#include "kvindex/files/capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

// Compiled inline, as in block_hash.cpp (same values as the shared library): most records are a
// few hundred bytes, where the call through the PLT and the library's length dispatch are a
// visible part of the checksum.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "capture_map.h"

namespace kvindex {
namespace {

// File header: magic(8) version(2) header_size(2) file_index(4) created_ns(8) checksum(8).
// The magic starts with 0x89 and holds "\r\n" so that text-mode transfers corrupt it visibly.
constexpr std::byte kMagic[8] = {std::byte{0x89}, std::byte{'K'}, std::byte{'V'},  std::byte{'C'},
                                 std::byte{'A'},  std::byte{'P'}, std::byte{'\r'}, std::byte{'\n'}};
constexpr size_t kMinReadChunk = 1u << 20;
constexpr uint8_t kMaxRecordType = static_cast<uint8_t>(CaptureRecordType::kTimeout);

void PutLe16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }
void PutLe32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutLe64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint16_t GetLe16(const std::byte* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
uint32_t GetLe32(const std::byte* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t GetLe64(const std::byte* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

// The record checksum covers every byte of the record but the checksum field itself: XXH3-64 of
// bytes [16, end) seeded with the first 8 bytes (length, type, flags, header size).
uint64_t RecordChecksum(const std::byte* record, size_t size) {
  return XXH3_64bits_withSeed(record + 16, size - 16, GetLe64(record));
}

uint64_t FileHeaderChecksum(const std::byte* header) { return XXH3_64bits(header, 24); }

int64_t RealtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ErrnoText(int err) { return std::strerror(err); }

Status WriteAll(int fd, const std::byte* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(path + ": write: " + ErrnoText(errno));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// `to` = `from`; cheaper than vector::assign for the small sizes of a record's parts.
void CopyBytes(std::span<const std::byte> from, std::vector<std::byte>& to) {
  to.resize(from.size());
  if (!from.empty()) std::memcpy(to.data(), from.data(), from.size());
}

// A frame of a record: borrowed (CaptureRecordView) or copied (CaptureRecord).
void SetFrame(std::span<const std::byte> from, std::span<const std::byte>& to) { to = from; }
void SetFrame(std::span<const std::byte> from, std::vector<std::byte>& to) { CopyBytes(from, to); }

// Decodes a message body (u32 count, then u32 length + bytes per frame) into `frames`, views of
// `body` or copies. False if the lengths do not add up to exactly `size` bytes. `frames` (and, for
// copies, each frame vector) keeps its capacity, so a streaming reader allocates only when a
// record has more or bigger frames than any before it.
template <typename Frame>
bool DecodeFrames(const std::byte* body, size_t size, std::vector<Frame>& frames) {
  if (size < 4) {
    frames.clear();
    return false;
  }
  const uint32_t count = GetLe32(body);
  size_t pos = 4;
  // Each frame needs at least its 4-byte length: bounds the count before resizing.
  if (count > (size - 4) / 4) {
    frames.clear();
    return false;
  }
  frames.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (size - pos < 4) return false;
    const uint32_t length = GetLe32(body + pos);
    pos += 4;
    if (size - pos < length) return false;
    SetFrame(std::span<const std::byte>(body + pos, length), frames[i]);
    pos += length;
  }
  return pos == size;
}

// True if the 8 bytes at `p` are all zero.
bool IsZeroWord(const std::byte* p) { return GetLe64(p) == 0; }

bool AllZero(const std::byte* p, size_t size) {
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    if (!IsZeroWord(p + i)) return false;
  }
  for (; i < size; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

void SetBody(std::span<const std::byte> body, CaptureRecordView& record) { record.body = body; }
void SetBody(std::span<const std::byte> body, CaptureRecord& record) {
  CopyBytes(body, record.body);
}

}  // namespace

std::string_view CaptureRecordTypeName(CaptureRecordType type) {
  switch (type) {
    case CaptureRecordType::kSourceDefinition: return "source";
    case CaptureRecordType::kMessage: return "message";
    case CaptureRecordType::kReplayed: return "replayed";
    case CaptureRecordType::kGap: return "gap";
    case CaptureRecordType::kLost: return "lost";
    case CaptureRecordType::kRestart: return "restart";
    case CaptureRecordType::kMalformed: return "malformed";
    case CaptureRecordType::kNote: return "note";
    case CaptureRecordType::kTimeout: return "timeout";
  }
  return "unknown";
}

uint64_t CaptureRecord::first() const { return body.size() >= 8 ? GetLe64(body.data()) : 0; }
uint64_t CaptureRecord::second() const { return body.size() >= 16 ? GetLe64(body.data() + 8) : 0; }
uint64_t CaptureRecordView::first() const { return body.size() >= 8 ? GetLe64(body.data()) : 0; }
uint64_t CaptureRecordView::second() const {
  return body.size() >= 16 ? GetLe64(body.data() + 8) : 0;
}

bool LooksLikeCapture(std::span<const std::byte> prefix) {
  return prefix.size() >= sizeof(kMagic) && std::memcmp(prefix.data(), kMagic, sizeof(kMagic)) == 0;
}

std::string RotatedCapturePath(const std::string& base, size_t index) {
  if (index == 0) return base;
  const std::filesystem::path path(base);
  std::filesystem::path rotated = path;
  rotated.replace_filename(path.stem().string() + "." + std::to_string(index) +
                           path.extension().string());
  return rotated.string();
}

// ---------------------------------------------------------------------------------------------
// CaptureWriter

// The background thread of CaptureWriterOptions::background_sync. Every interval it fdatasyncs
// the current file if data reached it since the last fsync. With drop_behind it also wakes every
// kDropBehindTick: it starts the writeback of what was written since its last tick
// (sync_file_range), waits for the writeback it started one tick earlier, and drops those pages
// from the page cache (POSIX_FADV_DONTNEED). The writer swaps the file (SetFile) under the same
// lock, so the thread never acts on a closed or reused descriptor; Written() is one atomic store on
// the recording thread.
class CaptureWriter::Syncer {
 public:
  Syncer(std::chrono::milliseconds interval, bool drop_behind)
      : interval_(interval), drop_behind_(drop_behind), thread_([this] { Run(); }) {}
  ~Syncer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // The file to work on from now on (-1: none), with nothing written to it yet; waits for an
  // fsync in progress.
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
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
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

  void Run() {
    std::unique_lock lock(mu_);
    const auto tick = drop_behind_ ? std::min(interval_, kDropBehindTick) : interval_;
    auto next_sync = std::chrono::steady_clock::now() + interval_;
    while (!stop_) {
      cv_.wait_for(lock, tick, [this] { return stop_; });
      if (stop_ || fd_ < 0) continue;
      const uint64_t end = end_.load(std::memory_order_relaxed);
      if (drop_file_) DropBehind(end);
      const auto now = std::chrono::steady_clock::now();
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

  // Best effort (a failure only leaves pages cached): errors are fdatasync's to report.
  void DropBehind(uint64_t end) {
    if (started_ > dropped_) {
      (void)::sync_file_range(
          fd_, static_cast<off_t>(dropped_), static_cast<off_t>(started_ - dropped_),
          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      if (::posix_fadvise(fd_, static_cast<off_t>(dropped_),
                          static_cast<off_t>(started_ - dropped_), POSIX_FADV_DONTNEED) == 0) {
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

CaptureWriter::CaptureWriter(std::string path, CaptureWriterOptions options)
    : base_path_(std::move(path)), options_(options) {}

CaptureWriter::~CaptureWriter() { (void)Close(); }

uint64_t CaptureWriter::background_syncs() const { return syncer_ ? syncer_->syncs() : 0; }

uint64_t CaptureWriter::dropped_bytes() const {
  return (syncer_ ? syncer_->dropped_bytes() : 0) + dropped_closed_ +
         (appender_ ? appender_->dropped_bytes() : 0);
}

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::Create(std::string path,
                                                            CaptureWriterOptions options) {
  std::unique_ptr<CaptureWriter> writer(new CaptureWriter(path, options));
  if (options.background_sync && options.fsync_interval.count() > 0) {
    writer->syncer_ = std::make_unique<Syncer>(options.fsync_interval, options.drop_behind);
  }
  KVINDEX_RETURN_IF_ERROR(writer->OpenFile(path));
  return writer;
}

Status CaptureWriter::OpenFile(const std::string& path) {
  const bool map = options_.mapped && !map_unsupported_;
  // A shared writable mapping needs a descriptor open for reading too.
  int flags = (map ? O_RDWR : O_WRONLY) | O_CREAT | O_CLOEXEC |
              (options_.overwrite ? O_TRUNC : O_EXCL);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::IoError(path + ": already exists (refusing to overwrite a capture)");
    }
    return Status::IoError(path + ": cannot create: " + ErrnoText(errno));
  }
  fd_ = fd;
  if (map) {
    internal::MappedAppender::Options map_options;
    map_options.window_bytes = options_.map_window_bytes;
    map_options.drop_behind = options_.drop_behind && syncer_ != nullptr;
    map_options.large_folios = options_.map_large_folios;
    auto appender = internal::MappedAppender::Open(fd_, path, 0, map_options);
    if (appender.ok()) {
      appender_ = std::move(*appender);
    } else if (appender.status().code() == StatusCode::kUnsupported) {
      map_unsupported_ = true;  // this file and the next ones: write(2)
    } else {
      ::close(fd_);
      fd_ = -1;
      return appender.status();
    }
  }
  if (syncer_) syncer_->SetFile(fd_, path, options_.drop_behind && appender_ == nullptr);
  std::byte header[kCaptureFileHeaderSize] = {};
  std::memcpy(header, kMagic, sizeof(kMagic));
  PutLe16(header + 8, kCaptureVersion);
  PutLe16(header + 10, static_cast<uint16_t>(kCaptureFileHeaderSize));
  PutLe32(header + 12, static_cast<uint32_t>(paths_.size()));
  PutLe64(header + 16, static_cast<uint64_t>(RealtimeNs()));
  PutLe64(header + 24, FileHeaderChecksum(header));
  paths_.push_back(path);
  file_bytes_ = 0;
  file_opened_ = std::chrono::steady_clock::now();
  last_sync_ = file_opened_;
  KVINDEX_RETURN_IF_ERROR(appender_ ? appender_->Append(header, sizeof(header))
                                    : WriteAll(fd_, header, sizeof(header), path));
  file_bytes_ += sizeof(header);
  bytes_written_ += sizeof(header);
  dirty_ = true;
  return Status::Ok();
}

Status CaptureWriter::MaybeRotate() {
  const bool by_bytes = options_.rotate_bytes != 0 && file_bytes_ >= options_.rotate_bytes;
  const bool by_time = options_.rotate_interval.count() != 0 &&
                       std::chrono::steady_clock::now() - file_opened_ >= options_.rotate_interval;
  if (!by_bytes && !by_time) return Status::Ok();
  KVINDEX_RETURN_IF_ERROR(CloseFile());
  KVINDEX_RETURN_IF_ERROR(OpenFile(RotatedCapturePath(base_path_, paths_.size())));
  // Every file is self-contained: repeat the definitions of the sources seen so far.
  const auto definitions = definitions_;
  for (const auto& [source, json] : definitions) {
    const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(json.data()),
                                          json.size());
    KVINDEX_RETURN_IF_ERROR(WriteRecord(CaptureRecordType::kSourceDefinition, source,
                                        RealtimeNs(), std::span(&part, 1)));
  }
  return Status::Ok();
}

std::byte* CaptureWriter::BeginRecord(CaptureRecordType type, SourceId source, int64_t recv_ns,
                                      size_t body_size) {
  const size_t total = kCaptureRecordHeaderSize + body_size;
  std::byte* p = nullptr;
  // A mapped file with nothing buffered: build the record in the mapping itself (no copy), unless
  // it would cross into the next window.
  if (appender_ != nullptr && pending_size_ == 0) p = appender_->Reserve(total);
  in_place_ = p != nullptr;
  if (!in_place_) p = ReservePending(total);
  PutLe32(p, static_cast<uint32_t>(total));
  p[4] = static_cast<std::byte>(type);
  p[5] = std::byte{0};
  PutLe16(p + 6, static_cast<uint16_t>(kCaptureRecordHeaderSize));
  PutLe64(p + 16, static_cast<uint64_t>(recv_ns));
  PutLe32(p + 24, source.value);
  PutLe32(p + 28, 0);
  return p + kCaptureRecordHeaderSize;
}

std::byte* CaptureWriter::ReservePending(size_t total) {
  record_start_ = pending_size_;
  if (pending_capacity_ - pending_size_ < total) {
    // Grows without zeroing (make_unique_for_overwrite): every byte is written before it is used.
    const size_t capacity = std::max(2 * pending_capacity_, pending_size_ + total);
    auto grown = std::make_unique_for_overwrite<std::byte[]>(capacity);
    if (pending_size_ != 0) std::memcpy(grown.get(), pending_.get(), pending_size_);
    pending_ = std::move(grown);
    pending_capacity_ = capacity;
  }
  pending_size_ += total;
  return pending_.get() + record_start_;
}

Status CaptureWriter::FinishRecord() {
  std::byte* p = in_place_ ? appender_->Reserved() : pending_.get() + record_start_;
  const size_t total = GetLe32(p);  // the length BeginRecord() wrote
  PutLe64(p + 8, RecordChecksum(p, total));
  file_bytes_ += total;
  bytes_written_ += total;
  ++records_written_;
  dirty_ = true;
  if (in_place_) {
    in_place_ = false;
    appender_->Commit(total);  // in the page cache already: nothing to flush
    if (syncer_) syncer_->Written(file_bytes_);
  } else if (!coalescing_ || pending_size_ >= kCaptureCoalesceBytes || appender_ != nullptr) {
    // (A mapped file flushes at once, so that the next record can be built in place.)
    KVINDEX_RETURN_IF_ERROR(Flush());
  }
  if (!coalescing_) KVINDEX_RETURN_IF_ERROR(MaybeSync());  // coalescing: the owner's per cycle
  return MaybeRotate();
}

Status CaptureWriter::WriteRecord(CaptureRecordType type, SourceId source, int64_t recv_ns,
                                  std::span<const std::span<const std::byte>> body_parts) {
  if (fd_ < 0) return Status::IoError(base_path_ + ": capture writer is closed");
  size_t body_size = 0;
  for (const auto& part : body_parts) body_size += part.size();
  if (body_size > kCaptureMaxBody) {
    return Status::LimitExceeded("capture record body of " + std::to_string(body_size) +
                                 " bytes exceeds the maximum of " +
                                 std::to_string(kCaptureMaxBody));
  }
  std::byte* body = BeginRecord(type, source, recv_ns, body_size);
  for (const auto& part : body_parts) {
    if (!part.empty()) std::memcpy(body, part.data(), part.size());
    body += part.size();
  }
  return FinishRecord();
}

void CaptureWriter::set_coalescing(bool on) {
  coalescing_ = on;
  if (!on) (void)Flush();
}

Status CaptureWriter::Flush() {
  if (pending_size_ == 0) return Status::Ok();
  const size_t size = std::exchange(pending_size_, 0);
  if (fd_ < 0) return Status::IoError(base_path_ + ": capture writer is closed");
  KVINDEX_RETURN_IF_ERROR(appender_ ? appender_->Append(pending_.get(), size)
                                    : WriteAll(fd_, pending_.get(), size, paths_.back()));
  if (syncer_) syncer_->Written(file_bytes_);
  return Status::Ok();
}

Status CaptureWriter::WriteSourceDefinition(SourceId source, std::string_view definition_json,
                                            int64_t recv_ns) {
  bool replaced = false;
  for (auto& [id, json] : definitions_) {
    if (id == source) {
      json = definition_json;
      replaced = true;
    }
  }
  if (!replaced) definitions_.emplace_back(source, std::string(definition_json));
  const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(definition_json.data()),
                                        definition_json.size());
  return WriteRecord(CaptureRecordType::kSourceDefinition, source, recv_ns, std::span(&part, 1));
}

Status CaptureWriter::WriteFrames(CaptureRecordType type, SourceId source, int64_t recv_ns,
                                  std::span<const std::span<const std::byte>> frames) {
  if (fd_ < 0) return Status::IoError(base_path_ + ": capture writer is closed");
  // Body: u32 frame count, then u32 length + bytes per frame, built in place.
  size_t body_size = 4;
  for (const auto& frame : frames) body_size += 4 + frame.size();
  if (body_size > kCaptureMaxBody) {
    return Status::LimitExceeded("message of " + std::to_string(body_size) +
                                 " bytes exceeds the capture record maximum");
  }
  std::byte* p = BeginRecord(type, source, recv_ns, body_size);
  PutLe32(p, static_cast<uint32_t>(frames.size()));
  p += 4;
  for (const auto& frame : frames) {
    PutLe32(p, static_cast<uint32_t>(frame.size()));
    p += 4;
    if (!frame.empty()) std::memcpy(p, frame.data(), frame.size());
    p += frame.size();
  }
  return FinishRecord();
}

Status CaptureWriter::WriteObservation(CaptureRecordType type, SourceId source, int64_t recv_ns,
                                       uint64_t first, uint64_t second) {
  std::byte body[16];
  PutLe64(body, first);
  PutLe64(body + 8, second);
  const std::span<const std::byte> part(body, sizeof(body));
  return WriteRecord(type, source, recv_ns, std::span(&part, 1));
}

Status CaptureWriter::WriteText(CaptureRecordType type, SourceId source, int64_t recv_ns,
                                std::string_view text) {
  const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(text.data()),
                                        text.size());
  return WriteRecord(type, source, recv_ns, std::span(&part, 1));
}

Status CaptureWriter::MaybeSync() {
  if (syncer_) return syncer_->TakeError();
  if (!dirty_) return Status::Ok();
  if (std::chrono::steady_clock::now() - last_sync_ < options_.fsync_interval) return Status::Ok();
  return Sync();
}

Status CaptureWriter::Sync() {
  KVINDEX_RETURN_IF_ERROR(Flush());
  if (fd_ < 0 || !dirty_) return Status::Ok();
  if (::fdatasync(fd_) != 0) {
    return Status::IoError(paths_.back() + ": fsync: " + ErrnoText(errno));
  }
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

Status CaptureWriter::CloseFile() {
  Status status = Flush();
  if (appender_) {
    const Status closed = appender_->Close();  // unmaps, cuts off the reserved space
    if (status.ok()) status = closed;
    dropped_closed_ += appender_->dropped_bytes();
    appender_.reset();
    dirty_ = true;  // the file's new size must reach the disk too
  }
  if (status.ok() && dirty_ && ::fdatasync(fd_) != 0) {
    status = Status::IoError(paths_.back() + ": fsync: " + ErrnoText(errno));
  }
  dirty_ = false;
  if (syncer_) syncer_->SetFile(-1, {}, false);
  if (::close(fd_) != 0 && status.ok()) {
    status = Status::IoError(paths_.back() + ": close: " + ErrnoText(errno));
  }
  fd_ = -1;
  return status;
}

Status CaptureWriter::Close() {
  if (fd_ < 0) return Status::Ok();
  Status status = CloseFile();
  if (syncer_) {
    const Status background = syncer_->TakeError();
    if (status.ok()) status = background;
    syncer_.reset();  // stops its thread
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// CaptureReader

CaptureReader::~CaptureReader() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Checks a file header. kMalformed for a file that is not a capture at all, kUnsupported for a
// newer version, kCorrupt for a damaged header (reading goes on after it).
Status CheckFileHeader(const std::byte* header, size_t available, const std::string& name) {
  if (available < kCaptureFileHeaderSize || !LooksLikeCapture({header, available})) {
    return Status::Malformed(name + ": not a kvindex capture (bad magic)");
  }
  const uint16_t version = GetLe16(header + 8);
  if (version != kCaptureVersion) {
    return Status::Unsupported(name + ": capture version " + std::to_string(version) +
                               " (this kvindex reads version " + std::to_string(kCaptureVersion) +
                               ")");
  }
  if (GetLe16(header + 10) != kCaptureFileHeaderSize || GetLe64(header + 24) != FileHeaderChecksum(header)) {
    return Status::Corrupt(name + ": byte 0: file header checksum mismatch");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<CaptureReader>> CaptureReader::Open(std::vector<std::string> paths) {
  if (paths.empty()) return Status::InvalidArgument("no capture file given");
  std::unique_ptr<CaptureReader> reader(new CaptureReader());
  reader->paths_ = std::move(paths);
  // Check every file's header up front, so that a wrong file fails before anything is applied.
  for (const std::string& path : reader->paths_) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) return Status::NotFound(path + ": no such file");
      return Status::IoError(path + ": cannot open: " + ErrnoText(err));
    }
    std::byte header[kCaptureFileHeaderSize];
    ssize_t n;
    do {
      n = ::pread(fd, header, sizeof(header), 0);
    } while (n < 0 && errno == EINTR);
    ::close(fd);
    if (n < 0) return Status::IoError(path + ": read: " + ErrnoText(errno));
    const Status status = CheckFileHeader(header, static_cast<size_t>(n), path);
    if (status.code() == StatusCode::kMalformed || status.code() == StatusCode::kUnsupported) {
      return status;
    }
  }
  KVINDEX_RETURN_IF_ERROR(reader->OpenFileAt(0));
  return reader;
}

Result<std::unique_ptr<CaptureReader>> CaptureReader::FromBuffer(std::vector<std::byte> bytes,
                                                                std::string name) {
  std::unique_ptr<CaptureReader> reader(new CaptureReader());
  reader->paths_ = {std::move(name)};
  reader->memory_ = true;
  reader->eof_ = true;
  reader->buffer_ = std::move(bytes);
  reader->end_ = reader->buffer_.size();
  const Status status = CheckFileHeader(reader->buffer_.data(), reader->end_, reader->paths_[0]);
  if (status.code() == StatusCode::kMalformed || status.code() == StatusCode::kUnsupported) {
    return status;
  }
  if (!status.ok()) reader->Report(status, 0, 0, false);
  reader->begin_ = kCaptureFileHeaderSize;
  reader->file_offset_of_begin_ = kCaptureFileHeaderSize;
  return reader;
}

Status CaptureReader::OpenFileAt(size_t index) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  file_index_ = index;
  begin_ = end_ = 0;
  file_offset_of_begin_ = 0;
  eof_ = false;
  const std::string& path = paths_[index];
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return Status::IoError(path + ": cannot open: " + ErrnoText(errno));
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  Fill(kCaptureFileHeaderSize);
  const Status status = CheckFileHeader(buffer_.data() + begin_, end_ - begin_, path);
  if (status.code() == StatusCode::kMalformed || status.code() == StatusCode::kUnsupported) {
    return status;
  }
  if (!status.ok()) Report(status, 0, 0, false);
  begin_ += kCaptureFileHeaderSize;
  file_offset_of_begin_ = kCaptureFileHeaderSize;
  return Status::Ok();
}

bool CaptureReader::Fill(size_t wanted) {
  if (end_ - begin_ >= wanted) return true;
  if (memory_ || eof_ || fd_ < 0) return false;
  // Compact, then grow to hold `wanted` bytes: at least doubling, so that a scan over a long
  // damaged stretch (which asks for a few bytes more each time) reads in big chunks.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < wanted || buffer_.size() < kMinReadChunk) {
    buffer_.resize(std::max({wanted, 2 * buffer_.size(), kMinReadChunk}));
  }
  while (end_ < wanted) {
    const ssize_t n = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_status_ = Status::IoError(paths_[file_index_] + ": read: " + ErrnoText(errno));
      eof_ = true;
      return false;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    end_ += static_cast<size_t>(n);
  }
  return true;
}

template <typename Record>
bool CaptureReader::ParseAt(size_t pos, size_t available, Record* record,
                            size_t* record_size, Status* why) const {
  const std::byte* p = buffer_.data() + pos;
  const uint32_t length = GetLe32(p);
  const uint8_t type = static_cast<uint8_t>(p[4]);
  if (length < kCaptureRecordHeaderSize || length > kCaptureRecordHeaderSize + kCaptureMaxBody ||
      GetLe16(p + 6) != kCaptureRecordHeaderSize) {
    *why = Status::Corrupt("record header: impossible length " + std::to_string(length));
    *record_size = 0;
    return false;
  }
  *record_size = length;
  if (available < length) {
    *why = Status::Corrupt("record of " + std::to_string(length) + " bytes is cut short after " +
                           std::to_string(available) + " bytes");
    return false;
  }
  if (GetLe64(p + 8) != RecordChecksum(p, length)) {
    *why = Status::Corrupt("record checksum mismatch");
    return false;
  }
  if (type == 0 || type > kMaxRecordType) {
    *why = Status::Unsupported("unknown record type " + std::to_string(type));
    return false;
  }
  if (record == nullptr) return true;
  record->type = static_cast<CaptureRecordType>(type);
  record->flags = static_cast<uint8_t>(p[5]);
  record->recv_ns = static_cast<int64_t>(GetLe64(p + 16));
  record->source = SourceId{GetLe32(p + 24)};
  SetBody(std::span<const std::byte>(p + kCaptureRecordHeaderSize,
                                     length - kCaptureRecordHeaderSize),
          *record);
  if (record->type == CaptureRecordType::kMessage || record->type == CaptureRecordType::kReplayed) {
    if (!DecodeFrames(record->body.data(), record->body.size(), record->frames)) {
      *why = Status::Malformed("message record: frame lengths do not add up to its body");
      return false;
    }
  } else {
    record->frames.clear();
  }
  return true;
}

void CaptureReader::Report(Status status, uint64_t offset, uint64_t skipped, bool tail) {
  problems_.push_back(
      CaptureProblem{paths_[file_index_], offset, std::move(status), skipped, tail});
}

template <typename Record>
bool CaptureReader::ReadNext(Record& record) {
  for (;;) {
    if (!io_status_.ok()) return false;
    if (end_ - begin_ == 0 && !Fill(1)) {
      // End of this file: go on with the next one.
      if (!io_status_.ok() || file_index_ + 1 >= paths_.size() || memory_) return false;
      const Status status = OpenFileAt(file_index_ + 1);
      if (!status.ok()) {
        io_status_ = status;
        return false;
      }
      continue;
    }
    const uint64_t offset = file_offset_of_begin_;
    if (!Fill(kCaptureRecordHeaderSize)) {
      const uint64_t left = end_ - begin_;
      Report(Status::Corrupt("torn record header (" + std::to_string(left) +
                             " bytes at the end of the file)"),
             offset, left, true);
      file_offset_of_begin_ += left;
      bytes_consumed_total_ += left;
      begin_ = end_;
      continue;
    }
    size_t size = 0;
    Status why;
    const uint32_t claimed = GetLe32(buffer_.data() + begin_);
    if (claimed >= kCaptureRecordHeaderSize && claimed <= kCaptureRecordHeaderSize + kCaptureMaxBody) {
      Fill(claimed);
    }
    if (ParseAt(begin_, end_ - begin_, &record, &size, &why)) {
      record.file_index = file_index_;
      record.offset = offset;
      begin_ += size;
      file_offset_of_begin_ += size;
      bytes_consumed_total_ += size;
      ++records_read_;
      return true;
    }
    // A record cut short by the end of the file is a torn tail, unless its length field is what
    // is damaged: the scan below tells the two apart by looking for a good record after it.
    // A bad record in the middle: skip it by its length if the next record (or the end of the
    // file) follows there, else scan forward byte by byte to the next record that verifies.
    size_t skip = 0;
    if (size != 0 && end_ - begin_ >= size) {
      Fill(size + kCaptureRecordHeaderSize);  // may compact: positions are relative to begin_
      const size_t after = begin_ + size;
      size_t next_size = 0;
      Status ignored;
      if (end_ == after && eof_) {
        skip = size;
      } else if (end_ - after >= kCaptureRecordHeaderSize) {
        const uint32_t next_claimed = GetLe32(buffer_.data() + after);
        if (next_claimed >= kCaptureRecordHeaderSize &&
            next_claimed <= kCaptureRecordHeaderSize + kCaptureMaxBody) {
          Fill(size + next_claimed);
        }
        if (ParseAt<CaptureRecordView>(begin_ + size, end_ - (begin_ + size), nullptr, &next_size, &ignored)) {
          skip = size;
        }
      }
    }
    if (skip == 0) {
      // Scan: advance one byte at a time until a record verifies or the data ends.
      skip = 1;
      for (;;) {
        if (!Fill(skip + kCaptureRecordHeaderSize)) {
          skip = end_ - begin_;
          break;
        }
        const size_t at = begin_ + skip;
        if (IsZeroWord(buffer_.data() + at)) {
          // A run of zeros (the unused reserved end of a mapped capture whose recorder was
          // killed): no record starts at its first five bytes, as a record starts with its
          // length (4 bytes, never 0). Step over it most of a word at a time.
          skip += 5;
          continue;
        }
        const uint32_t candidate = GetLe32(buffer_.data() + at);
        if (candidate >= kCaptureRecordHeaderSize &&
            candidate <= kCaptureRecordHeaderSize + kCaptureMaxBody &&
            GetLe16(buffer_.data() + at + 6) == kCaptureRecordHeaderSize) {
          Fill(skip + candidate);
          size_t candidate_size = 0;
          Status ignored;
          if (ParseAt<CaptureRecordView>(begin_ + skip, end_ - (begin_ + skip), nullptr, &candidate_size, &ignored)) {
            break;
          }
        }
        ++skip;
      }
    }
    const bool tail = begin_ + skip >= end_ && eof_;
    if (tail && AllZero(buffer_.data() + begin_, skip)) {
      why = Status::Corrupt(
          "zero bytes from here to the end of the file: space reserved by a recorder that did not "
          "close it (killed?); every record before it was read");
    } else {
      why = why.WithContext("record at byte " + std::to_string(offset));
    }
    Report(std::move(why), offset, skip, tail);
    begin_ += skip;
    file_offset_of_begin_ += skip;
    bytes_consumed_total_ += skip;
  }
}

bool CaptureReader::Next(CaptureRecord& record) { return ReadNext(record); }
bool CaptureReader::NextView(CaptureRecordView& view) { return ReadNext(view); }

}  // namespace kvindex
