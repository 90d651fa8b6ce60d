// The one JSON reader of the request bodies (/query, /query_by_hash, /cache) and of trace lines:
// a one-pass reader over simdjson's On-Demand API that walks an object's fields in text order and
// hands each value to a visitor, without building a DOM. The library does the lexing (strings,
// escapes, UTF-8, numbers, structure); callers only decide what a field means.
//
// Every value is read completely, unknown ones included (Skip() validates what it skips), so a
// document is accepted only when it is RFC 8259 JSON as a whole. Numbers are classified as
// nlohmann_json classifies them (a non-negative integer is unsigned, a negative one signed, an
// integer beyond 64 bits or one with a fraction or exponent a float; a float beyond double range
// is an error), which keeps the accepted language of the bodies what it was.
//
// Thread safety: a JsonReader is used by one thread at a time (it owns the parser's buffers, which
// are reused from one document to the next); distinct readers are independent. A JsonValue lives
// only during the visitor call that received it.
#ifndef KVINDEX_JSON_JSON_READER_H_
#define KVINDEX_JSON_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvindex {

// Readable bytes the parser needs after a document to read it in place (SIMDJSON_PADDING);
// with fewer, JsonReader copies the document into its own buffer first.
inline constexpr size_t kJsonPadding = 64;

enum class JsonKind : uint8_t { kObject, kArray, kString, kNumber, kBool, kNull };

struct JsonNumber {
  enum class Kind : uint8_t {
    kUnsigned,    // a non-negative integer up to 2^64 - 1: `u`
    kSigned,      // a negative integer down to -2^63 (or -0): `i`
    kFloat,       // a fraction or an exponent: `d`
    kBigInteger,  // an integer literal beyond 64 bits: `d` holds its (rounded) value
  };
  Kind kind = Kind::kUnsigned;
  uint64_t u = 0;
  int64_t i = 0;
  double d = 0;
};

// How a JSON array of unsigned integers is read (JsonValue::UnsignedArray).
struct JsonUintArrayRules {
  uint64_t max = ~uint64_t{0};  // larger elements are bad
  bool minus_zero_ok = false;   // whether `-0` counts as 0 (nlohmann's DOM reads it as 0)
  bool stop_at_bad = false;     // stop at the first bad element (else count on to the end)
};

// What UnsignedArray found: every element counted; the first bad one's index and byte offset.
struct JsonUintArrayScan {
  size_t count = 0;
  size_t first_bad = std::string_view::npos;
  size_t first_bad_offset = std::string_view::npos;
};

// Why a document was refused (JsonReader::ReadObject).
struct JsonError {
  enum class Kind : uint8_t {
    kNone,
    kSyntax,     // not JSON: `what` says what was wrong
    kNotObject,  // valid JSON whose top value is not an object
    kTrailing,   // a complete object followed by more text
    kStopped,    // a visitor returned false (its own error stands)
  };
  Kind kind = Kind::kNone;
  size_t offset = std::string_view::npos;  // byte offset into the document, npos when unknown
  std::string_view what;                   // a static phrase, e.g. "expected ',' or '}' in object"
};

// core/json_depth.h's JsonTooDeepAt(text) (the byte offset where `text` nests deeper than
// kMaxJsonDepth, or npos), answered without its scan when `text` holds no more '{' and '[' bytes
// than that depth, which no nesting can then exceed: a count the compiler vectorizes, several
// times cheaper per byte than the guard's own walk. Linear.
size_t JsonTooDeepAtFast(std::string_view text);

// Long arrays of plain ids are read 64 bytes at a time with AVX-512 (VBMI2) instructions where
// the processor has them (JsonWideIdScanAvailable), else by the portable scan; both accept the
// same texts and give the same answers. SetJsonWideIdScan(false) keeps the reader on the portable
// scan (tests check each against the other; process-wide, default on).
bool JsonWideIdScanAvailable();
void SetJsonWideIdScan(bool enabled);

class JsonReader;
class JsonElementVisitor;

// One value inside a document being read. Every method reads the value (or part of it); after a
// failing call the document is refused with a kSyntax error and the visitor should return false.
// A value is read at most once.
class JsonValue {
 public:
  // The value's kind, from its first byte (no further reading). False when that byte starts no
  // JSON value.
  bool Kind(JsonKind* out);
  // Byte offset of the value's first byte in the document.
  size_t offset() const;

  // The unescaped string; `*out` stays valid until the document's next value is read.
  bool String(std::string_view* out);
  bool Number(JsonNumber* out);
  bool Bool(bool* out);
  // Reads and validates any value (objects and arrays to the end).
  bool Skip();
  // Skip(), giving the value's text as it stands in the document (valid while the document is).
  bool Raw(std::string_view* out);
  // Reads an array of unsigned integers, appending the good elements to `out` (each bad one is
  // validated and skipped). The value must be an array (check Kind() first).
  bool UnsignedArray(const JsonUintArrayRules& rules, std::vector<uint32_t>* out,
                     JsonUintArrayScan* scan);
  bool UnsignedArray(const JsonUintArrayRules& rules, std::vector<uint64_t>* out,
                     JsonUintArrayScan* scan);
  // Calls `visitor` with each element of an array (check Kind() first).
  bool ForEachElement(JsonElementVisitor& visitor);

 private:
  friend class JsonReader;
  JsonValue(JsonReader* reader, void* value) : reader_(reader), value_(value) {}
  JsonReader* reader_;
  void* value_;  // the parser's value, owned by the reading call
};

// Called with each field of the top object, in text order (duplicates included). Return false to
// stop reading (ReadObject then fails with kStopped, or with the kSyntax error a failing
// JsonValue call recorded).
class JsonFieldVisitor {
 public:
  virtual bool Field(std::string_view key, JsonValue& value) = 0;
  // The document is read again from its start (ReadObject with a JsonArrayHint, on the rare
  // documents the hint does not fit): forget every field seen so far.
  virtual void Restart() {}

 protected:
  ~JsonFieldVisitor() = default;
};

// Called with each element of an array, with its index.
class JsonElementVisitor {
 public:
  virtual bool Element(size_t index, JsonValue& value) = 0;

 protected:
  ~JsonElementVisitor() = default;
};

// An array of unsigned integers ReadObject may read straight from the text before the parser
// runs: the first `"key": [` in the text whose elements are all plain non-negative integers of at
// most `max` is read by a loop over its bytes and cut out of the parser's copy, so the parser
// neither scans nor steps over it (most of a /query body is its token_ids array). The visitor's
// UnsignedArray() call on that value, which must use the same `max`, gets the ids read; every
// other reading of it (Skip(), Kind()) sees the array it is. When the text does not fit (the key
// inside a string, any error in the document, a Raw() spanning the array), the document is
// read again whole, without the cut, after the visitor's Restart(): what the visitor sees and
// every error are those of the document as it stands.
struct JsonArrayHint {
  std::string_view key;  // as it stands in the text (no escapes)
  uint64_t max = ~uint64_t{0};
};

class JsonReader {
 public:
  JsonReader();
  ~JsonReader();
  JsonReader(const JsonReader&) = delete;
  JsonReader& operator=(const JsonReader&) = delete;

  // Reads `text`, which must be one JSON object, calling `visitor` with each field. `readable` is
  // how many bytes may be read from text.data() (at least text.size()): with kJsonPadding beyond
  // the text the document is read in place, else it is copied first. Returns kNone on success,
  // else the first problem met in text order. `text` is borrowed for the call only.
  JsonError ReadObject(std::string_view text, size_t readable, JsonFieldVisitor& visitor);
  // The same with `hint` (see JsonArrayHint); the document is always copied.
  JsonError ReadObject(std::string_view text, JsonFieldVisitor& visitor, const JsonArrayHint& hint);

 private:
  friend class JsonValue;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvindex

#endif  // KVINDEX_JSON_JSON_READER_H_
