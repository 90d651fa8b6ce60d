// Helpers for tests that build capture records by hand (files/capture_record.h): bytes from text,
// a live batch record, its link id (ingest/record_order.h). Plain functions; a failed encoding or
// parse fails the calling test case (doctest REQUIRE).
#ifndef KVINDEX_TESTS_RECORD_TEST_UTIL_H_
#define KVINDEX_TESTS_RECORD_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/codec/framing.h"
#include "kvindex/files/capture_record.h"
#include "kvindex/ingest/record_order.h"

namespace kvindex::test {

using Bytes = std::vector<std::byte>;

inline Bytes B(std::string_view s) {
  Bytes out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

// A live batch record (frames [topic "kv", seq, payload]) of capture source 9.
inline Bytes LiveRecord(uint64_t seq, const Bytes& payload, int64_t recv_ns = 1) {
  const Bytes topic = B("kv");
  const Bytes seq8 = EncodeSeqFrame(seq);
  const std::vector<std::span<const std::byte>> frames = {topic, seq8, payload};
  Bytes out;
  REQUIRE(EncodeCaptureFrames(out, CaptureRecordType::kMessage, SourceId{9}, recv_ns, frames).ok());
  return out;
}

// The link id of a batch record.
inline uint64_t LinkOf(const Bytes& record) {
  CaptureRecordView view;
  REQUIRE(ParseCaptureRecord(record, view).ok());
  const std::optional<uint64_t> link = RecordLinkId(view);
  REQUIRE(link.has_value());
  return *link;
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_RECORD_TEST_UTIL_H_
