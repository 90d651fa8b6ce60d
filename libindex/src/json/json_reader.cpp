// JsonReader over simdjson On-Demand, through its error-code API only (nothing here throws).
// On-Demand parses lazily: a value is checked when it is read, and a value the caller does not
// read is skipped without being checked. So every value is read here: a visitor's unread value is
// skipped with Skip(), which walks it completely.
#include "kvindex/json/json_reader.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <simdjson.h>

#include "kvindex/core/json_depth.h"
#include "json_reader_impl.h"
#include "plain_uint_array.h"

namespace kvindex {

namespace od = simdjson::ondemand;
using json_detail::ScanPlainUintArray;
using simdjson::error_code;

static_assert(kJsonPadding == simdjson::SIMDJSON_PADDING);

namespace {

// Parser buffers above this are released after the document (a huge body does not keep them).
constexpr size_t kKeptCapacity = size_t{1} << 20;

}  // namespace

namespace json_detail {

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

}  // namespace json_detail


// Copies `text` (padded) and cuts the hinted array out of the copy.
bool JsonReader::Impl::CutArray(std::string_view text, const JsonArrayHint& hint) {
  cut = Cut{};
  copy.assign(text);
  copy.resize(text.size() + simdjson::SIMDJSON_PADDING, '\0');
  cut_ids.clear();
  if (!json_detail::CutPlainUintArray(copy, text.size(), hint.key, hint.max, cut_ids, &cut.at,
                                      &cut.removed)) {
    return false;
  }
  cut.active = true;
  cut.max = hint.max;
  return true;
}

namespace {
// simdjson refuses a number whose exponent is beyond its range even when the value is not (0e999
// is 0; 1e-999 underflows to 0). nlohmann_json, whose reading the bodies have always had, takes
// such a number through strtod and refuses only an overflow: read the same way here. `token` is
// the raw token (it may run on past the number). Returns the characters read, 0 when refused.
size_t StrtodFinite(std::string_view token, double& out) {
  // RFC 8259's number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
  size_t end = 0;
  const auto digits = [&] {
    const size_t from = end;
    while (end < token.size() && std::isdigit(static_cast<unsigned char>(token[end]))) ++end;
    return end - from;
  };
  if (end < token.size() && token[end] == '-') ++end;
  if (end < token.size() && token[end] == '0') {
    ++end;
  } else if (digits() == 0) {
    return 0;
  }
  if (end < token.size() && token[end] == '.') {
    ++end;
    if (digits() == 0) return 0;
  }
  if (end < token.size() && (token[end] == 'e' || token[end] == 'E')) {
    ++end;
    if (end < token.size() && (token[end] == '+' || token[end] == '-')) ++end;
    if (digits() == 0) return 0;
  }
  const std::string copy(token.substr(0, end));
  char* stop = nullptr;
  out = std::strtod(copy.c_str(), &stop);
  return end > 0 && stop == copy.c_str() + end && std::isfinite(out) ? end : 0;
}

// StrtodFinite() on a value's raw token: the number must be the whole token (what follows it is
// whitespace or a delimiter).
bool WholeNumber(std::string_view token, double& out) {
  const size_t n = StrtodFinite(token, out);
  if (n == 0) return false;
  if (n == token.size()) return true;
  const char c = token[n];
  return c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
}  // namespace

bool JsonReader::Impl::Number(od::value& v, JsonNumber* out) {
  const std::string_view token = v.raw_json_token();
  od::number n;
  if (const error_code e = v.get_number().get(n); e != simdjson::SUCCESS) {
    // An integer beyond 64 bits is still a number (a float, as nlohmann reads it).
    if (e != simdjson::NUMBER_ERROR || (v.get_double().get(out->d) != simdjson::SUCCESS &&
                                        !WholeNumber(token, out->d))) {
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
  if (cut.active && open == base + cut.at) {  // read before the parser ran: step over "[]"
    if (rules.max != cut.max) return Refuse();
    od::array skipped;
    std::string_view text;
    if (const error_code e = v.get_array().get(skipped); e != simdjson::SUCCESS) return Fail(e);
    if (const error_code e = skipped.raw_json().get(text); e != simdjson::SUCCESS) return Fail(e);
    ids.insert(ids.end(), cut_ids.begin(), cut_ids.end());
    *scan = JsonUintArrayScan{};
    scan->count = cut_ids.size();
    return true;
  }
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
    const size_t at = OffsetOf(token.data());
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
// The two element types JsonValue::UnsignedArray() reads (json_value.cpp).
template bool JsonReader::Impl::UnsignedArray<uint32_t>(od::value&, const JsonUintArrayRules&,
                                                        std::vector<uint32_t>*, JsonUintArrayScan*);
template bool JsonReader::Impl::UnsignedArray<uint64_t>(od::value&, const JsonUintArrayRules&,
                                                        std::vector<uint64_t>*, JsonUintArrayScan*);

// A root literal is judged from the text (simdjson takes "false4", refuses "false  ").
bool JsonReader::Impl::RootLiteral(std::initializer_list<std::string_view> literals) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::string_view text(base, size);
  const size_t i = text.find_first_not_of(kSpace);
  for (const std::string_view literal : literals) {
    if (i == std::string_view::npos || text.substr(i, literal.size()) != literal) continue;
    literal_root = true;
    const size_t after = text.find_first_not_of(kSpace, i + literal.size());
    if (after == std::string_view::npos) return true;
    error = JsonError{JsonError::Kind::kTrailing, OffsetOf(base + after), "text after the value"};
    return false;
  }
  return Fail("bad literal");
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
      if (e == simdjson::NUMBER_ERROR) {
        // Read as nlohmann reads it; the document did not move past it, so the end is checked
        // here as for a literal.
        constexpr std::string_view kSpace = " \t\r\n";
        const std::string_view text(base, size);
        const size_t i = text.find_first_not_of(kSpace);
        const size_t n = i == std::string_view::npos ? 0 : StrtodFinite(text.substr(i), d);
        if (n == 0) return Fail(e);
        literal_root = true;
        const size_t after = text.find_first_not_of(kSpace, i + n);
        if (after == std::string_view::npos) return true;
        error = JsonError{JsonError::Kind::kTrailing, OffsetOf(base + after), "text after the value"};
        return false;
      }
      break;
    }
    case od::json_type::boolean:
      return RootLiteral({"true", "false"});
    case od::json_type::null:
      return RootLiteral({"null"});
    default:
      return Fail("bad value");
  }
  return e == simdjson::SUCCESS || Fail(e);
}

JsonReader::JsonReader() : impl_(std::make_unique<Impl>()) {}
JsonReader::~JsonReader() = default;

// Reads the document `view` (the text itself or `copy`) with `visitor` into `error`.
void JsonReader::Impl::Read(JsonReader* reader, simdjson::padded_string_view view,
                            JsonFieldVisitor& visitor) {
  Impl& impl = *this;
  impl.error = JsonError{};
  impl.literal_root = false;
  impl.base = view.data();
  impl.size = view.size();
  {
    od::document document;
    if (const error_code e = impl.parser.iterate(view).get(document); e != simdjson::SUCCESS) {
      impl.doc = nullptr;
      impl.Fail(e);
    } else {
      impl.doc = &document;
      od::object object;
      od::value root;
      od::json_type type;
      if (const error_code te = document.type().get(type); te != simdjson::SUCCESS) {
        impl.Fail(te);
      } else if (type != od::json_type::object) {
        if (impl.ValidateRoot()) impl.error.kind = JsonError::Kind::kNotObject;
      } else if (const error_code oe = document.get_value().get(root) != simdjson::SUCCESS
                                           ? document.get_value().error()
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
          JsonValue value(reader, &raw);
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
      if (!impl.literal_root && (impl.error.kind == JsonError::Kind::kNone ||
                                 impl.error.kind == JsonError::Kind::kNotObject)) {
        const char* at = nullptr;
        if (document.current_location().get(at) == simdjson::SUCCESS) {
          impl.error.kind = JsonError::Kind::kTrailing;
          impl.error.offset = impl.OffsetOf(at);
          impl.error.what = "unexpected text after the object";
        }
      }
      impl.doc = nullptr;
    }
  }
}

// After a document: buffers grown by a huge one are released.
void JsonReader::Impl::Release(size_t text_size) {
  if (text_size > kKeptCapacity) {
    parser = od::parser{};
    std::string().swap(copy);
  }
}

JsonError JsonReader::ReadObject(std::string_view text, size_t readable,
                                 JsonFieldVisitor& visitor) {
  Impl& impl = *impl_;
  impl.cut = Impl::Cut{};
  simdjson::padded_string_view view;
  if (readable >= text.size() + simdjson::SIMDJSON_PADDING) {
    view = simdjson::padded_string_view(text.data(), text.size(), readable);
  } else {
    // The padding is zeroed: the id scan reads words that reach into it.
    impl.copy.assign(text);
    impl.copy.resize(text.size() + simdjson::SIMDJSON_PADDING, '\0');
    view = simdjson::padded_string_view(impl.copy.data(), text.size(), impl.copy.size());
  }
  impl.Read(this, view, visitor);
  impl.Release(text.size());
  return impl.error;
}

JsonError JsonReader::ReadObject(std::string_view text, JsonFieldVisitor& visitor,
                                 const JsonArrayHint& hint) {
  Impl& impl = *impl_;
  const bool cut = impl.CutArray(text, hint);
  // Without a cut the copy is the document as it stands.
  const size_t size = text.size() - impl.cut.removed;
  impl.Read(this, simdjson::padded_string_view(impl.copy.data(), size, impl.copy.size()), visitor);
  if (cut && (impl.error.kind != JsonError::Kind::kNone || impl.cut.refused)) {
    // Any problem is told of the document as it stands: read again, whole.
    visitor.Restart();
    return ReadObject(text, 0, visitor);
  }
  impl.Release(text.size());
  return impl.error;
}

}  // namespace kvindex
