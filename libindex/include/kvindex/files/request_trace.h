// Request traces: the JSON Lines request logs that `kvindex replay` simulates (docs/simulation.md).
//
// Two public formats are read, and told apart by their keys (docs/trace_format.md, traces/README.md):
//   - Mooncake FAST'25: {"timestamp" (ms), "input_length", "output_length", "hash_ids"},
//     512 tokens per hash id;
//   - Alibaba Qwen-Bailian: the same plus "chat_id", "parent_chat_id", "type", "turn", with
//     "timestamp" in seconds and 16 tokens per hash id.
// Every hash id is one block (a partial last block included). Unknown keys are skipped.
//
// Thread safety: a TraceReader is used by one thread at a time; distinct readers are independent.
// A Trace is a plain value, safe to share read-only between threads.
#ifndef KVINDEX_FILES_REQUEST_TRACE_H_
#define KVINDEX_FILES_REQUEST_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvindex/core/status.h"

namespace kvindex {

enum class TraceFormat : uint8_t {
  kUnknown,   // nothing decided yet (no request read)
  kMooncake,  // Mooncake FAST'25: timestamp in ms, 512 tokens per hash id
  kBailian,   // Alibaba Qwen-Bailian: timestamp in s, 16 tokens per hash id, chat ids
};

// "mooncake", "bailian" or "unknown".
std::string_view TraceFormatName(TraceFormat format);
// Tokens per hash id of `format`: 512 (Mooncake), 16 (Bailian); 512 for kUnknown.
uint32_t DefaultBlockTokens(TraceFormat format);

// One request of a trace. Hash ids are trace-local block identities (the same id is the same
// block); they are not engine hashes, so they are plain integers.
struct TraceRequest {
  double timestamp_ms = 0;     // arrival time in milliseconds (Bailian seconds × 1000)
  uint64_t input_length = 0;   // prompt tokens
  uint64_t output_length = 0;  // generated tokens
  std::vector<uint64_t> hash_ids;
  // Qwen-Bailian only (absent in Mooncake traces).
  std::optional<int64_t> chat_id;
  std::optional<int64_t> parent_chat_id;  // -1 in the file (no parent) is kept as -1
  std::string type;                       // e.g. "text"; empty when absent
  std::optional<int64_t> turn;
  uint64_t line = 0;  // 1-based line number in the file it came from
};

struct TraceReaderOptions {
  // Skip (and count) lines that are not a valid request instead of failing on the first one.
  bool skip_bad = false;
  // Stop after this many requests (in file order); 0 = no limit.
  uint64_t max_requests = 0;
};

// Reads requests one at a time, in file order, from a file or an in-memory buffer.
class TraceReader {
 public:
  // Opens `path`. Fails with kNotFound / kIoError naming the path.
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& path,
                                                   TraceReaderOptions options = {});
  // Reads from `text`, which must outlive the reader; `name` stands for the file in messages.
  static std::unique_ptr<TraceReader> FromBuffer(std::string name, std::string_view text,
                                                 TraceReaderOptions options = {});
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Reads the next request into `*out`. Returns true when one was read, false at the end (or once
  // max_requests were read). A bad line fails with kMalformed:
  //   "<name>: line <n>: <problem>"
  // unless skip_bad is set, in which case it is counted in skipped_lines() and reading goes on.
  // Blank lines are ignored. An I/O error fails with kIoError.
  Result<bool> Next(TraceRequest* out);

  // The format decided by the first valid request (kUnknown before it).
  TraceFormat format() const { return format_; }
  // Lines skipped as bad (skip_bad only).
  uint64_t skipped_lines() const { return skipped_; }
  // The first skipped line's error (empty when none), for a diagnostic.
  const std::string& first_skip_error() const { return first_skip_error_; }
  const std::string& name() const { return name_; }

 private:
  TraceReader(std::string name, TraceReaderOptions options);
  // Sets *line to the next line (without '\n'); false at the end of input.
  Result<bool> NextLine(std::string_view* line);

  std::string name_;
  TraceReaderOptions options_;
  std::FILE* file_ = nullptr;  // null when reading a buffer
  std::string buffer_;         // file mode: bytes read and not yet consumed
  size_t buffer_pos_ = 0;
  bool eof_ = false;
  std::string_view text_;  // buffer mode
  size_t text_pos_ = 0;
  uint64_t line_number_ = 0;
  uint64_t requests_ = 0;
  uint64_t skipped_ = 0;
  std::string first_skip_error_;
  TraceFormat format_ = TraceFormat::kUnknown;
  std::vector<uint64_t> id_scratch_;  // the parser's working space, reused across lines
};

// A whole trace, in processing order: requests stable-sorted by timestamp.
struct Trace {
  std::string name;
  TraceFormat format = TraceFormat::kUnknown;
  std::vector<TraceRequest> requests;
  uint64_t skipped_lines = 0;
  std::string first_skip_error;
};

// Reads all of `path` (the first max_requests requests in file order) and stable-sorts them by
// timestamp. Fails as TraceReader::Next does.
Result<Trace> ReadTrace(const std::string& path, TraceReaderOptions options = {});
// The same over an in-memory buffer named `name`.
Result<Trace> ReadTraceBuffer(std::string name, std::string_view text,
                              TraceReaderOptions options = {});

// Parses one JSON Lines record (no newline) into `*out`, setting `*format` to the record's
// format. Fails with kMalformed and a message without file or line (the reader adds them).
Status ParseTraceLine(std::string_view line, TraceRequest* out, TraceFormat* format);

}  // namespace kvindex

#endif  // KVINDEX_FILES_REQUEST_TRACE_H_
