// Fuzz target for CaptureReader: any bytes either fail Open with a clear status or read to the end
// without a crash, and every byte after the file header is accounted for as a record or as a
// reported skip. Corpus (corpus/capture/) made by make_capture_corpus.py from the documented
// format (docs/capture-format.md), independently of the C++ writer. The bytes after the file
// header are also parsed as one record on its own (ParseCaptureRecord, the journal's message
// parser): when they are one message record, encoding it again gives the same bytes.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kvindex/files/capture.h"
#include "kvindex/files/capture_record.h"

namespace {

void CheckOneRecord(std::span<const std::byte> bytes) {
  kvindex::CaptureRecordView view;
  if (!kvindex::ParseCaptureRecord(bytes, view).ok()) return;
  if (view.body.size() + kvindex::kCaptureRecordHeaderSize != bytes.size()) std::abort();
  const bool plain = view.flags == 0 && bytes[28] == std::byte{0} && bytes[29] == std::byte{0} &&
                     bytes[30] == std::byte{0} && bytes[31] == std::byte{0};
  if (!plain || (view.type != kvindex::CaptureRecordType::kMessage &&
                 view.type != kvindex::CaptureRecordType::kReplayed)) {
    return;
  }
  std::vector<std::byte> again;
  if (!kvindex::EncodeCaptureFrames(again, view.type, view.source, view.recv_ns, view.frames)
           .ok() ||
      again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  if (size > kvindex::kCaptureFileHeaderSize) {
    CheckOneRecord(std::span(bytes + kvindex::kCaptureFileHeaderSize,
                             size - kvindex::kCaptureFileHeaderSize));
  }
  auto reader = kvindex::CaptureReader::FromBuffer(std::vector<std::byte>(bytes, bytes + size));
  if (!reader.ok()) return 0;
  kvindex::CaptureRecord record;
  uint64_t records = 0;
  while ((*reader)->Next(record)) {
    if (record.body.size() > kvindex::kCaptureMaxBody) std::abort();
    ++records;
  }
  if (records != (*reader)->records_read()) std::abort();
  uint64_t skipped = 0;
  for (const auto& problem : (*reader)->problems()) skipped += problem.skipped_bytes;
  if ((*reader)->bytes_read() + kvindex::kCaptureFileHeaderSize != size) std::abort();
  if (skipped > size) std::abort();
  return 0;
}
