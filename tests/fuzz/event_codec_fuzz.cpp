// Fuzz target for DecodeEventBatch / EncodeEventBatch.
//
// Properties (a violation aborts, which fails the ctest):
//  - decoding any bytes returns a batch or a Status, never crashes (ASan/UBSan builds check the
//    memory and arithmetic too);
//  - every per-event error and envelope error carries a non-ok code;
//  - when a batch decodes with no per-event errors, it encodes in the detected format, and
//    decode(encode(batch)) == batch (events, ts, dp_rank), with no errors and the same detected
//    format's bytes again (encoding is a fixed point);
//  - decoding into one EventBatch reused across every input (DecodeEventBatchInto) gives the same
//    status, batch and errors as a fresh decode;
//  - decoding without asking for the detected format (the decoder's vLLM fast path, when the
//    payload has its shape) gives the same status, batch and errors too.
// Each input is decoded with the automatic hint and with the SGLang hint (the one that changes
// the detected format of look-alike eras).
//
// Corpus (tests/fuzz/corpus/event_codec/, binary payloads): the oracle vectors of
// tests/data/event_codec_vectors.py and the golden captures' payloads, written by
//   /usr/bin/python3 tests/data/event_codec_vectors.py --corpus
//       tests/fuzz/corpus/event_codec tests/data/golden
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kvindex/codec/event_codec.h"

namespace {

std::span<const std::byte> g_input;  // the input under test, printed on a violation

[[noreturn]] void Violation(const char* what, const kvindex::Status& status) {
  std::fprintf(stderr, "event_codec_fuzz: %s: %s\ninput (%zu bytes): ", what,
               status.ToString().c_str(), g_input.size());
  for (std::byte b : g_input) std::fprintf(stderr, "%02x", static_cast<unsigned>(b));
  std::fprintf(stderr, "\n");
  std::abort();
}

void Check(std::span<const std::byte> bytes, kvindex::FormatHint hint) {
  kvindex::WireFormat detected{};
  auto batch = kvindex::DecodeEventBatch(bytes, hint, &detected);
  static kvindex::EventBatch reused;  // holds whatever the previous inputs decoded to
  kvindex::WireFormat detected_into{};
  const kvindex::Status into = kvindex::DecodeEventBatchInto(bytes, reused, hint, &detected_into);
  if (into.code() != batch.status().code()) {
    Violation("decoding into a reused batch gave another status", into);
  }
  if (into.ok() && (reused != *batch || detected_into != detected)) {
    Violation("decoding into a reused batch gave another batch", kvindex::Status::Internal("mismatch"));
  }
  static kvindex::EventBatch reused_fast;
  const kvindex::Status fast = kvindex::DecodeEventBatchInto(bytes, reused_fast, hint);
  if (fast.code() != batch.status().code()) {
    Violation("decoding without a detected format gave another status", fast);
  }
  if (fast.ok() && reused_fast != *batch) {
    Violation("decoding without a detected format gave another batch",
              kvindex::Status::Internal("mismatch"));
  }
  if (!batch.ok()) {
    if (batch.status().ok()) Violation("failed decode with an ok status", batch.status());
    return;
  }
  for (const auto& e : batch->errors) {
    if (e.status.ok()) Violation("per-event error with an ok status", e.status);
  }
  if (!batch->errors.empty()) return;
  std::vector<std::byte> encoded;
  const kvindex::Status s = kvindex::EncodeEventBatch(*batch, detected, encoded);
  if (!s.ok()) Violation("the detected format cannot encode the decoded batch", s);
  kvindex::WireFormat detected2{};
  auto again = kvindex::DecodeEventBatch(encoded, hint, &detected2);
  if (!again.ok()) Violation("re-decoding the encoded batch failed", again.status());
  if (!again->errors.empty()) Violation("re-decoded batch has errors", again->errors[0].status);
  if (again->events != batch->events || again->ts != batch->ts ||
      again->dp_rank != batch->dp_rank) {
    Violation("decode(encode(batch)) differs from batch", kvindex::Status::Internal("mismatch"));
  }
  std::vector<std::byte> encoded2;
  if (!kvindex::EncodeEventBatch(*again, detected, encoded2).ok() || encoded2 != encoded) {
    Violation("encoding is not a fixed point", kvindex::Status::Internal("bytes differ"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so that AddressSanitizer sees a read one byte past the payload (the
  // mutation driver's buffers have spare capacity).
  std::unique_ptr<std::byte[]> copy(new std::byte[size == 0 ? 1 : size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::span<const std::byte> bytes(copy.get(), size);
  g_input = bytes;
  Check(bytes, kvindex::FormatHint::kAuto);
  Check(bytes, kvindex::FormatHint::kSglang);
  return 0;
}
