// Fuzz target for the reader of `publish-fake --trace FILE` (TracePrompts::Load: Mooncake-style
// JSON lines whose `hash_ids` become the prompts a fake engine serves). The reader takes a path,
// so each input is written to one temporary file first. Properties (a violation aborts):
//  - any bytes give prompts or an error, never a crash or an escaping exception;
//  - an error is kMalformed, one line, naming the file ("PATH: ...");
//  - an accepted trace has one request per non-blank line (counted here, independently), dealt
//    round-robin to the sources: Next() over every source returns exactly requests() prompts,
//    each a whole number of blocks, and first() is the first request's prompt.
//
// Corpus (tests/fuzz/corpus/fake_trace/): the first lines of the public Mooncake traces used by
// the request_trace corpus and hand-made lines (huge ids, empty lists, wrong types, blank lines).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "fake/fake_workload.h"
#include "fuzz_check.h"

namespace {

constexpr uint32_t kBlockSize = 4;
constexpr size_t kSources = 3;

std::string_view g_input;

void Fail(std::string_view what, std::string_view detail) {
  kvindex::fuzz::Violation("fake_trace_fuzz", what, detail, g_input);
}

const std::string& TracePath() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("kvindex_fake_trace_fuzz." + std::to_string(getpid()) + ".jsonl"))
                              .string();
    std::atexit([] { std::remove(TracePath().c_str()); });
    return p;
  }();
  return path;
}

size_t NonBlankLines(std::string_view text) {
  size_t lines = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    if (text.substr(begin, end - begin).find_first_not_of(" \t\r") != std::string_view::npos) {
      ++lines;
    }
    begin = end + 1;
  }
  return lines;
}

void Check() {
  const std::string& path = TracePath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(g_input.data(), static_cast<std::streamsize>(g_input.size()));
    if (!out) Fail("cannot write the temporary trace", path);
  }
  auto trace = kvindex::cli::TracePrompts::Load(path, kBlockSize, kSources);
  if (!trace.ok()) {
    if (trace.status().code() != kvindex::StatusCode::kMalformed) {
      Fail("unexpected error code", trace.status().ToString());
    }
    const std::string message = trace.status().message();
    if (!kvindex::fuzz::IsOneLine(message) || message.rfind(path + ": ", 0) != 0) {
      Fail("error is not one line naming the file", message);
    }
    return;
  }
  if (trace->requests() != NonBlankLines(g_input)) {
    Fail("requests() is not the number of non-blank lines", std::to_string(trace->requests()));
  }
  size_t served = 0;
  bool first = true;
  for (size_t source = 0; source < kSources; ++source) {
    while (auto prompt = trace->Next(source)) {
      if (prompt->size() % kBlockSize != 0) Fail("a prompt that is not whole blocks", "");
      if (first && *prompt != trace->first()) Fail("first() is not the first prompt", "");
      first = false;
      ++served;
    }
  }
  if (served != trace->requests()) Fail("Next() did not serve every request once", "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_input = std::string_view(reinterpret_cast<const char*>(data), size);
  try {
    Check();
  } catch (const std::exception& e) {
    Fail("exception", e.what());
  }
  return 0;
}
