// JsonValue (json_reader.h): the accessors a visitor reads one value with, over the reader's
// simdjson On-Demand value (json_reader_impl.h).
#include <cstdint>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "kvindex/json/json_reader.h"

#include "json_reader_impl.h"

namespace kvindex {

namespace od = simdjson::ondemand;
using simdjson::error_code;

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
  return reader_->impl_->OffsetOf(ValueOf(value_).raw_json_token().data());
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
  // A text spanning the cut array would not be the document's.
  if (impl.cut.active && begin <= impl.base + impl.cut.at && impl.base + impl.cut.at < end) {
    return impl.Refuse();
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
