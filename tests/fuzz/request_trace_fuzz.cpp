// Fuzz target: the request trace reader never crashes on garbage, and what it accepts is sane.
// Each input is read twice as a JSON Lines buffer (strict, then skip_bad); every accepted request
// is re-serialised and must read back the same (a round trip through the Mooncake format).
// Corpus (tests/fuzz/corpus/request_trace/): hand-made lines of both formats, the first lines of
// the public Mooncake traces, and edge cases (escapes, nesting, huge numbers, mixed formats).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kvindex/files/request_trace.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

std::string ToMooncakeLine(const kvindex::TraceRequest& r) {
  std::string line = "{\"timestamp\": 0, \"input_length\": " + std::to_string(r.input_length) +
                     ", \"output_length\": " + std::to_string(r.output_length) +
                     ", \"hash_ids\": [";
  for (size_t i = 0; i < r.hash_ids.size(); ++i) {
    if (i > 0) line += ", ";
    line += std::to_string(r.hash_ids[i]);
  }
  return line + "]}";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto strict = kvindex::ReadTraceBuffer("fuzz", text);
  kvindex::TraceReaderOptions options;
  options.skip_bad = true;
  auto lenient = kvindex::ReadTraceBuffer("fuzz", text, options);
  Require(lenient.ok());  // with skip_bad, only I/O can fail, and a buffer has none
  if (strict.ok()) {
    Require(strict->requests.size() == lenient->requests.size());
    Require(lenient->skipped_lines == 0);
  } else {
    Require(strict.status().code() == kvindex::StatusCode::kMalformed);
    Require(strict.status().message().rfind("fuzz: line ", 0) == 0);
    Require(strict.status().message().find('\n') == std::string::npos);
    Require(lenient->skipped_lines > 0);
  }
  for (size_t i = 1; i < lenient->requests.size(); ++i) {
    Require(lenient->requests[i - 1].timestamp_ms <= lenient->requests[i].timestamp_ms);
  }
  for (const kvindex::TraceRequest& r : lenient->requests) {
    kvindex::TraceRequest back;
    kvindex::TraceFormat format = kvindex::TraceFormat::kUnknown;
    Require(kvindex::ParseTraceLine(ToMooncakeLine(r), &back, &format).ok());
    Require(back.hash_ids == r.hash_ids);
    Require(back.input_length == r.input_length && back.output_length == r.output_length);
  }
  return 0;
}
