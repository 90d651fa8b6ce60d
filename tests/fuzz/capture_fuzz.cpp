// Fuzz target for CaptureReader: any bytes either fail Open with a clear status or read to the end
// without a crash, and every byte after the file header is accounted for as a record or as a
// reported skip. Corpus (corpus/capture/) made by make_capture_corpus.py from the documented
// format (docs/capture-format.md), independently of the C++ writer.
#include <cstdlib>
#include <vector>

#include "kvindex/files/capture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
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
