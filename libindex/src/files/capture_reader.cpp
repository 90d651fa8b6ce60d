// CaptureReader: streams the records of a capture's files in order, with memory bounded by the
// largest record, reporting and stepping over torn and corrupt stretches; and what a record read
// is (CaptureRecord, CaptureRecordView).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"

#include "capture_format.h"

namespace kvindex {

using capture_internal::ErrnoText;
using capture_internal::FileHeaderChecksum;
using capture_internal::GetLe16;
using capture_internal::GetLe32;
using capture_internal::GetLe64;
using capture_internal::kMagic;
using capture_internal::RecordChecksum;

namespace {

constexpr size_t kMinReadChunk = 1u << 20;
constexpr uint8_t kMaxRecordType = static_cast<uint8_t>(CaptureRecordType::kTimeout);

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
  if (GetLe16(header + 10) != kCaptureFileHeaderSize ||
      GetLe64(header + 24) != FileHeaderChecksum(header)) {
    return Status::Corrupt(name + ": byte 0: file header checksum mismatch");
  }
  return Status::Ok();
}

// Verifies the record at `p` (`available` bytes readable) and, when `record` is not null, fills
// it. `*record_size` is the record's length (0: impossible); `*why` says what is wrong.
template <typename Record>
bool ParseRecordAt(const std::byte* p, size_t available, Record* record, size_t* record_size,
                   Status* why) {
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
  SetBody(
      std::span<const std::byte>(p + kCaptureRecordHeaderSize, length - kCaptureRecordHeaderSize),
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

}  // namespace

std::string_view CaptureRecordTypeName(CaptureRecordType type) {
  switch (type) {
    case CaptureRecordType::kSourceDefinition:
      return "source";
    case CaptureRecordType::kMessage:
      return "message";
    case CaptureRecordType::kReplayed:
      return "replayed";
    case CaptureRecordType::kGap:
      return "gap";
    case CaptureRecordType::kLost:
      return "lost";
    case CaptureRecordType::kRestart:
      return "restart";
    case CaptureRecordType::kMalformed:
      return "malformed";
    case CaptureRecordType::kNote:
      return "note";
    case CaptureRecordType::kTimeout:
      return "timeout";
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

CaptureReader::~CaptureReader() {
  if (fd_ >= 0) ::close(fd_);
}

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
bool CaptureReader::ParseAt(size_t pos, size_t available, Record* record, size_t* record_size,
                            Status* why) const {
  return ParseRecordAt(buffer_.data() + pos, available, record, record_size, why);
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
    if (claimed >= kCaptureRecordHeaderSize &&
        claimed <= kCaptureRecordHeaderSize + kCaptureMaxBody) {
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
    const size_t skip = BytesToSkip(size);
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

// A record cut short by the end of the file is a torn tail, unless its length field is what is
// damaged: ScanForRecord() tells the two apart by looking for a good record after it. A bad record
// in the middle: skip it by its length if the next record (or the end of the file) follows there,
// else scan forward byte by byte to the next record that verifies.
size_t CaptureReader::BytesToSkip(size_t size) {
  if (size != 0 && end_ - begin_ >= size) {
    Fill(size + kCaptureRecordHeaderSize);  // may compact: positions are relative to begin_
    const size_t after = begin_ + size;
    if (end_ == after && eof_) return size;
    if (end_ - after >= kCaptureRecordHeaderSize) {
      const uint32_t next_claimed = GetLe32(buffer_.data() + after);
      if (next_claimed >= kCaptureRecordHeaderSize &&
          next_claimed <= kCaptureRecordHeaderSize + kCaptureMaxBody) {
        Fill(size + next_claimed);
      }
      size_t next_size = 0;
      Status ignored;
      if (ParseAt<CaptureRecordView>(begin_ + size, end_ - (begin_ + size), nullptr, &next_size,
                                     &ignored)) {
        return size;
      }
    }
  }
  return ScanForRecord();
}

size_t CaptureReader::ScanForRecord() {
  // Advance one byte at a time until a record verifies or the data ends.
  size_t skip = 1;
  for (;;) {
    if (!Fill(skip + kCaptureRecordHeaderSize)) return end_ - begin_;
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
      if (ParseAt<CaptureRecordView>(begin_ + skip, end_ - (begin_ + skip), nullptr,
                                     &candidate_size, &ignored)) {
        return skip;
      }
    }
    ++skip;
  }
}

bool CaptureReader::Next(CaptureRecord& record) { return ReadNext(record); }
bool CaptureReader::NextView(CaptureRecordView& view) { return ReadNext(view); }

Status ParseCaptureRecord(std::span<const std::byte> bytes, CaptureRecordView& view) {
  if (bytes.size() < kCaptureRecordHeaderSize) {
    return Status::Corrupt("record of " + std::to_string(bytes.size()) +
                           " bytes is shorter than a record header");
  }
  size_t size = 0;
  Status why;
  if (!ParseRecordAt(bytes.data(), bytes.size(), &view, &size, &why)) return why;
  if (size != bytes.size()) {
    return Status::Corrupt("record of " + std::to_string(size) + " bytes in " +
                           std::to_string(bytes.size()) + " bytes");
  }
  view.file_index = 0;
  view.offset = 0;
  return Status::Ok();
}

}  // namespace kvindex
