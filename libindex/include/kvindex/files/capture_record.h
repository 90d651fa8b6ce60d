// One capture record on its own, outside a file: the same bytes a capture file holds for it
// (docs/capture-format.md, "Record": header, checksum, body), so anything that carries records
// elsewhere (the event journal, docs/scale-out.md) needs no format of its own. Encode*() build a
// record the way CaptureWriter's Write*() do; ParseCaptureRecord() verifies one as CaptureReader
// does. CaptureRecordSink is where a live recorder hands each record besides (or instead of) a
// capture file.
//
// Thread safety: the functions are plain functions of their arguments (any thread); a sink is
// called by one thread (the recorder's).
#ifndef KVINDEX_FILES_CAPTURE_RECORD_H_
#define KVINDEX_FILES_CAPTURE_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvindex/core/instance.h"
#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"

namespace kvindex {

// `out` = one record of `type` (kMessage, kReplayed) holding `frames`. kLimitExceeded (and `out`
// empty) when the body would exceed kCaptureMaxBody.
Status EncodeCaptureFrames(std::vector<std::byte>& out, CaptureRecordType type, SourceId source,
                           int64_t recv_ns, std::span<const std::span<const std::byte>> frames);
// `out` = one record with two le64 fields (kGap, kLost, kRestart, kTimeout).
void EncodeCaptureObservation(std::vector<std::byte>& out, CaptureRecordType type,
                              SourceId source, int64_t recv_ns, uint64_t first, uint64_t second);
// `out` = one record whose body is `text` (kSourceDefinition, kMalformed, kNote). kLimitExceeded
// as EncodeCaptureFrames().
Status EncodeCaptureText(std::vector<std::byte>& out, CaptureRecordType type, SourceId source,
                         int64_t recv_ns, std::string_view text);

// Verifies `bytes` as exactly one record (length, checksum, type, frame lengths) and fills `view`
// with views into `bytes` (file_index and offset 0). kCorrupt / kUnsupported / kMalformed as the
// reader reports them.
Status ParseCaptureRecord(std::span<const std::byte> bytes, CaptureRecordView& view);

// Receives every record a live recorder makes, encoded, in the order it makes them.
class CaptureRecordSink {
 public:
  virtual ~CaptureRecordSink() = default;
  // One record; `record` is valid during the call only.
  virtual void Put(std::span<const std::byte> record) = 0;
  // The recorder is about to wait for input: a sink that batches may hand its batch on now.
  virtual void EndOfCycle() {}
};

}  // namespace kvindex

#endif  // KVINDEX_FILES_CAPTURE_RECORD_H_
