// JsonReader's state (json_reader.cpp) and the accessors of JsonValue over it (json_value.cpp):
// one simdjson On-Demand parser and document, the padded copy of the text, the first error and
// the array cut out of the copy (JsonArrayHint). Private to the json layer.
#ifndef KVINDEX_SRC_JSON_JSON_READER_IMPL_H_
#define KVINDEX_SRC_JSON_JSON_READER_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "kvindex/json/json_reader.h"

namespace kvindex {

namespace json_detail {
// What a simdjson error means, in the words of the reader's messages.
std::string_view WhatOf(simdjson::error_code e);
}  // namespace json_detail

struct JsonReader::Impl {
  simdjson::ondemand::parser parser;
  std::string copy;
  const char* base = nullptr;
  size_t size = 0;
  simdjson::ondemand::document* doc = nullptr;
  JsonError error;
  bool consumed = false;  // whether the current field's value was read
  bool literal_root = false;  // a literal root, checked to its end by RootLiteral()
  // The hinted array cut out of `copy` (JsonArrayHint): its '[' stays at `at`, the `removed`
  // bytes after it are gone up to its ']'; `ids` are its elements, read from the text.
  struct Cut {
    bool active = false;
    bool refused = false;  // the document has to be read again whole
    size_t at = 0;
    size_t removed = 0;
    uint64_t max = 0;
  } cut;
  std::vector<uint64_t> cut_ids;

  // The offset in the document as it stands of a byte of the text the parser reads.
  size_t OffsetOf(const char* p) const {
    const auto offset = static_cast<size_t>(p - base);
    return cut.active && offset > cut.at ? offset + cut.removed : offset;
  }
  // Records the first syntax error; the offset is where the parser stands.
  bool Fail(std::string_view what) {
    if (error.kind == JsonError::Kind::kNone) {
      error.kind = JsonError::Kind::kSyntax;
      error.what = what;
      const char* at = nullptr;
      if (doc != nullptr && doc->current_location().get(at) == simdjson::SUCCESS) {
        error.offset = OffsetOf(at);
      }
    }
    return false;
  }
  // The cut does not fit this document: it is read again whole.
  bool Refuse() {
    cut.refused = true;
    return Fail("read again");
  }
  bool Fail(simdjson::error_code e) { return Fail(json_detail::WhatOf(e)); }

  bool Skip(simdjson::ondemand::value& v);
  bool Number(simdjson::ondemand::value& v, JsonNumber* out);
  template <typename T>
  bool UnsignedArray(simdjson::ondemand::value& v, const JsonUintArrayRules& rules, std::vector<T>* out,
                     JsonUintArrayScan* scan);
  bool ValidateRoot();
  bool RootLiteral(std::initializer_list<std::string_view> literals);
  bool CutArray(std::string_view text, const JsonArrayHint& hint);
  void Read(JsonReader* reader, simdjson::padded_string_view view, JsonFieldVisitor& visitor);
  void Release(size_t text_size);
};

}  // namespace kvindex

#endif  // KVINDEX_SRC_JSON_JSON_READER_IMPL_H_
