// Helpers shared by the tests: locating the checked-in test data and traces, and reading files.
// Every path is inside the checkout, so a test never depends on anything beside it.
// Thread safety: the functions only read; any thread may call them.
#ifndef KVINDEX_TESTS_TEST_UTIL_H_
#define KVINDEX_TESTS_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace kvindex::test {

// tests/data/ of the checkout: oracle vectors, helper scripts, and the golden captures of real
// publishers (golden/).
inline std::filesystem::path TestDataDir() { return KVINDEX_TEST_DATA_DIR; }

// traces/ of the checkout: the generated sample and the public Mooncake traces (mooncake/).
inline std::filesystem::path TracesDir() {
  return std::filesystem::path(KVINDEX_SOURCE_DIR) / "traces";
}

// The whole content of `path`; fails the calling test when it cannot be opened.
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_TEST_UTIL_H_
