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

namespace kvindex {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

Bytes B(std::string_view s) {
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

Bytes ReadBytes(const fs::path& path) {
  const std::string s = test::ReadFile(path);
  return B(s);
}

Status WriteMessage(CaptureWriter& w, uint32_t source, int64_t ns, std::vector<Bytes> frames,
                    CaptureRecordType type = CaptureRecordType::kMessage) {
  std::vector<std::span<const std::byte>> spans(frames.begin(), frames.end());
  return w.WriteFrames(type, SourceId{source}, ns, spans);
}

// Writes `n` message records whose payload frame is "payload-<i>", after one source definition.
// Returns the byte offset where each message record starts.
std::vector<uint64_t> WriteNumbered(const fs::path& path, int n) {
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

std::vector<CaptureRecord> ReadAll(CaptureReader& reader) {
  std::vector<CaptureRecord> records;
  CaptureRecord record;
  while (reader.Next(record)) records.push_back(record);
  return records;
}

// Writes message `i` of a killed-writer test: frames "t", `i` as 8 big-endian bytes, and a payload
// of `payload_size` bytes.
Status WriteSequenced(CaptureWriter& writer, uint64_t i, size_t payload_size) {
  Bytes seq(8);
  for (int b = 0; b < 8; ++b) seq[static_cast<size_t>(b)] = static_cast<std::byte>(i >> (8 * (7 - b)));
  return WriteMessage(writer, 0, static_cast<int64_t>(i),
                      {B("t"), seq, Bytes(payload_size, std::byte{0x42})});
}

// Every record is a WriteSequenced() message, numbered 0, 1, 2, ... with none missing.
void CheckSequenced(const std::vector<CaptureRecord>& records) {
  for (size_t i = 0; i < records.size(); ++i) {
    REQUIRE(records[i].frames.size() == 3);
    uint64_t seq = 0;
    for (std::byte b : records[i].frames[1]) seq = (seq << 8) | static_cast<uint64_t>(b);
    REQUIRE(seq == i);
  }
}

TEST_SUITE("capture") {

TEST_CASE("Every record type round-trips through the writer and the reader") {
  TempDir dir;
  const fs::path path = dir.path / "a.kvcap";
  {
    auto w = CaptureWriter::Create(path.string());
    REQUIRE(w.ok());
    CaptureWriter& writer = **w;
    REQUIRE(writer.WriteSourceDefinition(SourceId{3}, R"({"name":"vllm-0"})", 10).ok());
    REQUIRE(WriteMessage(writer, 3, 11,
                         {B("kv-events"), B(std::string_view("\0\0\0\0\0\0\0\1", 8)), B("\x92\xcb")})
                .ok());
    REQUIRE(WriteMessage(writer, 3, 12, {B(""), B("12345678"), B("xyz"), B("")},
                         CaptureRecordType::kReplayed).ok());
    REQUIRE(WriteMessage(writer, 3, 13, {}).ok());  // zero frames is legal (malformed live)
    REQUIRE(writer.WriteObservation(CaptureRecordType::kGap, SourceId{3}, 14, 5, 9).ok());
    REQUIRE(writer.WriteObservation(CaptureRecordType::kLost, SourceId{3}, 15, 5, 2).ok());
    REQUIRE(writer.WriteObservation(CaptureRecordType::kRestart, SourceId{3}, 16, 800, 0).ok());
    REQUIRE(writer.WriteText(CaptureRecordType::kMalformed, SourceId{3}, 17, "bad frame count").ok());
    REQUIRE(writer.WriteText(CaptureRecordType::kNote, SourceId{0}, 18, "hello").ok());
    CHECK(writer.records_written() == 9);
    REQUIRE(writer.Close().ok());
  }
  auto r = CaptureReader::Open({path.string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK((*r)->problems().empty());
  REQUIRE(records.size() == 9);
  CHECK(records[0].type == CaptureRecordType::kSourceDefinition);
  CHECK(records[0].source == SourceId{3});
  CHECK(records[0].text() == R"({"name":"vllm-0"})");
  CHECK(records[0].recv_ns == 10);
  CHECK(records[0].offset == kCaptureFileHeaderSize);
  CHECK(records[1].type == CaptureRecordType::kMessage);
  REQUIRE(records[1].frames.size() == 3);
  CHECK(records[1].frames[0] == B("kv-events"));
  CHECK(records[1].frames[1] == B(std::string_view("\0\0\0\0\0\0\0\1", 8)));
  CHECK(records[1].frames[2] == B("\x92\xcb"));
  CHECK(records[2].type == CaptureRecordType::kReplayed);
  REQUIRE(records[2].frames.size() == 4);
  CHECK(records[2].frames[0].empty());
  CHECK(records[2].frames[3].empty());
  CHECK(records[3].frames.empty());
  CHECK(records[4].type == CaptureRecordType::kGap);
  CHECK(records[4].first() == 5);
  CHECK(records[4].second() == 9);
  CHECK(records[5].type == CaptureRecordType::kLost);
  CHECK(records[6].type == CaptureRecordType::kRestart);
  CHECK(records[6].first() == 800);
  CHECK(records[7].text() == "bad frame count");
  CHECK(records[8].type == CaptureRecordType::kNote);
  for (size_t i = 1; i < records.size(); ++i) CHECK(records[i].offset > records[i - 1].offset);
}

TEST_CASE("The independent Python reader agrees with the documented layout") {
  TempDir dir;
  const fs::path path = dir.path / "py.kvcap";
  WriteNumbered(path, 5);
  const fs::path out = dir.path / "out.jsonl";
  const std::string command = std::string(KVINDEX_PYTHON) + " " +
                              (test::TestDataDir() / "capture_check.py").string() + " " +
                              path.string() + " > " + out.string();
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, "capture_check.py rejected the capture");
  std::ifstream in(out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 6);
  CHECK(lines[0]["type"] == 1);
  for (int i = 0; i < 5; ++i) {
    const auto& record = lines[static_cast<size_t>(i) + 1];
    CHECK(record["type"] == 2);
    CHECK(record["recv_ns"] == 1000 + i);
    REQUIRE(record["frames"].size() == 3);
    CHECK(record["frames"][0] == "6b76");  // "kv"
  }
}

TEST_CASE("A capture written by the independent Python writer reads back exactly") {
  // tests/fuzz/make_capture_corpus.py builds these files from docs/capture-format.md.
  auto r = CaptureReader::Open(
      {(test::TestDataDir().parent_path() / "fuzz/corpus/capture/all_types.kvcap").string()});
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK((*r)->problems().empty());
  REQUIRE(records.size() == 9);
  const CaptureRecordType expected[] = {
      CaptureRecordType::kSourceDefinition, CaptureRecordType::kMessage,
      CaptureRecordType::kReplayed,         CaptureRecordType::kReplayed,
      CaptureRecordType::kGap,              CaptureRecordType::kLost,
      CaptureRecordType::kRestart,          CaptureRecordType::kMalformed,
      CaptureRecordType::kNote};
  for (size_t i = 0; i < 9; ++i) {
    CHECK(records[i].type == expected[i]);
    CHECK(records[i].recv_ns == static_cast<int64_t>(i + 1));
  }
  REQUIRE(records[1].frames.size() == 3);
  CHECK(records[1].frames[0] == B("kv-events"));
  CHECK(records[3].frames[1] == Bytes(8, std::byte{0xff}));
  CHECK(records[4].first() == 5);
  CHECK(records[4].second() == 9);
  CHECK(records[6].first() == 900);
  CHECK(records[7].text() == "expected 3 frames, got 2");

  auto torn = CaptureReader::Open(
      {(test::TestDataDir().parent_path() / "fuzz/corpus/capture/torn_tail.kvcap").string()});
  REQUIRE(torn.ok());
  CHECK(ReadAll(**torn).size() == 2);
  REQUIRE((*torn)->problems().size() == 1);
  CHECK((*torn)->problems()[0].tail);
  CHECK((*torn)->problems()[0].skipped_bytes == 20);
}

TEST_CASE("A capture cut at any byte of its last record reads every record before it") {
  TempDir dir;
  const fs::path path = dir.path / "t.kvcap";
  const auto offsets = WriteNumbered(path, 4);
  const Bytes whole = ReadBytes(path);
  const uint64_t last = offsets.back();
  for (uint64_t cut = last; cut <= whole.size(); ++cut) {
    CAPTURE(cut);
    auto r = CaptureReader::FromBuffer(Bytes(whole.begin(), whole.begin() + static_cast<long>(cut)));
    REQUIRE(r.ok());
    const auto records = ReadAll(**r);
    const bool complete = cut == whole.size();
    CHECK(records.size() == (complete ? 5u : 4u));  // the definition + messages
    CHECK(records.back().text().find(complete ? "payload-3" : "payload-2") != std::string::npos);
    if (cut == last || complete) {
      CHECK((*r)->problems().empty());
    } else {
      REQUIRE((*r)->problems().size() == 1);
      const CaptureProblem& p = (*r)->problems()[0];
      CHECK(p.tail);
      CHECK(p.offset == last);
      CHECK(p.skipped_bytes == cut - last);
      CHECK(p.status.code() == StatusCode::kCorrupt);
    }
  }
}

TEST_CASE("A flipped byte anywhere in a middle record loses only that record") {
  TempDir dir;
  const fs::path path = dir.path / "f.kvcap";
  const auto offsets = WriteNumbered(path, 5);
  const Bytes whole = ReadBytes(path);
  const uint64_t start = offsets[2];
  const uint64_t end = offsets[3];
  for (uint64_t at = start; at < end; ++at) {
    CAPTURE(at);
    Bytes damaged = whole;
    damaged[at] ^= std::byte{0x5a};
    auto r = CaptureReader::FromBuffer(damaged);
    REQUIRE(r.ok());
    const auto records = ReadAll(**r);
    REQUIRE(records.size() == 5u);  // definition + messages 0, 1, 3, 4
    CHECK(records[3].text().find("payload-3") != std::string::npos);
    CHECK(records[4].text().find("payload-4") != std::string::npos);
    REQUIRE((*r)->problems().size() == 1);
    CHECK((*r)->problems()[0].offset == start);
    CHECK((*r)->problems()[0].skipped_bytes == end - start);
    CHECK_FALSE((*r)->problems()[0].tail);
  }
}

TEST_CASE("NextView reads what Next reads, damage and frames included") {
  // Records of every shape, a flipped byte in a middle record, garbage between two records and a
  // torn tail: the borrowed reader (the replay's) must see the same records and problems as the
  // copying one.
  TempDir dir;
  const fs::path path = dir.path / "v.kvcap";
  const auto offsets = WriteNumbered(path, 6);
  Bytes bytes = ReadBytes(path);
  bytes[offsets[2] + 40] ^= std::byte{0x5a};                          // message 2 corrupt
  bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(offsets[4]), 7, std::byte{0xee});
  bytes.resize(bytes.size() - 3);                                      // message 5 torn
  auto copying = CaptureReader::FromBuffer(bytes);
  auto borrowing = CaptureReader::FromBuffer(bytes);
  REQUIRE(copying.ok());
  REQUIRE(borrowing.ok());
  CaptureRecord record;
  CaptureRecordView view;
  size_t n = 0;
  for (;;) {
    const bool a = (*copying)->Next(record);
    const bool b = (*borrowing)->NextView(view);
    REQUIRE(a == b);
    if (!a) break;
    ++n;
    CAPTURE(n);
    CHECK(view.type == record.type);
    CHECK(view.flags == record.flags);
    CHECK(view.recv_ns == record.recv_ns);
    CHECK(view.source == record.source);
    CHECK(view.offset == record.offset);
    CHECK(view.file_index == record.file_index);
    CHECK(Bytes(view.body.begin(), view.body.end()) == record.body);
    CHECK(view.text() == record.text());
    CHECK(view.first() == record.first());
    CHECK(view.second() == record.second());
    REQUIRE(view.frames.size() == record.frames.size());
    for (size_t i = 0; i < view.frames.size(); ++i) {
      CHECK(Bytes(view.frames[i].begin(), view.frames[i].end()) == record.frames[i]);
    }
  }
  CHECK(n == 5);  // the definition and messages 0, 1, 3 and 4 (found by scanning past the garbage)
  const auto& want = (*copying)->problems();
  const auto& got = (*borrowing)->problems();
  CHECK(want.size() == 3);  // message 2, the garbage, the torn tail
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].offset == want[i].offset);
    CHECK(got[i].skipped_bytes == want[i].skipped_bytes);
    CHECK(got[i].tail == want[i].tail);
    CHECK(got[i].status.ToString() == want[i].status.ToString());
  }
  CHECK(want.back().tail);
}

TEST_CASE("A replay applies the same with and without a per-record callback") {
  // ApplyAll() reads borrowed records (NextView) without a callback and copied ones (Next) with
  // one; record by record Apply(CaptureRecord) is a third way. All three must end in one state.
  TempDir dir;
  const fs::path path = dir.path / "r.kvcap";
  {
    auto w = CaptureWriter::Create(path.string());
    REQUIRE(w.ok());
    for (uint32_t s = 0; s < 2; ++s) {
      SourceConfig config;
      config.name = "vllm-" + std::to_string(s);
      config.format = "vllm";
      config.model = "m";
      config.block_size = 4;
      REQUIRE((*w)->WriteSourceDefinition(SourceId{s}, SourceConfigToJson(config), 0).ok());
    }
    // Per source: seqs 0..9 with 6 missing (a gap never filled), 3 sent twice, then a restart.
    const std::vector<uint64_t> seqs = {0, 1, 2, 3, 3, 4, 5, 7, 8, 9, 0, 1};
    int64_t ns = 0;
    for (size_t n = 0; n < seqs.size(); ++n) {
      // The second seq 3 is a true duplicate: the same bytes (different ones would be a restart,
      // docs/sequence-rules.md "Restart or duplicate: the content decides").
      const size_t i = n == 4 ? 3 : n;
      for (uint32_t s = 0; s < 2; ++s) {
        BlockStored stored;
        stored.block_hashes = {EngineHash{100 * s + i + 1}};
        if (i % 4 != 0 && i < 10) stored.parent = EngineHash{100 * s + i};  // roots after the restart
        stored.token_ids = {1, 2, 3, static_cast<TokenId>(i)};
        stored.scope.block_size = 4;
        EventBatch batch{1.0 + static_cast<double>(i), 0, {stored}, {}};
        std::vector<std::byte> payload;
        REQUIRE(EncodeEventBatch(batch, WireFormat::kVllm, payload).ok());
        const auto frames = BuildEventMessage(B("kv"), seqs[n], payload);
        REQUIRE(WriteMessage(**w, s, ++ns, frames).ok());
      }
    }
    REQUIRE((*w)->Close().ok());
  }
  struct Run {
    PrefixIndex index;
    Ingestor ingestor{&index};
    CaptureReplayer replayer{ingestor};
  };
  Run plain, callback, manual;
  {
    auto reader = CaptureReader::Open({path.string()});
    REQUIRE(reader.ok());
    REQUIRE(plain.replayer.ApplyAll(**reader).ok());
  }
  size_t calls = 0;
  {
    auto reader = CaptureReader::Open({path.string()});
    REQUIRE(reader.ok());
    REQUIRE(callback.replayer.ApplyAll(**reader, [&](const CaptureRecord&) { ++calls; }).ok());
    CHECK(calls == (*reader)->records_read());
  }
  {
    auto reader = CaptureReader::Open({path.string()});
    REQUIRE(reader.ok());
    CaptureRecord record;
    while ((*reader)->Next(record)) REQUIRE(manual.replayer.Apply(record).ok());
  }
  CHECK(calls == 26);
  for (Run* run : {&callback, &manual}) {
    CHECK(run->replayer.stats().messages == plain.replayer.stats().messages);
    CHECK(run->replayer.stats().records == plain.replayer.stats().records);
    for (uint32_t s = 0; s < 2; ++s) {
      const SourceCounters& got = run->ingestor.counters(SourceId{s});
      const SourceCounters& want = plain.ingestor.counters(SourceId{s});
      CHECK(got.events == want.events);
      CHECK(got.sequence.applied == want.sequence.applied);
      CHECK(got.sequence.duplicates == want.sequence.duplicates);
      CHECK(got.sequence.gaps == want.sequence.gaps);
      CHECK(got.sequence.restarts == want.sequence.restarts);
      CHECK(got.index.stored == want.index.stored);
      CHECK(got.index.removed == want.index.removed);
    }
    CHECK(run->index.stats().presences == plain.index.stats().presences);
  }
  // The stream did what it was built to do (so the comparison is not of empty states).
  const SourceCounters& c = plain.ingestor.counters(SourceId{1});
  CHECK(c.sequence.duplicates >= 1);
  CHECK(c.sequence.gaps == 1);
  CHECK(c.sequence.restarts == 1);
  CHECK(c.events > 0);
  CHECK(plain.index.stats().presences > 0);
}

TEST_CASE("Garbage inserted between records is skipped by scanning to the next good record") {
  TempDir dir;
  const fs::path path = dir.path / "g.kvcap";
  const auto offsets = WriteNumbered(path, 3);
  Bytes whole = ReadBytes(path);
  const Bytes junk = B("\xff\xff\xff\x7fjunkjunkjunkjunkjunkjunkjunkjunkjunkjunk");
  whole.insert(whole.begin() + static_cast<long>(offsets[1]), junk.begin(), junk.end());
  auto r = CaptureReader::FromBuffer(whole);
  REQUIRE(r.ok());
  const auto records = ReadAll(**r);
  CHECK(records.size() == 4u);
  REQUIRE((*r)->problems().size() == 1);
  CHECK((*r)->problems()[0].offset == offsets[1]);
  CHECK((*r)->problems()[0].skipped_bytes == junk.size());
}

TEST_CASE("A capture written by a process killed with SIGKILL reads back every complete record") {
  TempDir dir;
  const fs::path path = dir.path / "k.kvcap";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto w = CaptureWriter::Create(path.string());
    if (!w.ok()) ::_exit(3);
    for (uint64_t i = 0;; ++i) {
      if (!WriteSequenced(**w, i, 100 + i % 3000).ok()) ::_exit(4);
    }
  }
  // Let the child write a few megabytes, then kill it without warning.
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
  // Sequence numbers are contiguous from 0: no complete record was lost or damaged.
  CheckSequenced(records);
  // At most the record being written when the kill came is torn.
  CHECK((*r)->problems().size() <= 1);
  for (const auto& p : (*r)->problems()) CHECK(p.tail);
  CHECK((*r)->bytes_read() + kCaptureFileHeaderSize == fs::file_size(path));
}

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
template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 5000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

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

// Pages of `path` in the page cache (mincore(2) over a read-only mapping).
size_t ResidentPages(const fs::path& path) {
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

// ---------------------------------------------------------------------------------------------
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
