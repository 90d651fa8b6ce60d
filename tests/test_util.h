// Helpers shared by the tests: locating test data and the shared reference folder.
#ifndef KVINDEX_TESTS_TEST_UTIL_H_
#define KVINDEX_TESTS_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace kvindex::test {

inline std::filesystem::path TestDataDir() { return KVINDEX_TEST_DATA_DIR; }

// True when running under CI (the CI variable is set): missing shared data is then a failure.
inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::string(ci) != "0" && std::string(ci) != "false";
}

// The shared reference folder (`../shared` beside the checkout), or empty when it is absent. Under
// CI its absence fails the calling test; otherwise the caller skips with a message.
inline std::filesystem::path SharedDir() {
  std::filesystem::path dir = KVINDEX_SHARED_DIR;
  if (const char* env = std::getenv("KVINDEX_SHARED_DIR")) dir = env;
  if (std::filesystem::is_directory(dir)) return dir;
  if (UnderCi()) FAIL("shared data folder missing under CI: " << dir.string());
  MESSAGE("skipping: shared data folder not found at " << dir.string());
  return {};
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace kvindex::test

#endif  // KVINDEX_TESTS_TEST_UTIL_H_
