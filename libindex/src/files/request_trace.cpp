#include "kvindex/files/request_trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

namespace kvindex {
namespace {

// A small JSON reader for the flat trace schema. Measured against nlohmann_json in
// bench/replay_bench.cpp (docs/benchmarks.md): the records are flat objects of numbers, short
// strings and one array of integers, so a hand-written scanner parses straight into TraceRequest
// without building a DOM. It accepts exactly RFC 8259 JSON for the values it reads and skips any
// other value with a nesting limit, so garbage is rejected, never trusted.
constexpr int kMaxDepth = 64;

class LineParser {
 public:
  // `scratch` is working space for hash ids; it may be reused across lines.
  LineParser(std::string_view text, std::vector<uint64_t>* scratch)
      : s_(text), scratch_(scratch) {}

  Status Parse(TraceRequest* out, TraceFormat* format) {
    *out = TraceRequest{};
    bool has_timestamp = false, has_input = false, has_output = false, has_ids = false;
    bool has_chat = false;
    double timestamp = 0;
    SkipWs();
    if (!Eat('{')) return Error("expected '{' (a JSON object per line)");
    SkipWs();
    if (!Eat('}')) {
      while (true) {
        SkipWs();
        std::string_view key;
        KVINDEX_RETURN_IF_ERROR(ParseKey(&key));
        SkipWs();
        if (!Eat(':')) return Error("expected ':' after key");
        SkipWs();
        if (key == "timestamp") {
          KVINDEX_RETURN_IF_ERROR(ParseDouble(&timestamp, "timestamp"));
          has_timestamp = true;
        } else if (key == "input_length") {
          KVINDEX_RETURN_IF_ERROR(ParseUnsigned(&out->input_length, "input_length"));
          has_input = true;
        } else if (key == "output_length") {
          KVINDEX_RETURN_IF_ERROR(ParseUnsigned(&out->output_length, "output_length"));
          has_output = true;
        } else if (key == "hash_ids") {
          KVINDEX_RETURN_IF_ERROR(ParseIdArray(&out->hash_ids));
          has_ids = true;
        } else if (key == "chat_id") {
          int64_t v = 0;
          KVINDEX_RETURN_IF_ERROR(ParseSigned(&v, "chat_id"));
          out->chat_id = v;
          has_chat = true;
        } else if (key == "parent_chat_id") {
          int64_t v = 0;
          KVINDEX_RETURN_IF_ERROR(ParseSigned(&v, "parent_chat_id"));
          out->parent_chat_id = v;
        } else if (key == "turn") {
          int64_t v = 0;
          KVINDEX_RETURN_IF_ERROR(ParseSigned(&v, "turn"));
          out->turn = v;
        } else if (key == "type") {
          if (Peek() == '"') {
            KVINDEX_RETURN_IF_ERROR(ParseString(&out->type, "type"));
          } else {
            // Some releases may carry a numeric type; keep its text.
            size_t start = pos_;
            KVINDEX_RETURN_IF_ERROR(SkipValue(0));
            out->type.assign(s_.substr(start, pos_ - start));
          }
        } else {
          KVINDEX_RETURN_IF_ERROR(SkipValue(0));
        }
        SkipWs();
        if (Eat(',')) continue;
        if (Eat('}')) break;
        return Error("expected ',' or '}' in object");
      }
    }
    SkipWs();
    if (pos_ != s_.size()) return Error("unexpected text after the object");
    if (!has_timestamp) return Status::Malformed("missing key 'timestamp'");
    if (!has_input) return Status::Malformed("missing key 'input_length'");
    if (!has_output) return Status::Malformed("missing key 'output_length'");
    if (!has_ids) return Status::Malformed("missing key 'hash_ids'");
    const TraceFormat line_format = has_chat ? TraceFormat::kBailian : TraceFormat::kMooncake;
    if (*format != TraceFormat::kUnknown && *format != line_format) {
      return Status::Malformed(std::string("a ") + std::string(TraceFormatName(line_format)) +
                               " record in a " + std::string(TraceFormatName(*format)) +
                               " trace (formats cannot be mixed)");
    }
    *format = line_format;
    out->timestamp_ms = line_format == TraceFormat::kBailian ? timestamp * 1000.0 : timestamp;
    if (!std::isfinite(out->timestamp_ms)) return Status::Malformed("timestamp out of range");
    return Status::Ok();
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' || s_[pos_] == '\n')) {
      ++pos_;
    }
  }
  Status Error(std::string_view what) const {
    return Status::Malformed("column " + std::to_string(pos_ + 1) + ": " + std::string(what));
  }

  // Scans a JSON number's extent (RFC 8259 grammar) and returns it in *text.
  Status ScanNumber(std::string_view* text, std::string_view field) {
    const size_t start = pos_;
    Eat('-');
    if (Eat('0')) {
    } else if (pos_ < s_.size() && s_[pos_] >= '1' && s_[pos_] <= '9') {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    } else {
      pos_ = start;
      return Error(std::string(field) + ": expected a number");
    }
    if (Eat('.')) {
      if (!(pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')) {
        return Error(std::string(field) + ": bad number");
      }
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!(pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')) {
        return Error(std::string(field) + ": bad number");
      }
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    *text = s_.substr(start, pos_ - start);
    return Status::Ok();
  }

  Status ParseDouble(double* out, std::string_view field) {
    const size_t start = pos_;
    std::string_view text;
    KVINDEX_RETURN_IF_ERROR(ScanNumber(&text, field));
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(*out)) {
      pos_ = start;
      return Error(std::string(field) + ": number out of range");
    }
    return Status::Ok();
  }

  // A non-negative integer written without fraction or exponent (hash ids, lengths).
  Status ParseUnsigned(uint64_t* out, std::string_view field) {
    const size_t start = pos_;
    uint64_t v = 0;
    size_t digits = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t d = static_cast<uint64_t>(s_[pos_] - '0');
      // Up to 19 digits cannot overflow; only the 20th needs the (slower) checked arithmetic.
      if (digits >= 19 && (__builtin_mul_overflow(v, uint64_t{10}, &v) ||
                           __builtin_add_overflow(v, d, &v))) {
        pos_ = start;
        return Error(std::string(field) + ": integer out of range");
      }
      if (digits < 19) v = v * 10 + d;
      ++pos_;
      ++digits;
    }
    if (digits == 0 || (digits > 1 && s_[start] == '0') || Peek() == '.' || Peek() == 'e' ||
        Peek() == 'E') {
      pos_ = start;
      return Error(std::string(field) + ": expected a non-negative integer");
    }
    *out = v;
    return Status::Ok();
  }

  Status ParseSigned(int64_t* out, std::string_view field) {
    const size_t start = pos_;
    const bool negative = Eat('-');
    uint64_t magnitude = 0;
    Status status = ParseUnsigned(&magnitude, field);
    if (!status.ok()) {
      pos_ = start;
      return Error(std::string(field) + ": expected an integer");
    }
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    if (magnitude > limit) {
      pos_ = start;
      return Error(std::string(field) + ": integer out of range");
    }
    *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return Status::Ok();
  }

  Status ParseIdArray(std::vector<uint64_t>* ids) {
    if (!Eat('[')) return Error("hash_ids: expected an array");
    // Ids go to a scratch vector reused across lines, then are copied out with one exact
    // allocation: no regrowth and no pre-scan per line.
    std::vector<uint64_t>& scratch = *scratch_;
    scratch.clear();
    SkipWs();
    if (Eat(']')) return Status::Ok();
    // The hot loop of the whole reader (one iteration per block): a fast path for the common
    // shape "digits, optional spaces, ',' or ']'" with at most 19 digits (no overflow possible);
    // anything else falls back to the general, fully checked ParseUnsigned.
    const char* const base = s_.data();
    const size_t n = s_.size();
    while (true) {
      SkipWs();
      size_t p = pos_;
      uint64_t v = 0;
      while (p < n && p - pos_ < 19 && static_cast<unsigned char>(base[p] - '0') < 10) {
        v = v * 10 + static_cast<uint64_t>(base[p] - '0');
        ++p;
      }
      const size_t digits = p - pos_;
      const bool simple = digits > 0 && digits < 19 && (digits == 1 || base[pos_] != '0') &&
                          (p >= n || (static_cast<unsigned char>(base[p] - '0') >= 10 &&
                                      base[p] != '.' && base[p] != 'e' && base[p] != 'E'));
      if (simple) {
        pos_ = p;
      } else {
        KVINDEX_RETURN_IF_ERROR(ParseUnsigned(&v, "hash_ids"));
      }
      scratch.push_back(v);
      SkipWs();
      if (Eat(',')) continue;
      if (Eat(']')) {
        ids->assign(scratch.begin(), scratch.end());
        return Status::Ok();
      }
      return Error("hash_ids: expected ',' or ']'");
    }
  }

  static void AppendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error("bad \\u escape");
      }
    }
    *out = v;
    return Status::Ok();
  }

  // Parses an object key. The fast path (no escapes) returns a view into the line; a key with
  // escapes is decoded into key_scratch_.
  Status ParseKey(std::string_view* key) {
    if (Peek() == '"') {
      const size_t start = pos_ + 1;
      size_t i = start;
      while (i < s_.size() && s_[i] != '"' && s_[i] != '\\' &&
             static_cast<unsigned char>(s_[i]) >= 0x20) {
        ++i;
      }
      if (i < s_.size() && s_[i] == '"') {
        *key = s_.substr(start, i - start);
        pos_ = i + 1;
        return Status::Ok();
      }
    }
    key_scratch_.clear();
    KVINDEX_RETURN_IF_ERROR(ParseString(&key_scratch_, "a key"));
    *key = key_scratch_;
    return Status::Ok();
  }

  // Parses a JSON string; `out` may be null to only validate and skip it.
  Status ParseString(std::string* out, std::string_view what) {
    if (!Eat('"')) return Error("expected " + std::string(what) + " (a string)");
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return Status::Ok();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        if (out != nullptr) out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char e = s_[pos_++];
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          KVINDEX_RETURN_IF_ERROR(ParseHex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 1 < s_.size() && s_[pos_] == '\\' &&
              s_[pos_ + 1] == 'u') {
            pos_ += 2;
            uint32_t low = 0;
            KVINDEX_RETURN_IF_ERROR(ParseHex4(&low));
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              return Error("bad surrogate pair");
            }
          }
          if (out != nullptr) AppendUtf8(out, cp);
          continue;
        }
        default:
          return Error("bad escape in string");
      }
      if (out != nullptr) out->push_back(plain);
    }
  }

  Status SkipValue(int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipWs();
    const char c = Peek();
    if (c == '"') return ParseString(nullptr, "a value");
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      SkipWs();
      if (Eat(close)) return Status::Ok();
      while (true) {
        SkipWs();
        if (c == '{') {
          KVINDEX_RETURN_IF_ERROR(ParseString(nullptr, "a key"));
          SkipWs();
          if (!Eat(':')) return Error("expected ':' after key");
        }
        KVINDEX_RETURN_IF_ERROR(SkipValue(depth + 1));
        SkipWs();
        if (Eat(',')) continue;
        if (Eat(close)) return Status::Ok();
        return Error("expected ',' or a closing bracket");
      }
    }
    for (std::string_view word : {std::string_view("true"), std::string_view("false"),
                                  std::string_view("null")}) {
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return Status::Ok();
      }
    }
    std::string_view number;
    return ScanNumber(&number, "value");
  }

  std::string_view s_;
  std::vector<uint64_t>* scratch_;
  size_t pos_ = 0;
  std::string key_scratch_;
};

constexpr size_t kReadChunk = 1 << 20;

}  // namespace

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kMooncake: return "mooncake";
    case TraceFormat::kBailian: return "bailian";
    case TraceFormat::kUnknown: break;
  }
  return "unknown";
}

uint32_t DefaultBlockTokens(TraceFormat format) {
  return format == TraceFormat::kBailian ? 16 : 512;
}

Status ParseTraceLine(std::string_view line, TraceRequest* out, TraceFormat* format) {
  std::vector<uint64_t> scratch;
  return LineParser(line, &scratch).Parse(out, format);
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
    Status status = LineParser(line, &id_scratch_).Parse(out, &format);
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
    std::stable_sort(trace.requests.begin(), trace.requests.end(),
                     by_time);
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

Result<Trace> ReadTraceBuffer(std::string name, std::string_view text,
                              TraceReaderOptions options) {
  auto reader = TraceReader::FromBuffer(std::move(name), text, options);
  return Collect(*reader);
}

}  // namespace kvindex
