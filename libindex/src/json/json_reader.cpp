// JsonReader over simdjson On-Demand, through its error-code API only (nothing here throws).
// On-Demand parses lazily: a value is checked when it is read, and a value the caller does not
// read is skipped without being checked. So every value is read here: a visitor's unread value is
// skipped with Skip(), which walks it completely.
#include "kvindex/json/json_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include <simdjson.h>

#include "kvindex/core/json_depth.h"

namespace kvindex {

namespace od = simdjson::ondemand;
using simdjson::error_code;

static_assert(kJsonPadding == simdjson::SIMDJSON_PADDING);

namespace {

// Parser buffers above this are released after the document, so one huge body does not keep
// its buffers for the life of the thread.
constexpr size_t kKeptCapacity = size_t{1} << 20;

std::string_view WhatOf(error_code e) {
  switch (e) {
    case simdjson::UNCLOSED_STRING:
      return "unterminated string";
    case simdjson::UNESCAPED_CHARS:
      return "control character in string";
    case simdjson::UTF8_ERROR:
      return "invalid UTF-8";
    case simdjson::STRING_ERROR:
      return "bad escape in string";
    case simdjson::NUMBER_ERROR:
      return "bad number";
    case simdjson::EMPTY:
      return "no JSON value";
    case simdjson::DEPTH_ERROR:
      return "nesting too deep";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
    case simdjson::INCORRECT_TYPE:
      return "bad literal";
    default:
      return "bad JSON structure";
  }
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The common array of ids read straight from its text: `p` stands on the '[' of an array the
// parser has not read; the document ends at `end`, which has at least kJsonPadding readable bytes
// after it. Succeeds only when every element is a plain non-negative integer (no sign, fraction,
// exponent or leading zero) of at most 19 digits and at most `max`, separated by ',' and JSON
// whitespace: then appends them to `ids`, sets `*count` and returns the closing ']'. Anything else
// returns nullptr, leaving the array to the parser's own per-element path, which decides what it
// is (a bad id, a bad number, not JSON). The text accepted here is valid JSON as it stands, so
// the parser only has to step over it.
template <typename T>
const char* ScanPlainUintArray(const char* p, const char* end, uint64_t max, std::vector<T>& ids,
                               size_t* count) {
  const size_t first = ids.size();
  ++p;  // '['
  while (p < end && IsJsonSpace(*p)) ++p;
  if (p < end && *p == ']') {
    *count = 0;
    return p;
  }
  while (p < end) {
    // The digits at p, from one 8-byte load (the padding keeps 8 bytes readable): a byte is a
    // digit when neither b + 0x46 nor b - 0x30 sets its top bit, and no carry or borrow crosses
    // from a digit byte into the next, so the lowest flagged byte is the first non-digit (no
    // flag: eight or more digits). Up to seven are moved to the top bytes and converted in three
    // multiplies instead of a loop per digit.
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native != std::endian::little) w = __builtin_bswap64(w);
    const uint64_t flags =
        ((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) & 0x8080808080808080ULL;
    size_t width = static_cast<size_t>(std::countr_zero(flags)) / 8;
    uint64_t value = 0;
    if (width - 1 < 7) [[likely]] {
      uint64_t v = (w & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - width));
      v = (v * 2561) >> 8;
      v = ((v & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
      value = ((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
    } else if (width == 0) {
      return nullptr;
    } else {  // eight or more digits: digit by digit, at most 19
      width = 0;
      while (p + width < end && width <= 19 && static_cast<unsigned char>(p[width] - '0') <= 9) {
        value = value * 10 + static_cast<uint64_t>(p[width] - '0');
        ++width;
      }
      if (width > 19) return nullptr;
    }
    if (p + width > end || (width > 1 && *p == '0') || value > max) return nullptr;
    ids.push_back(static_cast<T>(value));
    p += width;
    if (*p == ',') [[likely]] {  // *p is readable: p <= end, and the padding follows
      ++p;
      if (static_cast<unsigned char>(*p) <= ' ') {
        while (p < end && IsJsonSpace(*p)) ++p;
      }
      continue;
    }
    while (p < end && IsJsonSpace(*p)) ++p;
    if (p == end) return nullptr;
    if (*p == ']') {
      *count = ids.size() - first;
      return p;
    }
    if (*p != ',') return nullptr;
    ++p;
    while (p < end && IsJsonSpace(*p)) ++p;
  }
  return nullptr;
}

}  // namespace

struct JsonReader::Impl {
  od::parser parser;
  std::string copy;
  const char* base = nullptr;
  size_t size = 0;
  od::document* doc = nullptr;
  JsonError error;
  bool consumed = false;  // whether the current field's value was read

  // Records the first syntax error; the offset is where the parser stands.
  bool Fail(std::string_view what) {
    if (error.kind == JsonError::Kind::kNone) {
      error.kind = JsonError::Kind::kSyntax;
      error.what = what;
      const char* at = nullptr;
      if (doc != nullptr && doc->current_location().get(at) == simdjson::SUCCESS) {
        error.offset = static_cast<size_t>(at - base);
      }
    }
    return false;
  }
  bool Fail(error_code e) { return Fail(WhatOf(e)); }

  bool Skip(od::value& v);
  bool Number(od::value& v, JsonNumber* out);
  template <typename T>
  bool UnsignedArray(od::value& v, const JsonUintArrayRules& rules, std::vector<T>* out,
                     JsonUintArrayScan* scan);
  bool ValidateRoot();
};

bool JsonReader::Impl::Number(od::value& v, JsonNumber* out) {
  const std::string_view token = v.raw_json_token();
  od::number n;
  if (const error_code e = v.get_number().get(n); e != simdjson::SUCCESS) {
    // An integer beyond 64 bits is still a number (a float, as nlohmann reads it).
    if (e != simdjson::NUMBER_ERROR || v.get_double().get(out->d) != simdjson::SUCCESS) {
      return Fail(e);
    }
    bool integer = true;
    for (const char c : token) {
      if (c == '.' || c == 'e' || c == 'E') integer = false;
      if (c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        break;
      }
    }
    out->kind = integer ? JsonNumber::Kind::kBigInteger : JsonNumber::Kind::kFloat;
    return true;
  }
  switch (n.get_number_type()) {
    case od::number_type::floating_point_number:
      out->kind = JsonNumber::Kind::kFloat;
      out->d = n.get_double();
      break;
    case od::number_type::unsigned_integer:
      out->kind = JsonNumber::Kind::kUnsigned;
      out->u = n.get_uint64();
      break;
    default:
      out->i = n.get_int64();
      if (!token.empty() && token[0] == '-') {
        out->kind = JsonNumber::Kind::kSigned;
      } else {
        out->kind = JsonNumber::Kind::kUnsigned;
        out->u = static_cast<uint64_t>(out->i);
      }
  }
  return true;
}

bool JsonReader::Impl::Skip(od::value& v) {
  od::json_type type;
  if (const error_code e = v.type().get(type); e != simdjson::SUCCESS) return Fail(e);
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (const error_code e = v.get_object().get(object); e != simdjson::SUCCESS) return Fail(e);
      for (auto field_result : object) {
        od::field field;
        if (std::move(field_result).get(field) != simdjson::SUCCESS) {
          return Fail("expected ',' or '}' in object");
        }
        std::string_view key;
        if (const error_code e = field.unescaped_key().get(key); e != simdjson::SUCCESS) {
          return Fail(e);
        }
        if (!Skip(field.value())) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (const error_code e = v.get_array().get(array); e != simdjson::SUCCESS) return Fail(e);
      for (auto element_result : array) {
        od::value element;
        if (std::move(element_result).get(element) != simdjson::SUCCESS) {
          return Fail("expected ',' or ']' in array");
        }
        if (!Skip(element)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      const error_code e = v.get_string().get(s);
      return e == simdjson::SUCCESS || Fail(e);
    }
    case od::json_type::number: {
      JsonNumber n;
      return Number(v, &n);
    }
    case od::json_type::boolean: {
      bool b = false;
      const error_code e = v.get_bool().get(b);
      return e == simdjson::SUCCESS || Fail(e);
    }
    case od::json_type::null: {
      bool null = false;
      const error_code e = v.is_null().get(null);
      if (e != simdjson::SUCCESS) return Fail(e);
      return null || Fail("bad literal");
    }
  }
  return Fail("bad value");
}

// The hot loop of a /query body and of a trace line (one iteration per id). The count, the bound
// and the output vector are locals, so the compiler keeps them in registers across the parser's
// inlined calls instead of reloading them through the pointers at every element.
template <typename T>
bool JsonReader::Impl::UnsignedArray(od::value& v, const JsonUintArrayRules& rules,
                                     std::vector<T>* out, JsonUintArrayScan* scan) {
  std::vector<T>& ids = *out;
  const char* open = v.raw_json_token().data();
  const size_t kept = ids.size();
  size_t plain = 0;
  if (const char* close = ScanPlainUintArray(open, base + size, rules.max, ids, &plain)) {
    // Read from the text: the parser only steps over the array (its structure, no numbers),
    // which must end where the scan did.
    od::array skipped;
    std::string_view text;
    if (const error_code e = v.get_array().get(skipped); e != simdjson::SUCCESS) return Fail(e);
    if (const error_code e = skipped.raw_json().get(text); e != simdjson::SUCCESS) return Fail(e);
    if (text.data() + text.size() <= close) return Fail("expected ',' or ']' in array");
    *scan = JsonUintArrayScan{};
    scan->count = plain;
    return true;
  }
  ids.resize(kept);
  od::array array;
  if (const error_code e = v.get_array().get(array); e != simdjson::SUCCESS) return Fail(e);
  const uint64_t max = rules.max;
  size_t count = 0;
  JsonUintArrayScan found;
  for (auto element_result : array) {
    od::value element;
    if (std::move(element_result).get(element) != simdjson::SUCCESS) {
      return Fail("expected ',' or ']' in array");
    }
    uint64_t n = 0;
    if (element.get_uint64().get(n) == simdjson::SUCCESS && n <= max) [[likely]] {
      ids.push_back(static_cast<T>(n));
      ++count;
      continue;
    }
    // Not a plain id: a negative, a float, a big or malformed number, another kind of value.
    const std::string_view token = element.raw_json_token();
    const size_t at = static_cast<size_t>(token.data() - base);
    bool good = false;
    od::json_type type;
    if (element.type().get(type) == simdjson::SUCCESS && type == od::json_type::number) {
      JsonNumber number;
      if (!Number(element, &number)) {
        // A malformed number: where it starts, not where the parser stands.
        if (error.kind == JsonError::Kind::kSyntax) error.offset = at;
        return false;
      }
      good = number.kind == JsonNumber::Kind::kSigned && number.i == 0 && rules.minus_zero_ok;
    } else if (!Skip(element)) {
      return false;
    }
    if (good) {
      ids.push_back(0);
    } else if (found.first_bad == std::string_view::npos) {
      found.first_bad = count;
      found.first_bad_offset = at;
      if (rules.stop_at_bad) {
        found.count = count + 1;
        *scan = found;
        return true;
      }
    }
    ++count;
  }
  found.count = count;
  *scan = found;
  return true;
}

// A document whose top value is not an object: checked completely, so that bad JSON is told
// from a valid value of the wrong kind.
bool JsonReader::Impl::ValidateRoot() {
  od::json_type type;
  if (const error_code e = doc->type().get(type); e != simdjson::SUCCESS) return Fail(e);
  error_code e = simdjson::SUCCESS;
  switch (type) {
    case od::json_type::array: {
      od::array array;
      if ((e = doc->get_array().get(array)) != simdjson::SUCCESS) return Fail(e);
      for (auto element_result : array) {
        od::value element;
        if (std::move(element_result).get(element) != simdjson::SUCCESS) {
          return Fail("expected ',' or ']' in array");
        }
        if (!Skip(element)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      e = doc->get_string().get(s);
      break;
    }
    case od::json_type::number: {
      double d = 0;
      e = doc->get_double().get(d);
      break;
    }
    case od::json_type::boolean: {
      bool b = false;
      e = doc->get_bool().get(b);
      break;
    }
    case od::json_type::null: {
      bool null = false;
      e = doc->is_null().get(null);
      if (e == simdjson::SUCCESS && !null) return Fail("bad literal");
      break;
    }
    default:
      return Fail("bad value");
  }
  return e == simdjson::SUCCESS || Fail(e);
}

size_t JsonTooDeepAtFast(std::string_view text) {
  // Byte-wide counts per 64-byte block (at most 64 each): the compiler turns the inner loop into
  // vector compares and adds, a fraction of an instruction per byte.
  size_t openers = 0;
  size_t i = 0;
  for (; i + 64 <= text.size() && openers <= kMaxJsonDepth; i += 64) {
    uint8_t block = 0;
    for (size_t k = 0; k < 64; ++k) {
      const char c = text[i + k];
      block = static_cast<uint8_t>(block + (c == '{') + (c == '['));
    }
    openers += block;
  }
  for (; i < text.size(); ++i) openers += static_cast<size_t>(text[i] == '{' || text[i] == '[');
  if (openers <= kMaxJsonDepth) return std::string_view::npos;
  return JsonTooDeepAt(text);
}

JsonReader::JsonReader() : impl_(std::make_unique<Impl>()) {}
JsonReader::~JsonReader() = default;

JsonError JsonReader::ReadObject(std::string_view text, size_t readable,
                                 JsonFieldVisitor& visitor) {
  Impl& impl = *impl_;
  impl.error = JsonError{};
  simdjson::padded_string_view view;
  if (readable >= text.size() + simdjson::SIMDJSON_PADDING) {
    view = simdjson::padded_string_view(text.data(), text.size(), readable);
  } else {
    // The padding is zeroed: the id scan reads words that reach into it.
    impl.copy.assign(text);
    impl.copy.resize(text.size() + simdjson::SIMDJSON_PADDING, '\0');
    view = simdjson::padded_string_view(impl.copy.data(), text.size(), impl.copy.size());
  }
  impl.base = view.data();
  impl.size = view.size();
  {
    od::document doc;
    if (const error_code e = impl.parser.iterate(view).get(doc); e != simdjson::SUCCESS) {
      impl.doc = nullptr;
      impl.Fail(e);
    } else {
      impl.doc = &doc;
      od::object object;
      od::value root;
      od::json_type type;
      if (const error_code te = doc.type().get(type); te != simdjson::SUCCESS) {
        impl.Fail(te);
      } else if (type != od::json_type::object) {
        if (impl.ValidateRoot()) impl.error.kind = JsonError::Kind::kNotObject;
      } else if (const error_code oe = doc.get_value().get(root) != simdjson::SUCCESS
                                           ? doc.get_value().error()
                                           : root.get_object().get(object);
                 oe != simdjson::SUCCESS) {
        // Through get_value(): the document's own get_object() refuses a root object followed
        // by text without saying where; read this way, the text after it is found below.
        impl.Fail(oe);
      } else {
        bool stopped = false;
        for (auto field_result : object) {
          od::field field;
          if (std::move(field_result).get(field) != simdjson::SUCCESS) {
            impl.Fail("expected ',' or '}' in object");
            break;
          }
          std::string_view key;
          if (const error_code ke = field.unescaped_key().get(key); ke != simdjson::SUCCESS) {
            impl.Fail(ke);
            break;
          }
          od::value& raw = field.value();
          JsonValue value(this, &raw);
          impl.consumed = false;
          if (!visitor.Field(key, value)) {
            stopped = true;
            break;
          }
          if (!impl.consumed && !impl.Skip(raw)) break;
        }
        if (stopped && impl.error.kind == JsonError::Kind::kNone) {
          impl.error.kind = JsonError::Kind::kStopped;
        }
      }
      // Text after the top value makes the document bad JSON, whatever that value is.
      if (impl.error.kind == JsonError::Kind::kNone ||
          impl.error.kind == JsonError::Kind::kNotObject) {
        const char* at = nullptr;
        if (doc.current_location().get(at) == simdjson::SUCCESS) {
          impl.error.kind = JsonError::Kind::kTrailing;
          impl.error.offset = static_cast<size_t>(at - impl.base);
          impl.error.what = "unexpected text after the object";
        }
      }
      impl.doc = nullptr;
    }
  }
  if (text.size() > kKeptCapacity) {
    impl.parser = od::parser{};
    std::string().swap(impl.copy);
  }
  return impl.error;
}

namespace {
od::value& ValueOf(void* p) { return *static_cast<od::value*>(p); }
}  // namespace

bool JsonValue::Kind(JsonKind* out) {
  od::json_type type;
  if (const error_code e = ValueOf(value_).type().get(type); e != simdjson::SUCCESS) {
    reader_->impl_->consumed = true;
    return reader_->impl_->Fail(e);
  }
  switch (type) {
    case od::json_type::object:
      *out = JsonKind::kObject;
      break;
    case od::json_type::array:
      *out = JsonKind::kArray;
      break;
    case od::json_type::string:
      *out = JsonKind::kString;
      break;
    case od::json_type::number:
      *out = JsonKind::kNumber;
      break;
    case od::json_type::boolean:
      *out = JsonKind::kBool;
      break;
    case od::json_type::null:
      *out = JsonKind::kNull;
      break;
  }
  return true;
}

size_t JsonValue::offset() const {
  return static_cast<size_t>(ValueOf(value_).raw_json_token().data() - reader_->impl_->base);
}

bool JsonValue::String(std::string_view* out) {
  reader_->impl_->consumed = true;
  const error_code e = ValueOf(value_).get_string().get(*out);
  return e == simdjson::SUCCESS || reader_->impl_->Fail(e);
}

bool JsonValue::Number(JsonNumber* out) {
  reader_->impl_->consumed = true;
  od::json_type type;
  if (ValueOf(value_).type().get(type) != simdjson::SUCCESS || type != od::json_type::number) {
    return reader_->impl_->Fail("bad number");
  }
  return reader_->impl_->Number(ValueOf(value_), out);
}

bool JsonValue::Bool(bool* out) {
  reader_->impl_->consumed = true;
  const error_code e = ValueOf(value_).get_bool().get(*out);
  return e == simdjson::SUCCESS || reader_->impl_->Fail(e);
}

bool JsonValue::Skip() {
  reader_->impl_->consumed = true;
  return reader_->impl_->Skip(ValueOf(value_));
}

bool JsonValue::Raw(std::string_view* out) {
  JsonReader::Impl& impl = *reader_->impl_;
  const char* begin = ValueOf(value_).raw_json_token().data();
  if (!Skip()) return false;
  // The value ends before the next token (the parser stands on it), whitespace excluded.
  const char* end = nullptr;
  if (impl.doc->current_location().get(end) != simdjson::SUCCESS) {
    end = impl.base + impl.size;
  }
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n')) {
    --end;
  }
  *out = std::string_view(begin, static_cast<size_t>(end - begin));
  return true;
}

bool JsonValue::UnsignedArray(const JsonUintArrayRules& rules, std::vector<uint32_t>* out,
                              JsonUintArrayScan* scan) {
  reader_->impl_->consumed = true;
  JsonUintArrayRules r = rules;
  r.max = std::min<uint64_t>(r.max, std::numeric_limits<uint32_t>::max());
  return reader_->impl_->UnsignedArray(ValueOf(value_), r, out, scan);
}

bool JsonValue::UnsignedArray(const JsonUintArrayRules& rules, std::vector<uint64_t>* out,
                              JsonUintArrayScan* scan) {
  reader_->impl_->consumed = true;
  return reader_->impl_->UnsignedArray(ValueOf(value_), rules, out, scan);
}

bool JsonValue::ForEachElement(JsonElementVisitor& visitor) {
  JsonReader::Impl& impl = *reader_->impl_;
  impl.consumed = true;
  od::array array;
  if (const error_code e = ValueOf(value_).get_array().get(array); e != simdjson::SUCCESS) {
    return impl.Fail(e);
  }
  size_t index = 0;
  for (auto element_result : array) {
    od::value element;
    if (std::move(element_result).get(element) != simdjson::SUCCESS) {
      return impl.Fail("expected ',' or ']' in array");
    }
    JsonValue value(reader_, &element);
    impl.consumed = false;
    const bool go_on = visitor.Element(index++, value);
    if (!go_on) return false;
    if (!impl.consumed && !impl.Skip(element)) return false;
  }
  impl.consumed = true;
  return true;
}

}  // namespace kvindex
