// Helpers shared by the capture tests (capture_test.cpp, capture_writer_test.cpp): a temporary
// directory, byte strings, and writers/readers of numbered message records.
#ifndef KVINDEX_TESTS_CAPTURE_TEST_UTIL_H_
#define KVINDEX_TESTS_CAPTURE_TEST_UTIL_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <chrono>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/files/capture.h"
#include "test_util.h"

namespace kvindex::capture_test {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

inline Bytes B(std::string_view s) {
  return Bytes(reinterpret_cast<const std::byte*>(s.data()),
               reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/kvindex-capture-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

inline Bytes ReadBytes(const fs::path& path) {
  const std::string s = test::ReadFile(path);
  return B(s);
}

inline Status WriteMessage(CaptureWriter& w, uint32_t source, int64_t ns, std::vector<Bytes> frames,
                    CaptureRecordType type = CaptureRecordType::kMessage) {
  std::vector<std::span<const std::byte>> spans(frames.begin(), frames.end());
  return w.WriteFrames(type, SourceId{source}, ns, spans);
}

// Writes `n` message records whose payload frame is "payload-<i>", after one source definition.
// Returns the byte offset where each message record starts.
inline std::vector<uint64_t> WriteNumbered(const fs::path& path, int n) {
  auto writer = CaptureWriter::Create(path.string());
  REQUIRE(writer.ok());
  REQUIRE((*writer)->WriteSourceDefinition(SourceId{0}, R"({"name":"a"})", 1).ok());
  std::vector<uint64_t> offsets;
  for (int i = 0; i < n; ++i) {
    offsets.push_back((*writer)->bytes_written());
    Bytes seq(8, std::byte{0});
    seq[7] = static_cast<std::byte>(i);
    REQUIRE(WriteMessage(**writer, 0, 1000 + i, {B("kv"), seq, B("payload-" + std::to_string(i))}).ok());
  }
  REQUIRE((*writer)->Close().ok());
  return offsets;
}

inline std::vector<CaptureRecord> ReadAll(CaptureReader& reader) {
  std::vector<CaptureRecord> records;
  CaptureRecord record;
  while (reader.Next(record)) records.push_back(record);
  return records;
}

// Writes message `i` of a killed-writer test: frames "t", `i` as 8 big-endian bytes, and a payload
// of `payload_size` bytes.
inline Status WriteSequenced(CaptureWriter& writer, uint64_t i, size_t payload_size) {
  Bytes seq(8);
  for (int b = 0; b < 8; ++b) seq[static_cast<size_t>(b)] = static_cast<std::byte>(i >> (8 * (7 - b)));
  return WriteMessage(writer, 0, static_cast<int64_t>(i),
                      {B("t"), seq, Bytes(payload_size, std::byte{0x42})});
}

// Every record is a WriteSequenced() message, numbered 0, 1, 2, ... with none missing.
inline void CheckSequenced(const std::vector<CaptureRecord>& records) {
  for (size_t i = 0; i < records.size(); ++i) {
    REQUIRE(records[i].frames.size() == 3);
    uint64_t seq = 0;
    for (std::byte b : records[i].frames[1]) seq = (seq << 8) | static_cast<uint64_t>(b);
    REQUIRE(seq == i);
  }
}

// Pages of `path` in the page cache (mincore).
inline size_t ResidentPages(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const size_t size = fs::file_size(path);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE(map != MAP_FAILED);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size + page - 1) / page);
  REQUIRE(::mincore(map, size, in.data()) == 0);
  ::munmap(map, size);
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return resident;
}

// Polls `done` every millisecond for up to 5 s.
template <typename F>
inline bool WaitFor(F done) {
  for (int i = 0; i < 5000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace kvindex::capture_test

#endif  // KVINDEX_TESTS_CAPTURE_TEST_UTIL_H_
