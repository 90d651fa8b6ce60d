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

TEST_CASE("A coalescing writer holds a cycle's records until Flush() writes them in one piece") {
  TempDir dir;
  const fs::path path = dir.path / "c.kvcap";
  auto w = CaptureWriter::Create(path.string());
  REQUIRE(w.ok());
  CaptureWriter& writer = **w;
  REQUIRE(writer.WriteSourceDefinition(SourceId{0}, R"({"name":"a"})", 1).ok());
  const uint64_t after_definition = fs::file_size(path);
  CHECK(after_definition == writer.bytes_written());  // not coalescing: written at once
  writer.set_coalescing(true);
  for (int i = 0; i < 10; ++i) {
    REQUIRE(WriteMessage(writer, 0, 100 + i, {B("t"), B("12345678"), B("p" + std::to_string(i))}).ok());
  }
  REQUIRE(writer.WriteObservation(CaptureRecordType::kGap, SourceId{0}, 111, 3, 5).ok());
  CHECK(writer.records_written() == 12);
  CHECK(fs::file_size(path) == after_definition);  // held in memory until the cycle ends
  REQUIRE(writer.Flush().ok());
  CHECK(fs::file_size(path) == writer.bytes_written());
  REQUIRE(writer.Flush().ok());  // nothing held: a no-op
  CHECK(fs::file_size(path) == writer.bytes_written());
  // Turning coalescing off writes what is held; later records are written one by one again.
  REQUIRE(WriteMessage(writer, 0, 200, {B("t"), B("12345678"), B("late")}).ok());
  writer.set_coalescing(false);
  CHECK(fs::file_size(path) == writer.bytes_written());
  REQUIRE(WriteMessage(writer, 0, 201, {B("t"), B("12345678"), B("later")}).ok());
  CHECK(fs::file_size(path) == writer.bytes_written());
  REQUIRE(writer.Close().ok());
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK((*r)->problems().empty());
  REQUIRE(records.size() == 14);
  for (int i = 0; i < 10; ++i) {
    CHECK(records[static_cast<size_t>(1 + i)].recv_ns == 100 + i);
    CHECK(records[static_cast<size_t>(1 + i)].frames[2] == B("p" + std::to_string(i)));
  }
  CHECK(records[11].type == CaptureRecordType::kGap);
  CHECK(records[12].frames[2] == B("late"));
  CHECK(records[13].frames[2] == B("later"));
}

TEST_CASE("A coalescing writer flushes by itself past its buffer limit, and on Close()") {
  TempDir dir;
  const fs::path path = dir.path / "big.kvcap";
  {
    auto w = CaptureWriter::Create(path.string());
    REQUIRE(w.ok());
    (*w)->set_coalescing(true);
    const Bytes payload(64 * 1024, std::byte{7});
    // 20 records of 64 KiB exceed the 1 MiB buffer: the first megabyte reaches the file unasked.
    for (int i = 0; i < 20; ++i) {
      REQUIRE(WriteMessage(**w, 0, i, {B("t"), B("12345678"), payload}).ok());
    }
    CHECK(fs::file_size(path) >= kCaptureCoalesceBytes);
    CHECK(fs::file_size(path) < (*w)->bytes_written());
    REQUIRE((*w)->Close().ok());
    CHECK(fs::file_size(path) == (*w)->bytes_written());
  }
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  CHECK(ReadAll(**r).size() == 20);
  CHECK((*r)->problems().empty());
}

TEST_CASE("A coalescing writer killed with SIGKILL keeps every flushed cycle") {
  TempDir dir;
  const fs::path path = dir.path / "kc.kvcap";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto w = CaptureWriter::Create(path.string());
    if (!w.ok()) ::_exit(3);
    (*w)->set_coalescing(true);
    for (uint64_t i = 0;; ++i) {
      if (!WriteSequenced(**w, i, 100 + i % 3000).ok()) ::_exit(4);
      if (i % 7 == 6 && !(*w)->Flush().ok()) ::_exit(5);  // a "poll cycle" of 7 records
    }
  }
  for (int i = 0; i < 2000 && (!fs::exists(path) || fs::file_size(path) < (4u << 20)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  REQUIRE(WIFSIGNALED(wstatus));
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  REQUIRE(records.size() > 100);
  CheckSequenced(records);
  // Only the write in progress when the kill came can be torn.
  CHECK((*r)->problems().size() <= 1);
  for (const auto& p : (*r)->problems()) CHECK(p.tail);
}

// Polls `done` every millisecond for up to 5 s (the background thread's pace is the machine's);
// true as soon as it returns true.

TEST_CASE("A background_sync writer fsyncs on its own thread, only after new data, across files") {
  TempDir dir;
  const fs::path base = dir.path / "bg.kvcap";
  CaptureWriterOptions options;
  options.background_sync = true;
  options.fsync_interval = std::chrono::milliseconds(10);
  options.rotate_bytes = 4096;
  auto w = CaptureWriter::Create(base.string(), options);
  REQUIRE(w.ok());
  CaptureWriter& writer = **w;
  writer.set_coalescing(true);
  CHECK(writer.background_syncs() == 0);
  // Nothing flushed yet (the file header does not count): no fsync however long we wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(writer.background_syncs() == 0);
  REQUIRE(WriteMessage(writer, 0, 1, {B("t"), B("12345678"), B("first")}).ok());
  REQUIRE(writer.Flush().ok());
  REQUIRE(writer.MaybeSync().ok());  // returns at once: the fsync is the thread's
  CHECK(WaitFor([&] { return writer.background_syncs() >= 1; }));
  const uint64_t after_first = writer.background_syncs();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // six intervals, no new data
  CHECK(writer.background_syncs() == after_first);
  // Rotation hands the thread the new file; it syncs that one once data reaches it.
  for (int i = 0; i < 40; ++i) {
    REQUIRE(WriteMessage(writer, 0, 2 + i, {B("t"), B("12345678"), B(std::string(200, 'x'))}).ok());
    REQUIRE(writer.Flush().ok());
  }
  REQUIRE(writer.paths().size() > 1);
  CHECK(WaitFor([&] { return writer.background_syncs() > after_first; }));
  REQUIRE(writer.MaybeSync().ok());
  REQUIRE(writer.Close().ok());
  CHECK(writer.background_syncs() == 0);  // the thread is gone
  auto r = CaptureReader::Open(writer.paths());
  REQUIRE(r.ok());
  int messages = 0;
  for (const auto& record : ReadAll(**r)) messages += record.type == CaptureRecordType::kMessage;
  CHECK(messages == 41);
  CHECK((*r)->problems().empty());
}


TEST_CASE("A drop_behind writer keeps its capture out of the page cache, and the data intact") {
  test::BuildTempDir dir("kvindex-capture");  // on the build's disk: /tmp may be tmpfs
  struct statfs fs_info {};
  REQUIRE(::statfs(dir.path.c_str(), &fs_info) == 0);
  REQUIRE_MESSAGE(fs_info.f_type != TMPFS_MAGIC,
                  "the build tree is on tmpfs, whose pages cannot be dropped: build on a disk");
  const fs::path path = dir.path / "drop.kvcap";
  CaptureWriterOptions options;
  options.background_sync = true;
  options.drop_behind = true;
  options.fsync_interval = std::chrono::milliseconds(1000);
  auto w = CaptureWriter::Create(path.string(), options);
  REQUIRE(w.ok());
  CaptureWriter& writer = **w;
  writer.set_coalescing(true);
  // 16 MiB in 64 KiB records, written over a few of the thread's 50 ms ticks.
  const Bytes payload(64 * 1024 - 64, std::byte{0x5a});
  for (int i = 0; i < 256; ++i) {
    REQUIRE(WriteMessage(writer, 0, i, {B("t"), B("12345678"), payload}).ok());
    REQUIRE(writer.Flush().ok());
    if (i % 32 == 31) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const size_t pages = fs::file_size(path) / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Everything but the last tick's writes leaves the page cache, without anyone asking.
  CHECK(WaitFor([&] { return writer.dropped_bytes() >= fs::file_size(path) / 2; }));
  // Dirty pages leave the cache once written back, later on a busy disk: wait for them.
  CHECK(WaitFor([&] { return ResidentPages(path) < pages / 2; }));
  REQUIRE(writer.Close().ok());
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK((*r)->problems().empty());
  REQUIRE(records.size() == 256);
  for (size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].recv_ns == static_cast<int64_t>(i));
    CHECK(records[i].frames[2] == payload);
  }
}

TEST_CASE("Without drop_behind the capture stays in the page cache (the test above can fail)") {
  TempDir dir;
  const fs::path path = dir.path / "keep.kvcap";
  CaptureWriterOptions options;
  options.background_sync = true;
  options.fsync_interval = std::chrono::milliseconds(10);
  auto w = CaptureWriter::Create(path.string(), options);
  REQUIRE(w.ok());
  const Bytes payload(64 * 1024 - 64, std::byte{0x5a});
  for (int i = 0; i < 64; ++i) {
    REQUIRE(WriteMessage(**w, 0, i, {B("t"), B("12345678"), payload}).ok());
  }
  CHECK(WaitFor([&] { return (*w)->background_syncs() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK((*w)->dropped_bytes() == 0);
  const size_t pages = fs::file_size(path) / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  CHECK(ResidentPages(path) >= pages * 9 / 10);
  REQUIRE((*w)->Close().ok());
}

TEST_CASE("A background fsync failure is reported once by MaybeSync() and again by Close()") {
  // fdatasync(2) fails with EINVAL on a FIFO: a writer whose "file" is one sees every fsync fail.
  TempDir dir;
  const fs::path path = dir.path / "fifo.kvcap";
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);  // so that opening to write works
  REQUIRE(reader >= 0);
  CaptureWriterOptions options;
  options.background_sync = true;
  options.fsync_interval = std::chrono::milliseconds(10);
  options.overwrite = true;
  auto w = CaptureWriter::Create(path.string(), options);
  REQUIRE(w.ok());
  CaptureWriter& writer = **w;
  writer.set_coalescing(true);
  REQUIRE(WriteMessage(writer, 0, 1, {B("t"), B("12345678"), B("x")}).ok());
  REQUIRE(writer.Flush().ok());
  Status failure;
  CHECK(WaitFor([&] {
    failure = writer.MaybeSync();
    return !failure.ok();
  }));
  CHECK(failure.code() == StatusCode::kIoError);
  CHECK(failure.message().find("fifo.kvcap: fsync") != std::string::npos);
  CHECK(writer.MaybeSync().ok());  // reported once
  const Status closed = writer.Close();
  CHECK_FALSE(closed.ok());
  CHECK(closed.message().find("fsync") != std::string::npos);
  ::close(reader);
}

// Rotation with a writer that writes (`mapped` false) or maps (true) its files.
void CheckRotation(bool mapped) {
  CAPTURE(mapped);
  TempDir dir;
  const fs::path base = dir.path / "rot.kvcap";
  CaptureWriterOptions options;
  options.mapped = mapped;
  options.rotate_bytes = 300;
  std::vector<std::string> paths;
  {
    auto w = CaptureWriter::Create(base.string(), options);
    REQUIRE(w.ok());
    REQUIRE((*w)->WriteSourceDefinition(SourceId{0}, R"({"name":"a"})", 1).ok());
    REQUIRE((*w)->WriteSourceDefinition(SourceId{1}, R"({"name":"b"})", 1).ok());
    for (int i = 0; i < 20; ++i) {
      REQUIRE(WriteMessage(**w, static_cast<uint32_t>(i % 2), i, {B("t"), B("12345678"), B(std::string(40, 'x'))}).ok());
    }
    REQUIRE((*w)->Close().ok());
    paths = (*w)->paths();
  }
  REQUIRE(paths.size() > 3);
  CHECK(paths[1] == (dir.path / "rot.1.kvcap").string());
  // Each file on its own starts with both source definitions (after the first).
  for (size_t i = 1; i < paths.size(); ++i) {
    auto r = CaptureReader::Open({paths[i]});
    REQUIRE(r.ok());
    const auto records = ReadAll(**r);
    REQUIRE(records.size() >= 2);
    CHECK(records[0].type == CaptureRecordType::kSourceDefinition);
    CHECK(records[1].type == CaptureRecordType::kSourceDefinition);
  }
  auto r = CaptureReader::Open(paths);
  REQUIRE(r.ok());
  int messages = 0;
  int64_t last_ns = -1;
  for (const auto& record : ReadAll(**r)) {
    if (record.type != CaptureRecordType::kMessage) continue;
    CHECK(record.recv_ns == last_ns + 1);
    last_ns = record.recv_ns;
    ++messages;
  }
  CHECK(messages == 20);
  CHECK((*r)->problems().empty());  // a mapped file left uncut would end in zeros
}

TEST_CASE("Rotation splits a capture into self-contained files read in order") {
  CheckRotation(false);
  CheckRotation(true);
}

TEST_CASE("A rotation threshold below a file's preamble rotates once per record, never forever") {
  // 1 byte is less than a file header: every record still lands, one file each after the first,
  // each opening with the source definition; nothing rotates a file holding only its preamble.
  for (const bool mapped : {false, true}) {
    CAPTURE(mapped);
    TempDir dir;
    const fs::path base = dir.path / "tiny.kvcap";
    CaptureWriterOptions options;
    options.mapped = mapped;
    options.rotate_bytes = 1;
    std::vector<std::string> paths;
    {
      auto w = CaptureWriter::Create(base.string(), options);
      REQUIRE(w.ok());
      REQUIRE((*w)->WriteSourceDefinition(SourceId{0}, R"({"name":"a"})", 1).ok());
      for (int i = 0; i < 5; ++i) {
        REQUIRE(WriteMessage(**w, 0, 10 + i, {B("t"), B("12345678"), B("x")}).ok());
      }
      REQUIRE((*w)->Close().ok());
      paths = (*w)->paths();
    }
    // A file rotates after the record that crosses the threshold: the definition alone fills
    // the first file, each message one file after it, and the last holds the definition only.
    REQUIRE(paths.size() == 7);
    for (size_t i = 1; i < paths.size(); ++i) {
      auto r = CaptureReader::Open({paths[i]});
      REQUIRE(r.ok());
      const auto records = ReadAll(**r);
      REQUIRE(records.size() == (i + 1 < paths.size() ? 2u : 1u));
      CHECK(records[0].type == CaptureRecordType::kSourceDefinition);
      if (records.size() == 2) {
        CHECK(records[1].type == CaptureRecordType::kMessage);
        CHECK(records[1].recv_ns == 10 + static_cast<int64_t>(i) - 1);
      }
    }
  }
}

TEST_CASE("Opening something that is not a capture fails with one clear error") {
  TempDir dir;
  auto missing = CaptureReader::Open({(dir.path / "nope.kvcap").string()});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("nope.kvcap") != std::string::npos);

  const fs::path text = dir.path / "trace.jsonl";
  std::ofstream(text) << R"({"timestamp": 0, "hash_ids": [1]})" << "\n";
  auto not_capture = CaptureReader::Open({text.string()});
  REQUIRE_FALSE(not_capture.ok());
  CHECK(not_capture.status().code() == StatusCode::kMalformed);
  CHECK(not_capture.status().message().find("not a kvindex capture") != std::string::npos);

  const fs::path good = dir.path / "v.kvcap";
  WriteNumbered(good, 1);
  Bytes bytes = ReadBytes(good);
  bytes[8] = std::byte{9};  // version 9
  auto future = CaptureReader::FromBuffer(bytes);
  REQUIRE_FALSE(future.ok());
  CHECK(future.status().code() == StatusCode::kUnsupported);
  CHECK(LooksLikeCapture(ReadBytes(good)));
  CHECK_FALSE(LooksLikeCapture(B("{\"timestamp\"")));
}

TEST_CASE("The writer refuses to overwrite, and enforces the maximum record size") {
  TempDir dir;
  const fs::path path = dir.path / "o.kvcap";
  WriteNumbered(path, 1);
  auto again = CaptureWriter::Create(path.string());
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message().find("already exists") != std::string::npos);
  CaptureWriterOptions overwrite;
  overwrite.overwrite = true;
  auto w = CaptureWriter::Create(path.string(), overwrite);
  REQUIRE(w.ok());
  Bytes huge(kCaptureMaxBody + 1);
  const std::span<const std::byte> frame(huge);
  const Status status = (*w)->WriteFrames(CaptureRecordType::kMessage, SourceId{0}, 0, std::span(&frame, 1));
  CHECK(status.code() == StatusCode::kLimitExceeded);
  CHECK((*w)->records_written() == 0);
  REQUIRE((*w)->Close().ok());
  CHECK_FALSE((*w)->WriteText(CaptureRecordType::kNote, SourceId{0}, 0, "late").ok());
}

TEST_CASE("A second writer of the same capture is refused before it truncates the first's file") {
  TempDir dir;
  const fs::path path = dir.path / "two.kvcap";
  for (bool mapped : {false, true}) {
    CaptureWriterOptions options;
    options.overwrite = true;
    options.mapped = mapped;
    auto first = CaptureWriter::Create(path.string(), options);
    REQUIRE(first.ok());
    REQUIRE(WriteMessage(**first, 0, 1, {B("t"), B("12345678"), B("one")}).ok());
    REQUIRE((*first)->Flush().ok());
    const auto size = fs::file_size(path);
    auto second = CaptureWriter::Create(path.string(), options);
    REQUIRE_FALSE(second.ok());
    CHECK(second.status().message().find("another writer") != std::string::npos);
    CHECK(fs::file_size(path) == size);  // not truncated under the first writer
    REQUIRE(WriteMessage(**first, 0, 2, {B("t"), B("12345678"), B("two")}).ok());
    REQUIRE((*first)->Close().ok());
    auto r = CaptureReader::Open({path.string()});
    REQUIRE(r.ok());
    CHECK(ReadAll(**r).size() == 2);
    CHECK((*r)->problems().empty());
    // Once the first has closed, overwriting is allowed again.
    auto third = CaptureWriter::Create(path.string(), options);
    REQUIRE(third.ok());
    REQUIRE((*third)->Close().ok());
  }
}
}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
