// CaptureWriter: appends records to a capture file (write(2), coalesced write(2), or the mapped
// appender of capture_map.h), fsyncs on the recording thread or through its Syncer, and rotates
// to a new self-contained file by size or age.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvindex/core/clock.h"
#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"

#include "capture_format.h"
#include "capture_map.h"
#include "capture_syncer.h"

namespace kvindex {

using capture_internal::ErrnoText;
using capture_internal::FileHeaderChecksum;
using capture_internal::GetLe32;
using capture_internal::kMagic;
using capture_internal::PutLe16;
using capture_internal::PutLe32;
using capture_internal::PutLe64;
using capture_internal::RecordChecksum;

namespace {

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

Status TooLarge(size_t body_size) {
  return Status::LimitExceeded("capture record body of " + std::to_string(body_size) +
                               " bytes exceeds the maximum of " + std::to_string(kCaptureMaxBody));
}

// `out` = a record of `body_size` bytes of body; returns where the body goes.
std::byte* StartRecord(std::vector<std::byte>& out, CaptureRecordType type, SourceId source,
                       int64_t recv_ns, size_t body_size) {
  const size_t total = kCaptureRecordHeaderSize + body_size;
  out.resize(total);
  capture_internal::PutRecordHeader(out.data(), total, static_cast<uint8_t>(type), source.value,
                                    recv_ns);
  return out.data() + kCaptureRecordHeaderSize;
}

}  // namespace

Status EncodeCaptureFrames(std::vector<std::byte>& out, CaptureRecordType type, SourceId source,
                           int64_t recv_ns, std::span<const std::span<const std::byte>> frames) {
  const size_t body_size = capture_internal::FramesBodySize(frames);
  if (body_size > kCaptureMaxBody) {
    out.clear();
    return TooLarge(body_size);
  }
  capture_internal::PutFramesBody(StartRecord(out, type, source, recv_ns, body_size), frames);
  capture_internal::SealRecord(out.data());
  return Status::Ok();
}

void EncodeCaptureObservation(std::vector<std::byte>& out, CaptureRecordType type,
                              SourceId source, int64_t recv_ns, uint64_t first, uint64_t second) {
  std::byte* body = StartRecord(out, type, source, recv_ns, 16);
  PutLe64(body, first);
  PutLe64(body + 8, second);
  capture_internal::SealRecord(out.data());
}

Status EncodeCaptureText(std::vector<std::byte>& out, CaptureRecordType type, SourceId source,
                         int64_t recv_ns, std::string_view text) {
  if (text.size() > kCaptureMaxBody) {
    out.clear();
    return TooLarge(text.size());
  }
  std::byte* body = StartRecord(out, type, source, recv_ns, text.size());
  if (!text.empty()) std::memcpy(body, text.data(), text.size());
  capture_internal::SealRecord(out.data());
  return Status::Ok();
}

std::string RotatedCapturePath(const std::string& base, size_t index) {
  if (index == 0) return base;
  const std::filesystem::path path(base);
  std::filesystem::path rotated = path;
  rotated.replace_filename(path.stem().string() + "." + std::to_string(index) +
                           path.extension().string());
  return rotated.string();
}

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
  // Overwriting truncates only once the file is locked: truncating a file another writer has
  // mapped would kill that writer (SIGBUS on its next store), so a second writer is refused.
  int flags = (map ? O_RDWR : O_WRONLY) | O_CREAT | O_CLOEXEC | (options_.overwrite ? 0 : O_EXCL);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::IoError(path + ": already exists (refusing to overwrite a capture)");
    }
    return Status::IoError(path + ": cannot create: " + ErrnoText(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Status::IoError(path + ": another writer has this capture open");
    }
    return Status::IoError(path + ": cannot lock: " + ErrnoText(err));
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (options_.overwrite && regular && ::ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IoError(path + ": cannot truncate: " + ErrnoText(err));
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
  file_opened_ = SteadyClock::now();
  last_sync_ = file_opened_;
  KVINDEX_RETURN_IF_ERROR(appender_ ? appender_->Append(header, sizeof(header))
                                    : WriteAll(fd_, header, sizeof(header), path));
  file_bytes_ += sizeof(header);
  file_preamble_bytes_ = file_bytes_;
  bytes_written_ += sizeof(header);
  dirty_ = true;
  return Status::Ok();
}

Status CaptureWriter::MaybeRotate() {
  // A file with nothing past its preamble is never rotated: with a threshold smaller than the
  // preamble, rotating it would rotate again at once, forever.
  if (rotating_ || file_bytes_ <= file_preamble_bytes_) return Status::Ok();
  const bool by_bytes = options_.rotate_bytes != 0 && file_bytes_ >= options_.rotate_bytes;
  const bool by_time = options_.rotate_interval.count() != 0 &&
                       SteadyClock::now() - file_opened_ >= options_.rotate_interval;
  if (!by_bytes && !by_time) return Status::Ok();
  KVINDEX_RETURN_IF_ERROR(CloseFile());
  KVINDEX_RETURN_IF_ERROR(OpenFile(RotatedCapturePath(base_path_, paths_.size())));
  // Every file is self-contained: repeat the definitions of the sources seen so far.
  rotating_ = true;
  const auto definitions = definitions_;
  for (const auto& [source, json] : definitions) {
    const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(json.data()),
                                          json.size());
    const Status written = WriteRecord(CaptureRecordType::kSourceDefinition, source, RealtimeNs(),
                                       std::span(&part, 1));
    if (!written.ok()) {
      rotating_ = false;
      return written;
    }
  }
  rotating_ = false;
  file_preamble_bytes_ = file_bytes_;
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
  capture_internal::PutRecordHeader(p, total, static_cast<uint8_t>(type), source.value, recv_ns);
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
  capture_internal::SealRecord(p);
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
  if (body_size > kCaptureMaxBody) return TooLarge(body_size);
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
  const size_t body_size = capture_internal::FramesBodySize(frames);
  if (body_size > kCaptureMaxBody) return TooLarge(body_size);
  capture_internal::PutFramesBody(BeginRecord(type, source, recv_ns, body_size), frames);
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
  if (SteadyClock::now() - last_sync_ < options_.fsync_interval) return Status::Ok();
  return Sync();
}

Status CaptureWriter::Sync() {
  KVINDEX_RETURN_IF_ERROR(Flush());
  if (fd_ < 0 || !dirty_) return Status::Ok();
  if (::fdatasync(fd_) != 0) {
    return Status::IoError(paths_.back() + ": fsync: " + ErrnoText(errno));
  }
  dirty_ = false;
  last_sync_ = SteadyClock::now();
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

}  // namespace kvindex
