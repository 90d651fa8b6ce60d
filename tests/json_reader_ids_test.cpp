// JsonValue::UnsignedArray, whose common arrays (plain non-negative integers) are read from the
// text while the rest go through simdjson's per-element path, against nlohmann_json's DOM as an
// independent reference: random arrays mixing plain ids of every width (1 to 21 digits), the
// look-alikes that must take the other path, and JSON whitespace, for both element types and
// both stopping rules; documents read in place whose buffer goes on past the text with more
// digits, which must not be read as part of the document; and documents read with a
// JsonArrayHint, which must give what the same document gives without one (the reference there
// is the reader's own unhinted path, the ids checked against nlohmann_json too); and long arrays
// over many 64-byte blocks, with structural faults, both ways.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/json/json_reader.h"

namespace kvindex {
namespace {

struct IdsVisitor final : JsonFieldVisitor {
  JsonUintArrayRules rules;
  bool narrow = false;  // read into uint32_t
  bool raw_other = false;  // read the other fields with Raw()
  std::vector<uint64_t> ids;
  std::vector<std::string> raws;
  JsonUintArrayScan scan;
  int restarts = 0;
  void Restart() override {
    ++restarts;
    ids.clear();
    raws.clear();
    scan = {};
  }
  bool Field(std::string_view key, JsonValue& value) override {
    if (key != "ids") {
      if (!raw_other) return value.Skip();
      std::string_view raw;
      if (!value.Raw(&raw)) return false;
      raws.emplace_back(raw);
      return true;
    }
    JsonKind kind;
    if (!value.Kind(&kind)) return false;
    if (kind != JsonKind::kArray) return value.Skip();
    ids.clear();
    if (!narrow) return value.UnsignedArray(rules, &ids, &scan);
    std::vector<uint32_t> small;
    const bool ok = value.UnsignedArray(rules, &small, &scan);
    ids.assign(small.begin(), small.end());
    return ok;
  }
};

// What the reference makes of the same document: nullopt when it is not JSON.
struct Expected {
  bool json = false;
  std::vector<uint64_t> ids;
  size_t count = 0;
  size_t first_bad = std::string_view::npos;
};

Expected Reference(const std::string& text, const JsonUintArrayRules& rules) {
  Expected e;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return e;
  e.json = true;
  for (const nlohmann::json& v : j["ids"]) {
    bool good = false;
    uint64_t n = 0;
    if (v.is_number_unsigned()) {
      n = v.get<uint64_t>();
      good = n <= rules.max;
    } else if (v.is_number_integer() && v.get<int64_t>() == 0 && rules.minus_zero_ok) {
      good = true;  // -0
    }
    if (good) {
      e.ids.push_back(n);
    } else if (e.first_bad == std::string_view::npos) {
      e.first_bad = e.count;
      if (rules.stop_at_bad) {
        ++e.count;
        return e;
      }
    }
    ++e.count;
  }
  return e;
}

std::string Element(std::mt19937_64& rng) {
  static const char* kOdd[] = {"-0",  "-1", "01",   "00", "1.0",  "1e2",  "\"7\"", "[1]",
                               "null", "0",  "-12", "1E3", "true", "{}",   "0.5"};
  if (rng() % 8 == 0) return kOdd[rng() % (sizeof(kOdd) / sizeof(kOdd[0]))];
  const int digits = 1 + static_cast<int>(rng() % 21);
  std::string s(1, static_cast<char>('1' + rng() % 9));
  while (static_cast<int>(s.size()) < digits) s += static_cast<char>('0' + rng() % 10);
  return s;
}

std::string Space(std::mt19937_64& rng) {
  static const char* kSpaces[] = {"", "", "", "", " ", "\n", "\t", "\r\n  "};
  return kSpaces[rng() % 8];
}

// Reads `text` with and without `hint` (ids up to hint.max) and checks both readings against the
// reference and each other; counts in *read the documents that are JSON.
void CheckBothWays(JsonReader& plain_reader, JsonReader& hinted_reader, const JsonArrayHint& hint,
                   const std::string& text, int* read) {
  IdsVisitor plain;
  IdsVisitor hinted;
  plain.rules.max = hinted.rules.max = hint.max;
  const JsonError want = plain_reader.ReadObject(text, text.size(), plain);
  const JsonError got = hinted_reader.ReadObject(text, hinted, hint);
  const Expected reference = Reference(text, plain.rules);
  INFO(text);
  REQUIRE((want.kind == JsonError::Kind::kNone) == reference.json);
  REQUIRE(got.kind == want.kind);
  CHECK(got.offset == want.offset);
  if (!reference.json) return;
  ++*read;
  CHECK(plain.ids == reference.ids);
  CHECK(hinted.ids == reference.ids);
  CHECK(plain.scan.count == reference.count);
  CHECK(plain.scan.first_bad == reference.first_bad);
  CHECK(hinted.scan.first_bad == reference.first_bad);
}

TEST_SUITE("json_reader_ids") {

TEST_CASE("Id arrays read as nlohmann_json reads them") {
  std::mt19937_64 rng(42);
  JsonReader reader;
  int plain = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string text = "{\"ids\":[" + Space(rng);
    const size_t n = rng() % 12;
    const bool odd_free = rng() % 2 == 0;  // half the arrays take only the text path
    for (size_t k = 0; k < n; ++k) {
      if (k > 0) text += Space(rng) + "," + Space(rng);
      std::string e = Element(rng);
      while (odd_free && (e[0] < '1' || e[0] > '9' || e.size() > 19)) e = Element(rng);
      text += e;
    }
    if (rng() % 40 == 0) text += ",";  // bad JSON
    text += Space(rng) + "]" + (rng() % 40 == 0 ? "" : "}");
    IdsVisitor v;
    v.narrow = rng() % 2 == 0;
    v.rules.max = v.narrow ? std::numeric_limits<uint32_t>::max()
                           : (rng() % 2 ? ~uint64_t{0} : uint64_t{999999999999});
    v.rules.minus_zero_ok = rng() % 2 == 0;
    v.rules.stop_at_bad = rng() % 2 == 0;
    const JsonError error = reader.ReadObject(text, text.size(), v);
    const Expected want = Reference(text, v.rules);
    INFO(text);
    // Stopping at a bad id leaves the rest of the array unread (the caller refuses the document
    // for that id anyway), so only a read to the end must have checked all of it.
    const bool stopped = v.rules.stop_at_bad && error.kind == JsonError::Kind::kNone &&
                         v.scan.first_bad != std::string_view::npos;
    if (!stopped) REQUIRE((error.kind == JsonError::Kind::kNone) == want.json);
    if (!want.json) continue;
    CHECK(v.ids == want.ids);
    CHECK(v.scan.count == want.count);
    CHECK(v.scan.first_bad == want.first_bad);
    plain += want.first_bad == std::string_view::npos;
  }
  CHECK(plain > 1000);  // arrays with no bad id: read from the text
}

TEST_CASE("A document read in place ends where its text ends, whatever follows in the buffer") {
  JsonReader reader;
  for (const std::string doc : {"{\"ids\":[12", "{\"ids\":[1,2", "{\"ids\":[1234567890",
                                "{\"ids\":[", "{\"ids\":[7]"}) {
    // The buffer goes on with digits and a valid end: none of it may be read as the document's.
    std::string buffer = doc + "345678]}" + std::string(kJsonPadding, '9');
    IdsVisitor v;
    const JsonError error =
        reader.ReadObject(std::string_view(buffer.data(), doc.size()), buffer.size(), v);
    INFO(doc);
    CHECK(error.kind == JsonError::Kind::kSyntax);
  }
  // The same text completed reads, in place, as it does copied.
  const std::string doc = "{\"ids\":[12, 345678,9]}";
  std::string buffer = doc + std::string(kJsonPadding, '7');
  IdsVisitor v;
  REQUIRE(reader.ReadObject(std::string_view(buffer.data(), doc.size()), buffer.size(), v).kind ==
          JsonError::Kind::kNone);
  CHECK(v.ids == std::vector<uint64_t>{12, 345678, 9});
}

TEST_CASE("A hinted array reads as the same document without the hint") {
  std::mt19937_64 rng(7);
  JsonReader hinted_reader;
  JsonReader plain_reader;
  JsonArrayHint hint;
  hint.key = "ids";
  static const char* kBefore[] = {"", "\"a\":1,", "\"x\":\"\\\"ids\",", "\"x\":{\"ids\":[5,6]},",
                                  "\"ids\":[9],", "\"s\":\"\\\"ids\\\":[1]\",", "\"ids\" : 3,"};
  static const char* kAfter[] = {"", ",\"b\":[1,2]", ",\"ids\":[4]", ",\"x\":\"ids\"", ",\"b\":tru",
                                 ",", "}", ",\"b\":\"\\u12\""};
  int cut = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string array = "[" + Space(rng);
    const size_t n = rng() % 12;
    for (size_t k = 0; k < n; ++k) {
      if (k > 0) array += Space(rng) + "," + Space(rng);
      std::string e = Element(rng);
      if (rng() % 2 == 0) {
        while (e[0] < '1' || e[0] > '9' || e.size() > 19) e = Element(rng);
      }
      array += e;
    }
    array += Space(rng) + "]";
    const std::string before = kBefore[rng() % (sizeof kBefore / sizeof kBefore[0])];
    const std::string after =
        rng() % 3 == 0 ? kAfter[rng() % (sizeof kAfter / sizeof kAfter[0])] : "";
    const std::string text = "{" + before + "\"ids\"" + Space(rng) + ":" + Space(rng) + array +
                             after + "}" + (rng() % 30 == 0 ? " x" : "");
    const bool narrow = rng() % 2 == 0;
    const bool raw_other = rng() % 3 == 0;
    hint.max = narrow ? std::numeric_limits<uint32_t>::max() : ~uint64_t{0};
    IdsVisitor plain;
    IdsVisitor hinted;
    // Now and then a visitor reading with another bound than the hint's: read again whole.
    const uint64_t max = rng() % 10 == 0 ? 999 : hint.max;
    for (IdsVisitor* v : {&plain, &hinted}) {
      v->narrow = narrow;
      v->raw_other = raw_other;
      v->rules.max = max;
    }
    const JsonError want = plain_reader.ReadObject(text, text.size(), plain);
    const JsonError got = hinted_reader.ReadObject(text, hinted, hint);
    INFO(text);
    REQUIRE(got.kind == want.kind);
    CHECK(got.offset == want.offset);
    CHECK(got.what == want.what);
    CHECK(hinted.ids == plain.ids);
    CHECK(hinted.scan.count == plain.scan.count);
    CHECK(hinted.scan.first_bad == plain.scan.first_bad);
    CHECK(hinted.raws == plain.raws);
    if (want.kind == JsonError::Kind::kNone && !raw_other) {
      const Expected reference = Reference(text, plain.rules);
      REQUIRE(reference.json);
      // The last "ids" wins in the reference's DOM; the visitor keeps the last one it read.
      CHECK(plain.ids == reference.ids);
    }
    cut += hinted.restarts == 0 && want.kind == JsonError::Kind::kNone;
  }
  CHECK(cut > 500);  // documents read with the array cut out
}

// Long arrays: simdjson's structural scan and the depth pre-count read 64-byte blocks and the id
// scan 8-byte words, so these put the '[', the ids, the runs of whitespace and the ']' at every
// offset of a block and across blocks, with one structural fault
// now and then (a ',' doubled, dropped, leading or trailing; a space or a sign inside the ids; a
// byte of another kind), each read plainly and with the array cut out (JsonArrayHint).
// Each wide-scan setting in turn (JsonWideIdScanAvailable: where the processor has no AVX-512
// VBMI2 both runs take the portable scan), on again afterwards.
template <typename F>
void WithEachIdScan(F&& check) {
  for (const bool wide : {true, false}) {
    CAPTURE(wide);
    SetJsonWideIdScan(wide);
    check();
  }
  SetJsonWideIdScan(true);
}

void CheckLongArrays() {
  std::mt19937_64 rng(99);
  JsonReader plain_reader;
  JsonReader hinted_reader;
  JsonArrayHint hint;
  hint.key = "ids";
  hint.max = ~uint64_t{0};
  int read = 0;
  int faults = 0;
  for (int i = 0; i < 3000; ++i) {
    const auto wide_space = [&] {
      if (rng() % 50 == 0) return std::string(1 + rng() % 130, " \n\t\r"[rng() % 4]);
      return Space(rng);
    };
    std::string array = "[" + (rng() % 4 == 0 ? wide_space() : std::string());
    const size_t n = rng() % 5 == 0 ? rng() % 4 : rng() % 400;
    const bool dumps = rng() % 3 == 0;  // mostly ", " between the ids, as json.dumps writes
    for (size_t k = 0; k < n; ++k) {
      if (k > 0 && dumps && rng() % 50 != 0) {
        array += ", ";
      } else if (k > 0) {
        array += (rng() % 3 == 0 ? wide_space() : "") + "," + (rng() % 3 == 0 ? wide_space() : "");
      }
      const int digits = rng() % 200 == 0 ? 20 : 1 + static_cast<int>(rng() % (rng() % 2 ? 6 : 19));
      std::string e(1, static_cast<char>((digits == 1 ? '0' : '1') + rng() % (digits == 1 ? 10 : 9)));
      while (static_cast<int>(e.size()) < digits) e += static_cast<char>('0' + rng() % 10);
      array += e;
    }
    array += (rng() % 4 == 0 ? wide_space() : "") + "]";
    if (rng() % 4 == 0 && array.size() > 2) {  // one fault somewhere in the array
      ++faults;
      const size_t at = 1 + rng() % (array.size() - 2);
      static const char* kFault[] = {",", "", " ", "-", ".", "e", "x", "0", ",,", "]", "["};
      const std::string f = kFault[rng() % (sizeof kFault / sizeof kFault[0])];
      if (f.empty()) {
        array.erase(at, 1);
      } else {
        array.insert(at, f);
      }
    }
    const std::string text = "{\"m\":\"" + std::string(rng() % 64, 'a') + "\",\"ids\":" + array +
                             (rng() % 2 ? ",\"z\":1}" : "}");
    CheckBothWays(plain_reader, hinted_reader, hint, text, &read);
  }
  CHECK(read > 2000);
  CHECK(faults > 500);
}

TEST_CASE("Long id arrays read as nlohmann_json reads them, with and without the hint") {
  WithEachIdScan(CheckLongArrays);
}

// Long arrays are read in four stretches that end at the first ',' after each quarter of the text
// up to the first ']': every fault placed at and around those commas, ids above `max` in each
// stretch, and a first ']' that is not the array's end, against the same reference both ways.
// `separator` goes between the ids: "," or ", " (Python's json.dumps), which the scan reads by
// two paths.
void CheckFaultsAroundStretches(const std::string& separator, int* cases, int* read) {
  JsonReader plain_reader;
  JsonReader hinted_reader;
  JsonArrayHint hint;
  hint.key = "ids";
  std::mt19937_64 rng(7);
  std::string array = "[";
  for (int k = 0; k < 300; ++k) {
    if (k > 0) array += k % 37 == 0 ? " ,\n" : separator;
    array += std::to_string(1 + rng() % 151935);
  }
  array += "]";
  const size_t body = array.size() - 1;  // '[' up to the ']'
  static const char* kFault[] = {",",   " ",  "-",      ".",          "x",  "0",
                                 ",,",  "]",  "[",      "\"]\"",      "\n", ",\t",
                                 "99999999"};
  for (size_t quarter = 1; quarter < 4; ++quarter) {
    const size_t mid = 1 + (body - 1) * quarter / 4;
    for (size_t at = mid - 10; at <= mid + 10; ++at) {
      for (const char* fault : kFault) {
        for (const uint64_t max : {~uint64_t{0}, uint64_t{99999}}) {
          std::string faulty = array;
          faulty.insert(at, fault);
          for (const bool tail_bracket : {false, true}) {
            const std::string text = "{\"ids\":" + faulty +
                                     (tail_bracket ? ",\"z\":\"]]\"}" : "}");
            hint.max = max;
            ++*cases;
            CheckBothWays(plain_reader, hinted_reader, hint, text, read);
          }
        }
      }
    }
  }
}

TEST_CASE("Long id arrays with a fault at every byte around the stretch boundaries") {
  WithEachIdScan([] {
    for (const std::string separator : {",", ", "}) {
      CAPTURE(separator);
      int cases = 0;
      int read = 0;
      CheckFaultsAroundStretches(separator, &cases, &read);
      CHECK(cases == 3 * 21 * 13 * 2 * 2);
      CHECK(read > 300);
    }
  });
}

// The wide scan reads 64-byte blocks, each from where the last element it read ended: one fault
// at every byte of an array of ids of 1 to 8 digits, with "," and with ", " between them, and of
// one with an id of 10 digits (beyond the wide scan, which then hands the array on), against the
// same reference both ways.
TEST_CASE("Id arrays with a fault at every byte, read 64 bytes at a time") {
  WithEachIdScan([] {
    JsonReader plain_reader;
    JsonReader hinted_reader;
    JsonArrayHint hint;
    hint.key = "ids";
    static const char* kFault[] = {",", " ", "-", ".", "x", "0", ",,", "]", "\n\t", "123456789"};
    struct Shape {
      const char* separator;
      bool ten_digits;  // the 51st id has 10 digits
    };
    for (const Shape shape : {Shape{",", false}, Shape{", ", false}, Shape{",", true}}) {
      CAPTURE(shape.separator);
      CAPTURE(shape.ten_digits);
      std::mt19937_64 rng(11);
      std::string array = "[";
      for (int k = 0; k < 100; ++k) {
        if (k > 0) array += shape.separator;
        const int digits = k == 50 && shape.ten_digits ? 10 : 1 + static_cast<int>(rng() % 8);
        array += std::to_string(1 + rng() % 9) + std::string(static_cast<size_t>(digits - 1), '7');
      }
      array += "]";
      int read = 0;
      for (size_t at = 1; at < array.size(); ++at) {
        for (const char* fault : kFault) {
          std::string faulty = array;
          faulty.insert(at, fault);
          hint.max = at % 2 == 0 ? ~uint64_t{0} : uint64_t{4294967295};
          CheckBothWays(plain_reader, hinted_reader, hint, "{\"ids\":" + faulty + "}", &read);
        }
      }
      CHECK(read > 500);
    }
  });
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
