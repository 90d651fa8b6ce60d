// Fuzz target for reading journal messages of several records and putting batch records back in
// order (ingest/record_order.h). The input is a message body: records one after the other, split
// with NextRecordLength() as the journal reader splits them. Each record that parses goes to a
// RecordOrderer (2 KiB held at most, so the bound is reached), under one of two source keys, with
// a predecessor taken from the byte after it: none, the link id of an earlier batch record, or a
// link id no record has. Properties (a violation aborts):
//  - splitting always advances and covers the input exactly;
//  - no crash, whatever the records and predecessors;
//  - every record added is passed on exactly once after ReleaseAll(), and nothing stays held.
//
// Corpus (tests/fuzz/corpus/record_order/): capture records one after the other, as a journal
// message of several holds them: the records of the capture corpus's all_types.kvcap (its file
// header removed); those of a `kvindex record` capture of 6 publish-fake batches (a definition,
// notes, live batches); the same with its first live batch moved after the next two.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/files/capture_record.h"
#include "kvindex/ingest/record_order.h"

#include "fuzz_check.h"

namespace {

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("record_order_fuzz", what, detail, input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvindex;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  RecordOrderer orderer(2048);
  uint64_t added = 0;
  uint64_t passed = 0;
  const RecordOrderer::Sink sink = [&passed](uint64_t, uint64_t, CaptureRecordView&) {
    ++passed;
  };
  std::vector<uint64_t> links;
  size_t offset = 0;
  uint64_t position = 0;
  while (offset < bytes.size()) {
    const std::span<const std::byte> rest = bytes.subspan(offset);
    const size_t length = NextRecordLength(rest);
    if (length == 0 || length > rest.size()) Fail("split", std::to_string(length), input);
    offset += length;
    const std::span<const std::byte> record = rest.first(length);
    CaptureRecordView view;
    if (!ParseCaptureRecord(record, view).ok()) continue;
    // The byte after the record (if any) picks the key and the predecessor.
    const uint8_t pick = offset < bytes.size() ? static_cast<uint8_t>(bytes[offset]) : 0;
    std::optional<uint64_t> prev;
    if ((pick & 3) == 1 && !links.empty()) prev = links[(pick >> 2) % links.size()];
    if ((pick & 3) == 2) prev = 0x5eed0000u + pick;
    const uint64_t key = (pick >> 7) + 1;
    if (const std::optional<uint64_t> link = RecordLinkId(view)) links.push_back(*link);
    ++added;
    orderer.Add(++position, key, record, view, prev, sink);
    if ((pick & 0x7c) == 0x7c) orderer.ReleaseSource(key, sink);
  }
  if (offset != bytes.size()) Fail("split", "past the end", input);
  orderer.ReleaseAll(sink);
  if (passed != added) Fail("passed", std::to_string(passed) + " of " + std::to_string(added), input);
  if (orderer.stats().held_now != 0 || orderer.stats().held_bytes_now != 0) {
    Fail("held", std::to_string(orderer.stats().held_now), input);
  }
  return 0;
}
