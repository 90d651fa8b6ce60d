// Helpers shared by the tests: locating the checked-in test data and traces, scratch folders on the
// build's disk, and reading files. Every path is inside the checkout or the build tree, so a test
// never depends on anything beside the checkout.
// Thread safety: the functions are pure or touch only their own folder; a BuildTempDir belongs to
// one test.
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

// A fresh folder under the build tree (build/test-tmp/PREFIX-XXXXXX), removed with its contents
// when the object is destroyed. Unlike /tmp, which may be tmpfs, the build tree is on the disk the
// project is built on, so tests can watch the page cache drop a file's pages. Fails the calling
// test when the folder cannot be made.
struct BuildTempDir {
  std::filesystem::path path;
  explicit BuildTempDir(const std::string& prefix) {
    const std::filesystem::path base = std::filesystem::path(KVINDEX_BINARY_DIR) / "test-tmp";
    std::filesystem::create_directories(base);
    std::string pattern = (base / (prefix + "-XXXXXX")).string();
    REQUIRE_MESSAGE(::mkdtemp(pattern.data()) != nullptr,
                    "cannot create a folder in " << base.string());
    path = pattern;
  }
  ~BuildTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  BuildTempDir(const BuildTempDir&) = delete;
  BuildTempDir& operator=(const BuildTempDir&) = delete;
};

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
