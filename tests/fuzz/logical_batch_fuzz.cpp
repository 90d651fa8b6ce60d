// Fuzz target for the lines of `publish-fake --batches FILE` (ParseLogicalBatch, one JSON line per
// logical batch). Properties (a violation aborts):
//  - any line gives a batch or a kMalformed status, never a crash or an escaping exception;
//  - an error is one non-empty line starting with the `where` the caller gave;
//  - a parsed batch holds no more events than the line's "events" array (nlohmann's own parse of
//    the same line, an independent count);
//  - for every wire format, CheckEncodable and EncodeEventBatch agree, and what encodes decodes
//    back without an error into as many events (publish-fake sends exactly these bytes).
// Each input is split at '\n' and every line is parsed, as publish-fake reads the file.
//
// Corpus (tests/fuzz/corpus/logical_batch/): the `logical` objects of the golden captures
// (tests/data/golden/*.json) one per line, plus hand-made lines with every event type, scope key,
// medium and the DP rank spellings, and lines with wrong types.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"

#include "fake/logical_batch.h"

namespace {

constexpr std::string_view kWhere = "fuzz.jsonl: line 1";

[[noreturn]] void Violation(const char* what, std::string_view line, const std::string& detail) {
  std::fprintf(stderr, "logical_batch_fuzz: %s: %s\nline: %.*s\n", what, detail.c_str(),
               static_cast<int>(line.size()), line.data());
  std::abort();
}

void CheckEncodings(const kvindex::EventBatch& batch, std::string_view line) {
  static constexpr kvindex::WireFormat kFormats[] = {
      kvindex::WireFormat::kVllmV09,  kvindex::WireFormat::kVllm,
      kvindex::WireFormat::kVllmMap,  kvindex::WireFormat::kSglang,
      kvindex::WireFormat::kMooncake, kvindex::WireFormat::kMooncakeSeed,
      kvindex::WireFormat::kSglangEagle, kvindex::WireFormat::kTrtllm,
      kvindex::WireFormat::kLmcache};
  std::vector<std::byte> out;
  for (kvindex::WireFormat format : kFormats) {
    const kvindex::Status check = kvindex::CheckEncodable(batch, format);
    const kvindex::Status encoded = kvindex::EncodeEventBatch(batch, format, out);
    if (check.code() != encoded.code()) {
      Violation("CheckEncodable and EncodeEventBatch disagree", line,
                std::string(kvindex::WireFormatName(format)) + ": " + check.ToString() + " vs " +
                    encoded.ToString());
    }
    if (!encoded.ok()) continue;
    auto back = kvindex::DecodeEventBatch(out);
    if (!back.ok()) {
      Violation("an encoded batch does not decode", line, back.status().ToString());
    }
    if (!back->errors.empty()) {
      Violation("an encoded batch decodes with errors", line, back->errors[0].status.ToString());
    }
    if (back->events.size() != batch.events.size()) {
      Violation("an encoded batch decodes into another number of events", line,
                std::string(kvindex::WireFormatName(format)));
    }
  }
}

void CheckLine(const std::string& line) {
  kvindex::Result<kvindex::EventBatch> batch = kvindex::Status::Internal("not run");
  try {
    batch = kvindex::cli::ParseLogicalBatch(line, std::string(kWhere));
  } catch (const std::exception& e) {
    Violation("ParseLogicalBatch threw", line, e.what());
  }
  if (!batch.ok()) {
    const std::string message = batch.status().message();
    if (batch.status().code() != kvindex::StatusCode::kMalformed) {
      Violation("an error that is not kMalformed", line, batch.status().ToString());
    }
    if (message.rfind(kWhere, 0) != 0 || message.find('\n') != std::string::npos) {
      Violation("an error that is not one line naming the input", line, message);
    }
    return;
  }
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("events") ||
      !doc["events"].is_array()) {
    Violation("accepted a line that is not an object with an events array", line, "");
  }
  if (batch->events.size() > doc["events"].size()) {
    Violation("more events than the line holds", line, std::to_string(batch->events.size()));
  }
  CheckEncodings(*batch, line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string line(text.substr(begin, end - begin));
    // publish-fake skips blank lines before parsing.
    if (line.find_first_not_of(" \t\r") != std::string::npos) CheckLine(line);
    begin = end + 1;
  }
  return 0;
}
