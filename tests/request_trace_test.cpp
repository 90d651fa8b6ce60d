// The request trace reader (docs/trace_format.md): both formats, auto-detection, bad lines with
// their line numbers, --skip-bad, ordering, and the real public traces.
#include "kvindex/files/request_trace.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "test_util.h"

namespace kvindex {
namespace {

Result<Trace> Read(std::string_view text, TraceReaderOptions options = {}) {
  return ReadTraceBuffer("t.jsonl", text, options);
}

std::filesystem::path TempFile(const std::string& name, const std::string& contents) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kvindex_request_trace_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

}  // namespace

TEST_SUITE("request_trace") {
  TEST_CASE("A Mooncake line is read with its fields, in milliseconds") {
    auto trace = Read(R"({"timestamp": 27482, "input_length": 6758, "output_length": 500, )"
                      R"("hash_ids": [0, 1, 2, 18446744073709551615]})"
                      "\n");
    REQUIRE(trace.ok());
    CHECK(trace->format == TraceFormat::kMooncake);
    REQUIRE(trace->requests.size() == 1);
    const TraceRequest& r = trace->requests[0];
    CHECK(r.timestamp_ms == 27482.0);
    CHECK(r.input_length == 6758);
    CHECK(r.output_length == 500);
    CHECK(r.hash_ids == std::vector<uint64_t>{0, 1, 2, 18446744073709551615ull});
    CHECK_FALSE(r.chat_id.has_value());
    CHECK(r.line == 1);
    CHECK(DefaultBlockTokens(trace->format) == 512);
  }

  TEST_CASE("A Bailian line is detected by chat_id, with seconds turned into milliseconds") {
    auto trace = Read(R"({"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, )"
                      R"("input_length": 521, "output_length": 132, "type": "text", "turn": 1, )"
                      R"("hash_ids": [1089, 1090, 1091]})");
    REQUIRE(trace.ok());
    CHECK(trace->format == TraceFormat::kBailian);
    const TraceRequest& r = trace->requests.at(0);
    CHECK(r.timestamp_ms == doctest::Approx(61114.0));
    CHECK(r.chat_id == 159);
    CHECK(r.parent_chat_id == -1);
    CHECK(r.type == "text");
    CHECK(r.turn == 1);
    CHECK(r.hash_ids.size() == 3);
    CHECK(DefaultBlockTokens(trace->format) == 16);
  }

  TEST_CASE("Unknown keys of any shape are skipped; blank lines are ignored") {
    auto trace = Read("\n  \n"
                      R"({"x": {"a": [1, {"b": null}], "c": "\u00e9\"\\"}, "timestamp": 1.5e3, )"
                      R"("input_length": 0, "output_length": 0, "hash_ids": [], "y": true})"
                      "\r\n\n");
    REQUIRE(trace.ok());
    REQUIRE(trace->requests.size() == 1);
    CHECK(trace->requests[0].timestamp_ms == 1500.0);
    CHECK(trace->requests[0].line == 3);
  }

  TEST_CASE("A bad line fails with the file name and its line number") {
    const std::string text =
        R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
        "\n"
        R"({"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
        "\n"
        R"({"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]})"
        "\n";
    auto trace = Read(text);
    REQUIRE_FALSE(trace.ok());
    CHECK(trace.status().code() == StatusCode::kMalformed);
    CHECK(trace.status().message() ==
          "t.jsonl: line 3: column 73: hash_ids: expected a non-negative integer");
  }

  TEST_CASE("Each kind of bad line is rejected with a one-line reason") {
    const char* cases[][2] = {
        {"[1, 2]", "expected '{'"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1})", "missing key 'hash_ids'"},
        {R"({"input_length": 1, "output_length": 1, "hash_ids": []})", "missing key 'timestamp'"},
        {R"({"timestamp": 0, "input_length": 1.5, "output_length": 1, "hash_ids": []})",
         "input_length: expected a non-negative integer"},
        {R"({"timestamp": "0", "input_length": 1, "output_length": 1, "hash_ids": []})",
         "timestamp: expected a number"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 7})",
         "hash_ids: expected an array"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1,]})",
         "hash_ids: expected a non-negative integer"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]} x)",
         "unexpected text after the object"},
        {R"({"timestamp": 1e999, "input_length": 1, "output_length": 1, "hash_ids": [1]})",
         "number out of range"},
        {R"({"timestamp": 0, "input_length": 99999999999999999999, "output_length": 1, "hash_ids": []})",
         "integer out of range"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [01]})",
         "expected a non-negative integer"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1])",
         "expected ',' or '}'"},
        {R"({"a": "unterminated)", "unterminated string"},
    };
    for (const auto& c : cases) {
      CAPTURE(c[0]);
      auto trace = Read(c[0]);
      REQUIRE_FALSE(trace.ok());
      CHECK(trace.status().code() == StatusCode::kMalformed);
      CHECK(trace.status().message().find("t.jsonl: line 1: ") == 0);
      CHECK(trace.status().message().find(c[1]) != std::string::npos);
    }
  }

  TEST_CASE("Whole-line JSON rules: duplicates, raw type text, UTF-8, depth, 64-bit ids") {
    // The last of duplicate keys wins; a non-string type keeps its text as written.
    auto dup = Read(R"({"timestamp": 1, "timestamp": 7, "input_length": 1, "output_length": 1, )"
                    R"("hash_ids": [9], "hash_ids": [1, 2], "type": {"a" : [1, 2] } })");
    REQUIRE(dup.ok());
    CHECK(dup->requests[0].timestamp_ms == 7.0);
    CHECK(dup->requests[0].hash_ids == std::vector<uint64_t>{1, 2});
    CHECK(dup->requests[0].type == R"({"a" : [1, 2] })");
    const char* cases[][2] = {
        // A byte that is not UTF-8, inside a skipped value: the line is not JSON.
        {"{\"x\": \"\xff\", \"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1]}",
         "invalid UTF-8"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551616]})",
         "column 70: hash_ids: integer out of range"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-0]})",
         "column 70: hash_ids: expected a non-negative integer"},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "x": [1, 2)",
         "t.jsonl: line 1: column "},
        {R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "x": tru})",
         "bad literal"},
    };
    for (const auto& c : cases) {
      CAPTURE(c[0]);
      auto trace = Read(c[0]);
      REQUIRE_FALSE(trace.ok());
      CHECK(trace.status().message().find(c[1]) != std::string::npos);
    }
    // Nested 65 levels in an unknown key: refused before parsing, at the opening bracket.
    const std::string deep = R"({"x": )" + std::string(65, '[') + std::string(65, ']') +
                             R"(, "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []})";
    auto too_deep = Read(deep);
    REQUIRE_FALSE(too_deep.ok());
    CHECK(too_deep.status().message() == "t.jsonl: line 1: column 70: nesting too deep");
    // 64 levels are fine.
    const std::string ok64 = R"({"x": )" + std::string(63, '[') + std::string(63, ']') +
                             R"(, "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []})";
    CHECK(Read(ok64).ok());
  }

  TEST_CASE("Lines read in place and copied give the same requests") {
    // In a buffer, every line but the last is followed by 64 bytes or more (read in place); the
    // short last lines are copied first. Both ways must read the same values.
    std::string text;
    for (int i = 0; i < 50; ++i) {
      text += R"({"timestamp": )" + std::to_string(i) + R"(, "input_length": 5, "output_length": 1, )"
              R"("hash_ids": [)" + std::to_string(1000 + i) + "]}\n";
    }
    auto trace = Read(text);
    REQUIRE(trace.ok());
    REQUIRE(trace->requests.size() == 50);
    for (int i = 0; i < 50; ++i) {
      CHECK(trace->requests[i].hash_ids == std::vector<uint64_t>{uint64_t(1000 + i)});
      CHECK(trace->requests[i].timestamp_ms == double(i));
    }
  }

  TEST_CASE("Formats cannot be mixed in one file") {
    auto trace = Read(
        R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
        "\n"
        R"({"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})");
    REQUIRE_FALSE(trace.ok());
    CHECK(trace.status().message() ==
          "t.jsonl: line 2: a bailian record in a mooncake trace (formats cannot be mixed)");
  }

  TEST_CASE("skip_bad skips and counts bad lines, keeping the first error") {
    TraceReaderOptions options;
    options.skip_bad = true;
    auto trace = Read("garbage\n"
                      R"({"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
                      "\n{\n",
                      options);
    REQUIRE(trace.ok());
    CHECK(trace->requests.size() == 1);
    CHECK(trace->requests[0].line == 2);
    CHECK(trace->skipped_lines == 2);
    CHECK(trace->first_skip_error.find("t.jsonl: line 1: ") == 0);
  }

  TEST_CASE("Requests come out stable-sorted by timestamp; max_requests cuts in file order") {
    const std::string text =
        R"({"timestamp": 30, "input_length": 1, "output_length": 1, "hash_ids": [1]})" "\n"
        R"({"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [2]})" "\n"
        R"({"timestamp": 30, "input_length": 1, "output_length": 1, "hash_ids": [3]})" "\n"
        R"({"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [4]})" "\n"
        R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [5]})" "\n";
    auto all = Read(text);
    REQUIRE(all.ok());
    std::vector<uint64_t> order;
    for (const auto& r : all->requests) order.push_back(r.hash_ids[0]);
    CHECK(order == std::vector<uint64_t>{5, 2, 4, 1, 3});
    TraceReaderOptions options;
    options.max_requests = 3;
    auto head = Read(text, options);
    REQUIRE(head.ok());
    order.clear();
    for (const auto& r : head->requests) order.push_back(r.hash_ids[0]);
    CHECK(order == std::vector<uint64_t>{2, 1, 3});
  }

  TEST_CASE("A file is read in chunks: lines crossing chunk boundaries are whole") {
    // 30,000 lines of ~80 bytes = ~2.4 MB, more than two 1 MiB read chunks.
    std::string text;
    for (int i = 0; i < 30000; ++i) {
      text += R"({"timestamp": )" + std::to_string(i) +
              R"(, "input_length": 1024, "output_length": 7, "hash_ids": [)" +
              std::to_string(i) + ", " + std::to_string(i + 1) + "]}\n";
    }
    text += R"({"timestamp": 30000, "input_length": 1, "output_length": 1, "hash_ids": [9]})";
    const auto path = TempFile("chunks.jsonl", text);
    auto trace = ReadTrace(path.string());
    std::filesystem::remove(path);
    REQUIRE(trace.ok());
    REQUIRE(trace->requests.size() == 30001);
    for (int i = 0; i < 30000; ++i) {
      REQUIRE(trace->requests[i].hash_ids == std::vector<uint64_t>{uint64_t(i), uint64_t(i + 1)});
    }
    CHECK(trace->requests.back().line == 30001);
  }

  TEST_CASE("A missing file is kNotFound naming the path") {
    auto trace = ReadTrace("/nonexistent/kvindex/trace.jsonl");
    REQUIRE_FALSE(trace.ok());
    CHECK(trace.status().code() == StatusCode::kNotFound);
    CHECK(trace.status().message().find("/nonexistent/kvindex/trace.jsonl") == 0);
  }

  // docs/trace_format.md
  TEST_CASE("The public Mooncake traces read completely") {
    const auto traces = test::TracesDir() / "mooncake";
    struct Expect {
      const char* name;
      size_t requests;
      size_t blocks;
    };
    for (const Expect& e : {Expect{"conversation_trace.jsonl", 12031, 288500},
                            Expect{"synthetic_trace.jsonl", 3993, 121877}}) {
      CAPTURE(e.name);
      auto trace = ReadTrace((traces / e.name).string());
      REQUIRE(trace.ok());
      CHECK(trace->format == TraceFormat::kMooncake);
      CHECK(trace->requests.size() == e.requests);
      size_t blocks = 0;
      for (size_t i = 0; i < trace->requests.size(); ++i) {
        const TraceRequest& r = trace->requests[i];
        blocks += r.hash_ids.size();
        // len(hash_ids) == ceil(input_length / 512) for every request: 512 tokens per hash id in a
        // Mooncake trace (docs/trace_format.md).
        CHECK(r.hash_ids.size() == (r.input_length + 511) / 512);
        if (i > 0) CHECK(trace->requests[i - 1].timestamp_ms <= r.timestamp_ms);
      }
      CHECK(blocks == e.blocks);
    }
  }
}

}  // namespace kvindex
