#include "kvindex/files/request_trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "kvindex/json/json_reader.h"

namespace kvindex {
namespace {

// A trace line is read by the JSON reader (json/json_reader.h, simdjson On-Demand), one pass into
// TraceRequest without a DOM. The visitor stops at the first field it cannot take, so the error
// named is the first one in the line, with the column where its value starts.
bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Whether the text at `p` is an unsigned integer literal (digits, no leading zero, no fraction
// or exponent): a number that failed only because it is beyond 64 bits.
bool IsPlainInteger(std::string_view text, size_t at) {
  size_t i = at;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == at || (i - at > 1 && text[at] == '0')) return false;
  return i == text.size() || (text[i] != '.' && text[i] != 'e' && text[i] != 'E');
}

class LineFields final : public JsonFieldVisitor {
 public:
  LineFields(std::string_view line, TraceRequest* out, std::vector<uint64_t>* scratch)
      : line_(line), out_(out), scratch_(scratch) {}

  bool Field(std::string_view key, JsonValue& value) override {
    if (key == "timestamp") return Timestamp(value);
    if (key == "input_length")
      return Unsigned(value, "input_length", &out_->input_length, has_input);
    if (key == "output_length") {
      return Unsigned(value, "output_length", &out_->output_length, has_output);
    }
    if (key == "hash_ids") return HashIds(value);
    if (key == "chat_id") return Signed(value, "chat_id", &out_->chat_id, &has_chat);
    if (key == "parent_chat_id") return Signed(value, "parent_chat_id", &out_->parent_chat_id);
    if (key == "turn") return Signed(value, "turn", &out_->turn);
    if (key == "type") {
      JsonKind kind;
      if (!value.Kind(&kind)) return false;
      // Some releases may carry a numeric type; keep its text.
      std::string_view text;
      if (!(kind == JsonKind::kString ? value.String(&text) : value.Raw(&text))) return false;
      out_->type.assign(text);
      return true;
    }
    return value.Skip();
  }

  Status error;
  double timestamp = 0;
  bool has_timestamp = false, has_input = false, has_output = false, has_ids = false;
  bool has_chat = false;

 private:
  bool Fail(size_t offset, std::string_view field, std::string_view what) {
    error = Status::Malformed("column " + std::to_string(offset + 1) + ": " + std::string(field) +
                              ": " + std::string(what));
    return false;
  }
  // The value's kind, or false with `error` set when it is not a number.
  bool IsNumber(JsonValue& value, std::string_view field, std::string_view what) {
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    return kind == JsonKind::kNumber || Fail(value.offset(), field, what);
  }

  bool Timestamp(JsonValue& value) {
    if (!IsNumber(value, "timestamp", "expected a number")) return false;
    const size_t at = value.offset();
    JsonNumber n;
    if (!value.Number(&n)) {
      error = Status::Malformed("column " + std::to_string(at + 1) +
                                ": timestamp: number out of range or malformed");
      return false;
    }
    switch (n.kind) {
      case JsonNumber::Kind::kUnsigned:
        timestamp = static_cast<double>(n.u);
        break;
      case JsonNumber::Kind::kSigned:
        timestamp = static_cast<double>(n.i);
        break;
      default:
        timestamp = n.d;
    }
    has_timestamp = true;
    return true;
  }

  // A non-negative integer written without fraction or exponent (lengths).
  bool Unsigned(JsonValue& value, std::string_view field, uint64_t* out, bool& has) {
    if (!IsNumber(value, field, "expected a non-negative integer")) return false;
    const size_t at = value.offset();
    JsonNumber n;
    if (!value.Number(&n)) return Fail(at, field, "expected a non-negative integer");
    if (n.kind == JsonNumber::Kind::kBigInteger && IsPlainInteger(line_, at)) {
      return Fail(at, field, "integer out of range");
    }
    if (n.kind != JsonNumber::Kind::kUnsigned)
      return Fail(at, field, "expected a non-negative integer");
    *out = n.u;
    has = true;
    return true;
  }

  bool Signed(JsonValue& value, std::string_view field, std::optional<int64_t>* out,
              bool* has = nullptr) {
    if (!IsNumber(value, field, "expected an integer")) return false;
    const size_t at = value.offset();
    JsonNumber n;
    if (!value.Number(&n)) return Fail(at, field, "expected an integer");
    if (n.kind == JsonNumber::Kind::kBigInteger ||
        (n.kind == JsonNumber::Kind::kUnsigned &&
         n.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      return Fail(at, field, "integer out of range");
    }
    if (n.kind == JsonNumber::Kind::kFloat) return Fail(at, field, "expected an integer");
    *out = n.kind == JsonNumber::Kind::kSigned ? n.i : static_cast<int64_t>(n.u);
    if (has != nullptr) *has = true;
    return true;
  }

  bool HashIds(JsonValue& value) {
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    if (kind != JsonKind::kArray) return Fail(value.offset(), "hash_ids", "expected an array");
    // Ids go to a scratch vector reused across lines, then are copied out with one exact
    // allocation: no regrowth per line.
    scratch_->clear();
    JsonUintArrayRules rules;
    rules.stop_at_bad = true;
    JsonUintArrayScan scan;
    if (!value.UnsignedArray(rules, scratch_, &scan)) {
      syntax_in_ids = true;
      return false;
    }
    if (scan.first_bad != std::string_view::npos) {
      return Fail(scan.first_bad_offset, "hash_ids",
                  IsPlainInteger(line_, scan.first_bad_offset) ? "integer out of range"
                                                               : "expected a non-negative integer");
    }
    out_->hash_ids.assign(scratch_->begin(), scratch_->end());
    has_ids = true;
    return true;
  }

 public:
  bool syntax_in_ids = false;  // a syntax error met inside hash_ids

 private:
  std::string_view line_;
  TraceRequest* out_;
  std::vector<uint64_t>* scratch_;
};

// Parses one line into `*out`; `readable` bytes may be read from line.data() (the parser reads
// the line in place when they reach kJsonPadding beyond it). `scratch` holds hash ids.
Status ParseLine(std::string_view line, size_t readable, std::vector<uint64_t>* scratch,
                 TraceRequest* out, TraceFormat* format) {
  *out = TraceRequest{};
  const auto column = [](size_t offset) { return "column " + std::to_string(offset + 1) + ": "; };
  if (const size_t deep = JsonTooDeepAtFast(line); deep != std::string_view::npos) {
    return Status::Malformed(column(deep) + "nesting too deep");
  }
  // One reader per thread: its buffers serve every line without allocating.
  thread_local JsonReader reader;
  LineFields fields(line, out, scratch);
  const JsonError error = reader.ReadObject(line, readable, fields);
  if (!fields.error.ok()) return fields.error;  // a field's own problem, named by the visitor
  switch (error.kind) {
    case JsonError::Kind::kNone:
      break;
    case JsonError::Kind::kStopped:
      return fields.error;
    case JsonError::Kind::kNotObject: {
      size_t first = 0;
      while (first < line.size() && IsJsonSpace(line[first])) ++first;
      return Status::Malformed(column(first) + "expected '{' (a JSON object per line)");
    }
    default: {
      const std::string what = fields.syntax_in_ids ? "hash_ids: expected a non-negative integer"
                                                    : std::string(error.what);
      if (error.offset == std::string_view::npos) return Status::Malformed(what);
      return Status::Malformed(column(error.offset) + what);
    }
  }
  if (!fields.has_timestamp) return Status::Malformed("missing key 'timestamp'");
  if (!fields.has_input) return Status::Malformed("missing key 'input_length'");
  if (!fields.has_output) return Status::Malformed("missing key 'output_length'");
  if (!fields.has_ids) return Status::Malformed("missing key 'hash_ids'");
  const TraceFormat line_format = fields.has_chat ? TraceFormat::kBailian : TraceFormat::kMooncake;
  if (*format != TraceFormat::kUnknown && *format != line_format) {
    return Status::Malformed(std::string("a ") + std::string(TraceFormatName(line_format)) +
                             " record in a " + std::string(TraceFormatName(*format)) +
                             " trace (formats cannot be mixed)");
  }
  *format = line_format;
  out->timestamp_ms =
      line_format == TraceFormat::kBailian ? fields.timestamp * 1000.0 : fields.timestamp;
  if (!std::isfinite(out->timestamp_ms)) return Status::Malformed("timestamp out of range");
  return Status::Ok();
}

constexpr size_t kReadChunk = 1 << 20;

}  // namespace

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kBailian:
      return "bailian";
    case TraceFormat::kUnknown:
      break;
  }
  return "unknown";
}

uint32_t DefaultBlockTokens(TraceFormat format) {
  return format == TraceFormat::kBailian ? 16 : 512;
}

Status ParseTraceLine(std::string_view line, TraceRequest* out, TraceFormat* format) {
  std::vector<uint64_t> scratch;
  return ParseLine(line, line.size(), &scratch, out, format);
}

TraceReader::TraceReader(std::string name, TraceReaderOptions options)
    : name_(std::move(name)), options_(options) {}

TraceReader::~TraceReader() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path,
                                                       TraceReaderOptions options) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": cannot open: " + std::strerror(err));
  }
  std::unique_ptr<TraceReader> reader(new TraceReader(path, options));
  reader->file_ = file;
  return reader;
}

std::unique_ptr<TraceReader> TraceReader::FromBuffer(std::string name, std::string_view text,
                                                     TraceReaderOptions options) {
  std::unique_ptr<TraceReader> reader(new TraceReader(std::move(name), options));
  reader->text_ = text;
  return reader;
}

Result<bool> TraceReader::NextLine(std::string_view* line) {
  if (file_ == nullptr) {
    if (text_pos_ >= text_.size()) return false;
    const size_t nl = text_.find('\n', text_pos_);
    const size_t end = nl == std::string_view::npos ? text_.size() : nl;
    *line = text_.substr(text_pos_, end - text_pos_);
    text_pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
    return true;
  }
  while (true) {
    const size_t nl = buffer_.find('\n', buffer_pos_);
    if (nl != std::string::npos) {
      *line = std::string_view(buffer_).substr(buffer_pos_, nl - buffer_pos_);
      buffer_pos_ = nl + 1;
      return true;
    }
    if (eof_) {
      if (buffer_pos_ >= buffer_.size()) return false;
      *line = std::string_view(buffer_).substr(buffer_pos_);
      buffer_pos_ = buffer_.size();
      return true;
    }
    // Keep the partial line and read the next chunk after it.
    buffer_.erase(0, buffer_pos_);
    buffer_pos_ = 0;
    const size_t old = buffer_.size();
    // Room for the parser's padding after the last line, so that it too is read in place.
    buffer_.reserve(old + kReadChunk + kJsonPadding);
    buffer_.resize(old + kReadChunk);
    const size_t got = std::fread(buffer_.data() + old, 1, kReadChunk, file_);
    buffer_.resize(old + got);
    if (got < kReadChunk) {
      if (std::ferror(file_)) {
        return Status::IoError(name_ + ": read failed after line " + std::to_string(line_number_));
      }
      eof_ = true;
    }
  }
}

Result<bool> TraceReader::Next(TraceRequest* out) {
  while (true) {
    if (options_.max_requests != 0 && requests_ >= options_.max_requests) return false;
    std::string_view line;
    KVINDEX_ASSIGN_OR_RETURN(bool more, NextLine(&line));
    if (!more) return false;
    ++line_number_;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
    TraceFormat format = format_;
    // Bytes readable after the line: the rest of the buffer it lies in.
    const char* const limit =
        file_ == nullptr ? text_.data() + text_.size() : buffer_.data() + buffer_.capacity();
    const size_t readable = static_cast<size_t>(limit - line.data());
    Status status = ParseLine(line, readable, &id_scratch_, out, &format);
    if (!status.ok()) {
      Status located = status.WithContext(name_ + ": line " + std::to_string(line_number_));
      if (!options_.skip_bad) return located;
      if (skipped_ == 0) first_skip_error_ = located.message();
      ++skipped_;
      continue;
    }
    format_ = format;
    out->line = line_number_;
    ++requests_;
    return true;
  }
}

namespace {

Result<Trace> Collect(TraceReader& reader) {
  Trace trace;
  trace.name = reader.name();
  TraceRequest request;
  while (true) {
    KVINDEX_ASSIGN_OR_RETURN(bool more, reader.Next(&request));
    if (!more) break;
    trace.requests.push_back(std::move(request));
  }
  // Processing order is timestamp order; equal timestamps keep file order (docs/simulation.md
  // "The model"). Traces are usually written in order already; checking costs one pass, sorting
  // moves every request.
  const auto by_time = [](const TraceRequest& a, const TraceRequest& b) {
    return a.timestamp_ms < b.timestamp_ms;
  };
  if (!std::is_sorted(trace.requests.begin(), trace.requests.end(), by_time)) {
    std::stable_sort(trace.requests.begin(), trace.requests.end(), by_time);
  }
  trace.format = reader.format();
  trace.skipped_lines = reader.skipped_lines();
  trace.first_skip_error = reader.first_skip_error();
  return trace;
}

}  // namespace

Result<Trace> ReadTrace(const std::string& path, TraceReaderOptions options) {
  KVINDEX_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path, options));
  return Collect(*reader);
}

Result<Trace> ReadTraceBuffer(std::string name, std::string_view text, TraceReaderOptions options) {
  auto reader = TraceReader::FromBuffer(std::move(name), text, options);
  return Collect(*reader);
}

}  // namespace kvindex
