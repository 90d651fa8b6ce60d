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

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
