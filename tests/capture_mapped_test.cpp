#include "kvindex/files/capture.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/ingest/capture_replay.h"
#include "kvindex/ingest/ingest.h"
#include "test_util.h"

#include "capture_test_util.h"

namespace kvindex {
namespace {

using namespace capture_test;  // NOLINT(google-build-using-namespace): the shared test helpers

TEST_SUITE("capture") {

// Mapped writers (CaptureWriterOptions::mapped), as `record` and `subscribe --record` use them.

CaptureWriterOptions MappedOptions(size_t window_bytes) {
  CaptureWriterOptions options;
  options.mapped = true;
  options.map_window_bytes = window_bytes;
  return options;
}

// Writes the same mix through `writer`: small and large messages (one larger than a few 64 KiB
// windows), observations and text, some coalesced per cycle. Returns the number of records.
int WriteMix(CaptureWriter& writer) {
  int records = 0;
  auto ok = [&](Status status) {
    REQUIRE(status.ok());
    ++records;
  };
  ok(writer.WriteSourceDefinition(SourceId{0}, R"({"name":"a"})", 1));
  for (int i = 0; i < 600; ++i) {
    const size_t size = i == 300 ? 200 * 1024 : static_cast<size_t>(50 + (i * 37) % 900);
    writer.set_coalescing(i >= 400);  // the last 200 in cycles of 7
    ok(WriteMessage(writer, 0, 100 + i,
                    {B("kv"), B("12345678"), Bytes(size, static_cast<std::byte>(i))}));
    if (i % 50 == 0) ok(writer.WriteObservation(CaptureRecordType::kGap, SourceId{0}, i, 1, 2));
    if (i % 7 == 6) REQUIRE(writer.Flush().ok());
  }
  ok(writer.WriteText(CaptureRecordType::kNote, SourceId{0}, 9, "end"));
  return records;
}

TEST_CASE("A mapped writer writes exactly the bytes write(2) does, across window boundaries") {
  TempDir dir;
  const fs::path plain = dir.path / "plain.kvcap";
  const fs::path mapped = dir.path / "mapped.kvcap";
  int records = 0;
  {
    auto w = CaptureWriter::Create(plain.string());
    REQUIRE(w.ok());
    records = WriteMix(**w);
    REQUIRE((*w)->Close().ok());
  }
  uint64_t written = 0;
  {
    auto w = CaptureWriter::Create(mapped.string(), MappedOptions(64 * 1024));
    REQUIRE(w.ok());
    CHECK((*w)->mapped());
    CHECK(WriteMix(**w) == records);
    // While recording, the file is reserved a window ahead: zeros after the last record.
    CHECK(fs::file_size(mapped) > (*w)->bytes_written());
    REQUIRE((*w)->Close().ok());
    CHECK_FALSE((*w)->mapped());
    written = (*w)->bytes_written();
  }
  // Closed: cut to its last record, and the same bytes as write(2) wrote (the header's creation
  // time and its checksum aside).
  const Bytes a = ReadBytes(plain);
  const Bytes b = ReadBytes(mapped);
  CHECK(b.size() == written);
  REQUIRE(a.size() == b.size());
  CHECK(std::equal(a.begin() + 32, a.end(), b.begin() + 32));
  CHECK(std::equal(a.begin(), a.begin() + 16, b.begin()));
  // The independent reader verifies every record.
  const std::string command = std::string(KVINDEX_PYTHON) + " " +
                              (test::TestDataDir() / "capture_check.py").string() + " " +
                              mapped.string() + " | wc -l > " + (dir.path / "n").string();
  REQUIRE(std::system(command.c_str()) == 0);
  CHECK(std::stoi(test::ReadFile(dir.path / "n")) == records);
  auto r = CaptureReader::Open({mapped.string()});
  REQUIRE(r.ok());
  CHECK(ReadAll(**r).size() == static_cast<size_t>(records));
  CHECK((*r)->problems().empty());
}

TEST_CASE("A mapped writer killed with SIGKILL keeps every complete record; the zero tail is reported") {
  TempDir dir;
  const fs::path path = dir.path / "k.kvcap";
  int progress[2];
  REQUIRE(::pipe(progress) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    CaptureWriterOptions options = MappedOptions(64 * 1024);
    options.background_sync = true;  // as `record` runs it
    options.drop_behind = true;
    auto w = CaptureWriter::Create(path.string(), options);
    if (!w.ok() || !(*w)->mapped()) ::_exit(3);
    (*w)->set_coalescing(true);
    for (uint64_t i = 0;; ++i) {
      if (!WriteSequenced(**w, i, 100 + i % 700).ok()) ::_exit(4);
      if (i % 5 == 4 && !(*w)->Flush().ok()) ::_exit(5);
      if (i == 5000 && ::write(progress[1], "x", 1) != 1) ::_exit(6);
    }
  }
  ::close(progress[1]);
  char byte = 0;
  REQUIRE(::read(progress[0], &byte, 1) == 1);  // 5,000 records written, and still writing
  ::close(progress[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  REQUIRE(WIFSIGNALED(wstatus));
  // The file ends at a window boundary: reserved space after the last record.
  const uint64_t size = fs::file_size(path);
  CHECK(size % (64 * 1024) == 0);
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  REQUIRE(records.size() > 5000);
  CheckSequenced(records);
  // One tail problem: zeros, or the record being copied when the kill came and zeros after it.
  REQUIRE((*r)->problems().size() == 1);
  const CaptureProblem& tail = (*r)->problems()[0];
  CHECK(tail.tail);
  CHECK(tail.offset + tail.skipped_bytes == size);
  CHECK((*r)->bytes_read() + kCaptureFileHeaderSize == size);
  MESSAGE("tail: " << tail.status.message());
}

TEST_CASE("A zero tail is reported as such, and a damaged record before it as that record") {
  TempDir dir;
  const fs::path path = dir.path / "z.kvcap";
  const std::vector<uint64_t> offsets = WriteNumbered(path, 3);
  Bytes bytes = ReadBytes(path);
  const size_t end = bytes.size();
  bytes.resize(end + 10000, std::byte{0});  // what a killed mapped recorder leaves
  auto r = CaptureReader::FromBuffer(bytes);
  REQUIRE(r.ok());
  CHECK(ReadAll(**r).size() == 4);
  REQUIRE((*r)->problems().size() == 1);
  CHECK((*r)->problems()[0].tail);
  CHECK((*r)->problems()[0].offset == end);
  CHECK((*r)->problems()[0].skipped_bytes == 10000);
  CHECK((*r)->problems()[0].status.message().find("zero bytes from here to the end") !=
        std::string::npos);
  // The last record cut in the middle and zeros after it: that record is the tail.
  Bytes torn(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(end - 5));
  torn.resize(end + 10000, std::byte{0});
  auto t = CaptureReader::FromBuffer(torn);
  REQUIRE(t.ok());
  CHECK(ReadAll(**t).size() == 3);
  REQUIRE((*t)->problems().size() == 1);
  CHECK((*t)->problems()[0].tail);
  CHECK((*t)->problems()[0].offset == offsets[2]);
  CHECK((*t)->problems()[0].status.message().find("checksum") != std::string::npos);
  // Zeros in the middle are damage, not an end: the record after them is still read.
  Bytes middle(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(end));
  middle.insert(middle.begin() + static_cast<std::ptrdiff_t>(offsets[2]), 4096, std::byte{0});
  auto m = CaptureReader::FromBuffer(middle);
  REQUIRE(m.ok());
  CHECK(ReadAll(**m).size() == 4);
  REQUIRE((*m)->problems().size() == 1);
  CHECK_FALSE((*m)->problems()[0].tail);
  CHECK((*m)->problems()[0].skipped_bytes == 4096);
}

TEST_CASE("A mapped drop_behind writer keeps its capture out of the page cache") {
  test::BuildTempDir dir("kvindex-capture");  // on the build's disk: /tmp may be tmpfs
  struct statfs fs_info {};
  REQUIRE(::statfs(dir.path.c_str(), &fs_info) == 0);
  REQUIRE_MESSAGE(fs_info.f_type != TMPFS_MAGIC,
                  "the build tree is on tmpfs, whose pages cannot be dropped: build on a disk");
  const fs::path path = dir.path / "drop.kvcap";
  CaptureWriterOptions options = MappedOptions(1 << 20);
  options.background_sync = true;
  options.drop_behind = true;
  auto w = CaptureWriter::Create(path.string(), options);
  REQUIRE(w.ok());
  CaptureWriter& writer = **w;
  REQUIRE(writer.mapped());
  writer.set_coalescing(true);
  const Bytes payload(64 * 1024 - 64, std::byte{0x5a});
  for (int i = 0; i < 256; ++i) {  // 16 MiB: 16 windows
    REQUIRE(WriteMessage(writer, 0, i, {B("t"), B("12345678"), payload}).ok());
    REQUIRE(writer.Flush().ok());
  }
  const size_t pages = fs::file_size(path) / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Every full window but the last leaves the page cache.
  CHECK(WaitFor([&] { return writer.dropped_bytes() >= (14u << 20); }));
  // Best effort (a few pages can stay); written back later on a busy disk: wait for it.
  CHECK(WaitFor([&] { return ResidentPages(path) < pages / 2; }));
  REQUIRE(writer.Close().ok());
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK((*r)->problems().empty());
  REQUIRE(records.size() == 256);
  for (size_t i = 0; i < records.size(); ++i) CHECK(records[i].frames[2] == payload);
}

TEST_CASE("A mapped writer on a file that cannot be mapped writes with write(2)") {
  TempDir dir;
  const fs::path path = dir.path / "fifo.kvcap";
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  CaptureWriterOptions options = MappedOptions(64 * 1024);
  options.overwrite = true;
  auto w = CaptureWriter::Create(path.string(), options);
  REQUIRE(w.ok());
  CHECK_FALSE((*w)->mapped());
  REQUIRE(WriteMessage(**w, 0, 7, {B("t"), B("12345678"), B("through a pipe")}).ok());
  Bytes got(4096);
  const ssize_t n = ::read(reader, got.data(), got.size());
  REQUIRE(n > 0);
  got.resize(static_cast<size_t>(n));
  auto r = CaptureReader::FromBuffer(got);
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  REQUIRE(records.size() == 1);
  CHECK(records[0].frames[2] == B("through a pipe"));
  (void)(*w)->Close();  // fsync fails on a FIFO (tested above)
  ::close(reader);
}

TEST_CASE("A mapped writer that cannot reserve space fails with a clear error and no torn record") {
  // RLIMIT_FSIZE stands in for a full disk: fallocate(2) past it fails with EFBIG.
  TempDir dir;
  const fs::path path = dir.path / "full.kvcap";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(2);
    auto w = CaptureWriter::Create(path.string(), MappedOptions(256 * 1024));
    if (!w.ok() || !(*w)->mapped()) ::_exit(3);
    Status status;
    int written = 0;
    while (status.ok() && written < 10000) {
      status = WriteMessage(**w, 0, written, {B("t"), B("12345678"), Bytes(4000, std::byte{1})});
      written += status.ok();
    }
    if (status.code() != StatusCode::kIoError ||
        status.message().find("cannot reserve") == std::string::npos ||
        status.message().find("full.kvcap") == std::string::npos) {
      ::_exit(4);
    }
    if (written < 200) ::_exit(5);  // 1 MiB holds ~260 of them
    // The writer can still be closed: the file keeps every whole record.
    ::_exit((*w)->Close().ok() ? 0 : 6);
  }
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  REQUIRE(WEXITSTATUS(wstatus) == 0);
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK(records.size() >= 200);
  CHECK((*r)->problems().empty());
  for (size_t i = 0; i < records.size(); ++i) CHECK(records[i].recv_ns == static_cast<int64_t>(i));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
