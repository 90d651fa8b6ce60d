// Capture records on their own (files/capture_record.h): each Encode*() gives exactly the bytes
// CaptureWriter puts in a file for the same call, ParseCaptureRecord() reads them back and refuses
// damage; and JournalApplier (nats/journal_apply.h, no server needed) maps journal source keys,
// gives up on a hole after a journal-lost note or skipped stream sequences, continues from a
// snapshot as the replica it was taken from, and counts each message's lag; the journal snapshot
// manifest reads back what it wrote and refuses damage.
#include "kvindex/files/capture_record.h"

#include <doctest/doctest.h>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/files/capture.h"
#include "kvindex/ingest/record_order.h"
#include "kvindex/nats/journal_apply.h"
#include "kvindex/nats/journal_snapshot.h"
#include "kvindex/snapshot/snapshot.h"
#include "record_test_util.h"
#include "test_util.h"

namespace kvindex {
namespace {

using test::B;
using test::Bytes;

// The records of a capture file written by CaptureWriter, as raw bytes (after the file header).
Bytes WrittenRecords(const std::function<void(CaptureWriter&)>& write) {
  test::BuildTempDir dir("capture-record");
  const std::string path = (dir.path / "c.kvcap").string();
  {
    auto writer = CaptureWriter::Create(path);
    REQUIRE(writer.ok());
    write(**writer);
    REQUIRE((*writer)->Close().ok());
  }
  const Bytes all = B(test::ReadFile(path));
  return Bytes(all.begin() + kCaptureFileHeaderSize, all.end());
}

TEST_CASE("Encode*() write the bytes CaptureWriter writes") {
  const Bytes topic = B("kv"), seq = B(std::string("\0\0\0\0\0\0\0\7", 8)), payload = B("xyz");
  const std::vector<std::span<const std::byte>> frames = {topic, seq, payload};
  Bytes encoded, all;
  REQUIRE(EncodeCaptureFrames(encoded, CaptureRecordType::kMessage, SourceId{3}, 42, frames).ok());
  all.insert(all.end(), encoded.begin(), encoded.end());
  EncodeCaptureObservation(encoded, CaptureRecordType::kGap, SourceId{3}, 43, 5, 9);
  all.insert(all.end(), encoded.begin(), encoded.end());
  REQUIRE(EncodeCaptureText(encoded, CaptureRecordType::kNote, SourceId{3}, 44, "backfill").ok());
  all.insert(all.end(), encoded.begin(), encoded.end());
  const Bytes written = WrittenRecords([&](CaptureWriter& w) {
    REQUIRE(w.WriteFrames(CaptureRecordType::kMessage, SourceId{3}, 42, frames).ok());
    REQUIRE(w.WriteObservation(CaptureRecordType::kGap, SourceId{3}, 43, 5, 9).ok());
    REQUIRE(w.WriteText(CaptureRecordType::kNote, SourceId{3}, 44, "backfill").ok());
  });
  CHECK(all == written);
}

TEST_CASE("ParseCaptureRecord() reads an encoded record and refuses damage") {
  const Bytes a = B("a"), b = B("bc");
  const std::vector<std::span<const std::byte>> frames = {a, b};
  Bytes record;
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{7}, 99, frames).ok());
  CHECK(record.size() == kCaptureRecordHeaderSize + 4 + 4 + 1 + 4 + 2);
  CaptureRecordView view;
  REQUIRE(ParseCaptureRecord(record, view).ok());
  CHECK(view.type == CaptureRecordType::kReplayed);
  CHECK(view.source.value == 7);
  CHECK(view.recv_ns == 99);
  REQUIRE(view.frames.size() == 2);
  CHECK(Bytes(view.frames[1].begin(), view.frames[1].end()) == b);
  Bytes flipped = record;
  flipped.back() ^= std::byte{1};
  CHECK(ParseCaptureRecord(flipped, view).code() == StatusCode::kCorrupt);
  CHECK(!ParseCaptureRecord(std::span(record).first(record.size() - 1), view).ok());
  Bytes longer = record;
  longer.push_back(std::byte{0});
  CHECK(!ParseCaptureRecord(longer, view).ok());
  CHECK(!ParseCaptureRecord(std::span(record).first(10), view).ok());
  CHECK(!ParseCaptureRecord({}, view).ok());
}

TEST_CASE("an oversized record is refused and leaves nothing") {
  Bytes record = B("stale");
  const std::string text(kCaptureMaxBody + 1, 'x');
  CHECK(EncodeCaptureText(record, CaptureRecordType::kNote, SourceId{1}, 0, text).code() ==
        StatusCode::kLimitExceeded);
  CHECK(record.empty());
}

// One journal entry holding `record`, on the subject of source `key`, at stream sequence `seq`.
struct Entry {
  Bytes bytes;
  JournalEntry entry;
  Entry(Bytes record, uint64_t key, uint64_t seq, std::optional<uint64_t> prev = std::nullopt)
      : bytes(std::move(record)) {
    entry.stream_seq = seq;
    entry.source_key = key;
    entry.body = bytes;
    entry.prev = prev;
    entry.problem = ParseCaptureRecord(bytes, entry.record);
  }
};

Bytes Batch(uint64_t seq, int64_t recv_ns = 1) {
  // An empty vLLM batch ([ts, []]): a valid message with nothing to apply.
  const Bytes payload = {std::byte{0x92}, std::byte{0xcb}, std::byte{0}, std::byte{0},
                         std::byte{0},    std::byte{0},    std::byte{0}, std::byte{0},
                         std::byte{0},    std::byte{0},    std::byte{0x90}};
  return test::LiveRecord(seq, payload, recv_ns);
}

TEST_CASE("JournalApplier: a journal-lost note gives up on the next hole at once") {
  PrefixIndex index;
  JournalApplier applier(&index);
  auto config = ParseSourceSpec("a=vllm@tcp://127.0.0.1:1,model=m");
  REQUIRE(config.ok());
  Bytes def;
  REQUIRE(EncodeCaptureText(def, CaptureRecordType::kSourceDefinition, SourceId{9}, 0,
                            SourceConfigToJson(config->front()))
              .ok());
  uint64_t stream_seq = 0;
  const auto apply = [&](Bytes record) {
    Entry e(std::move(record), 0xabc, ++stream_seq);
    REQUIRE(e.entry.problem.ok());
    REQUIRE(applier.Apply(e.entry).ok());
  };
  apply(def);
  apply(Batch(1));
  apply(Batch(2));
  REQUIRE(applier.ingestor().source_count() == 1);
  const SourceId source{0};
  CHECK(applier.ingestor().counters(source).sequence.applied == 2);
  // Without a note, a hole waits (for replay replies or a timeout record the journal may hold).
  apply(Batch(4));
  CHECK(applier.ingestor().waiting(source));
  Bytes timeout;
  EncodeCaptureObservation(timeout, CaptureRecordType::kTimeout, SourceId{9}, 0, 2, 0);
  apply(timeout);
  CHECK(!applier.ingestor().waiting(source));
  // After a journal-lost note, the next hole is given up on at once.
  Bytes note;
  REQUIRE(EncodeCaptureText(note, CaptureRecordType::kNote, SourceId{9}, 0, kJournalLostNote).ok());
  apply(note);
  apply(Batch(7));
  CHECK(!applier.ingestor().waiting(source));
  CHECK(applier.stats().lost_notes == 1);
  CHECK(applier.stats().given_up == 1);
  CHECK(applier.stats().applied_seq == stream_seq);
  // A body that is not a capture record is counted and skipped.
  Entry bad(B("junk"), 0xabc, ++stream_seq);
  CHECK(!bad.entry.problem.ok());
  CHECK(applier.Apply(bad.entry).ok());
  CHECK(applier.stats().bad_records == 1);
}

// A source definition record of `spec` as capture source 9.
Bytes Definition(const std::string& spec) {
  auto config = ParseSourceSpec(spec);
  REQUIRE(config.ok());
  Bytes def;
  REQUIRE(EncodeCaptureText(def, CaptureRecordType::kSourceDefinition, SourceId{9}, 0,
                            SourceConfigToJson(config->front()))
              .ok());
  return def;
}

void ApplyAt(JournalApplier& applier, Bytes record, uint64_t seq) {
  Entry e(std::move(record), 0xabc, seq);
  REQUIRE(applier.Apply(e.entry).ok());
}

// The vLLM payload of a batch storing one 2-token block: hash 100 + seq, the child of the
// previous batch's block.
Bytes StorePayload(uint64_t seq) {
  EventBatch batch;
  batch.ts = 1.0 + static_cast<double>(seq);
  BlockStored stored;
  stored.block_hashes = {EngineHash{100 + seq}};
  if (seq > 0) stored.parent = EngineHash{99 + seq};
  stored.scope.block_size = 2;
  stored.token_ids = {static_cast<TokenId>(2 * seq), static_cast<TokenId>(2 * seq + 1)};
  batch.events.emplace_back(std::move(stored));
  Bytes payload;
  REQUIRE(EncodeEventBatch(batch, WireFormat::kVllm, payload).ok());
  return payload;
}

// That batch as a live batch record of capture source 9.
Bytes StoreBatch(uint64_t seq) { return test::LiveRecord(seq, StorePayload(seq)); }

// That batch as a replay reply record of capture source 9.
Bytes StoreReply(uint64_t seq) {
  const std::vector<Frame> reply = BuildReplayReply(ReplayStyle::kVllm, B("kv"), seq,
                                                    StorePayload(seq));
  const std::vector<std::span<const std::byte>> frames(reply.begin(), reply.end());
  Bytes record;
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{9}, 1, frames).ok());
  return record;
}

TEST_CASE("JournalApplier: a source's first batch after later ones gives the in-order state") {
  const Bytes def = Definition("a=vllm@tcp://127.0.0.1:1,model=m,block-size=2");
  std::vector<Bytes> batches;
  for (uint64_t s = 0; s < 4; ++s) batches.push_back(StoreBatch(s));
  // Each batch names the one before it, as the journal publisher does.
  const auto prev = [&](size_t i) {
    return i == 0 ? std::nullopt : std::optional<uint64_t>(test::LinkOf(batches[i - 1]));
  };
  const auto run = [&](const std::vector<size_t>& order, bool named, PrefixIndex& index) {
    JournalApplier applier(&index);
    uint64_t seq = 0;
    Entry d(def, 0xabc, ++seq);
    REQUIRE(applier.Apply(d.entry).ok());
    for (const size_t i : order) {
      Entry e(batches[i], 0xabc, ++seq, named ? prev(i) : std::nullopt);
      REQUIRE(applier.Apply(e.entry).ok());
    }
    const SourceId source{0};
    return std::make_pair(applier.ingestor().counters(source).sequence, applier.stats());
  };
  PrefixIndex in_order;
  run({0, 1, 2, 3}, true, in_order);
  CHECK(in_order.stats().presences == 4);
  // The stream as a resend after a failure leaves it: 1, 2, then 0 (sent again), 3.
  PrefixIndex reordered;
  const auto [seqs, stats] = run({1, 2, 0, 3}, true, reordered);
  CHECK(reordered.stats().presences == 4);
  CHECK(seqs.restarts == 0);
  CHECK(seqs.lost == 0);
  CHECK(seqs.applied == 4);
  CHECK(stats.reordered == 2);
  CHECK(stats.held_records == 0);
  CHECK(stats.applied_seq == 5);
  // Without the predecessors named, batch 0 after 1 and 2 reads as a publisher restart: the
  // source is cleared and what batches 1 and 2 stored is gone.
  PrefixIndex unnamed;
  const auto [unnamed_seqs, unnamed_stats] = run({1, 2, 0, 3}, false, unnamed);
  CHECK(unnamed_seqs.restarts == 1);
  CHECK(unnamed.stats().presences < 4);
}

// The snapshot bytes of `applier`'s index with the sequence state of its one source.
std::string SnapshotOf(const PrefixIndex& index, const JournalApplier& applier) {
  const std::vector<SourceSeqState> seq = {applier.ingestor().sequence_state(SourceId{0})};
  std::string bytes;
  REQUIRE(WriteSnapshot(index.CopyState(), seq, 1, [&bytes](std::string_view chunk) {
            bytes.append(chunk);
            return true;
          }).ok());
  return bytes;
}

// `bytes` loaded into `index`.
SnapshotInfo LoadSnapshot(const std::string& bytes, PrefixIndex& index) {
  SnapshotReader reader("s", &index);
  REQUIRE(reader.Feed(bytes).ok());
  Result<SnapshotInfo> info = reader.Finish();
  REQUIRE(info.ok());
  return std::move(*info);
}

TEST_CASE("JournalApplier: StartFrom() continues a snapshot as the applier it was taken from") {
  PrefixIndex index_a;
  JournalApplier a(&index_a);
  ApplyAt(a, Definition("a=vllm@tcp://127.0.0.1:1,model=m"), 1);
  ApplyAt(a, Batch(1), 2);
  ApplyAt(a, Batch(2), 3);
  // The snapshot of A at seq 3, loaded into B, which continues after it.
  const SourceId source{0};
  PrefixIndex index_b;
  const SnapshotInfo info = LoadSnapshot(SnapshotOf(index_a, a), index_b);
  JournalApplier b(&index_b);
  const std::vector<uint64_t> keys = {0xabc};
  REQUIRE(b.StartFrom(info.sources, info.seq, keys, {}, 3).ok());
  CHECK(b.stats().applied_seq == 3);
  CHECK(b.stats().snapshot_seq == 3);
  REQUIRE(b.ingestor().source_count() == 1);
  CHECK(b.ingestor().sequence_state(source) == a.ingestor().sequence_state(source));
  // The next batch is in sequence on both; a hole waits on both.
  for (JournalApplier* applier : {&a, &b}) {
    ApplyAt(*applier, Batch(3), 4);
    CHECK(applier->ingestor().counters(source).sequence.gaps == 0);
    CHECK(!applier->ingestor().waiting(source));
    ApplyAt(*applier, Batch(5), 5);
    CHECK(applier->ingestor().waiting(source));
  }
  CHECK(b.replay_stats().unknown_source_records == 0);
  // Skipped stream sequences: the source gives up at once.
  b.NoteSkipped(4);
  CHECK(!b.ingestor().waiting(source));
  CHECK(b.stats().skipped_seqs == 4);
  CHECK(b.stats().given_up == 1);
  // A source redefined in the journal after the snapshot is the same source, not a new one.
  ApplyAt(b, Definition("a=vllm@tcp://127.0.0.1:1,model=m"), 10);
  CHECK(b.ingestor().source_count() == 1);
}

TEST_CASE("JournalApplier: records after a snapshot's cut are put in order from its last links") {
  const Bytes def = Definition("a=vllm@tcp://127.0.0.1:1,model=m,block-size=2");
  std::vector<Bytes> batches;
  for (uint64_t s = 0; s < 5; ++s) batches.push_back(StoreBatch(s));
  const auto prev = [&](size_t i) {
    return i == 0 ? std::nullopt : std::optional<uint64_t>(test::LinkOf(batches[i - 1]));
  };
  // The ingester's state after batches 0 and 1 (stream sequences 1-3), as a snapshot.
  PrefixIndex index_a;
  JournalApplier a(&index_a);
  uint64_t stream_seq = 0;
  Entry d(def, 0xabc, ++stream_seq);
  REQUIRE(a.Apply(d.entry).ok());
  for (size_t i = 0; i < 2; ++i) {
    Entry e(batches[i], 0xabc, ++stream_seq, prev(i));
    REQUIRE(a.Apply(e.entry).ok());
  }
  const std::string bytes = SnapshotOf(index_a, a);
  // After the cut the stream holds batch 2 after 3 and 4 (its publish failed and was resent).
  const auto replica = [&](std::vector<std::optional<JournalLink>> links, PrefixIndex& index) {
    const SnapshotInfo info = LoadSnapshot(bytes, index);
    JournalApplier b(&index);
    const std::vector<uint64_t> keys = {0xabc};
    REQUIRE(b.StartFrom(info.sources, info.seq, keys, links, stream_seq).ok());
    uint64_t at = stream_seq;
    for (const size_t i : {3, 4, 2}) {
      Entry e(batches[i], 0xabc, ++at, prev(i));
      REQUIRE(b.Apply(e.entry).ok());
    }
    return std::make_pair(b.ingestor().counters(SourceId{0}).sequence, b.stats());
  };
  const uint64_t last = test::LinkOf(batches[1]);  // a live batch: its chained id is its link id
  PrefixIndex named;
  const auto [seqs, stats] = replica({JournalLink{last, last}}, named);
  CHECK(named.stats().presences == 5);
  CHECK(seqs.gaps == 0);
  CHECK(seqs.lost == 0);
  CHECK(stats.reordered == 2);
  CHECK(stats.held_records == 0);
  CHECK(stats.released_early == 0);
  // A snapshot that does not name them lets the first record after the cut through, here the
  // wrong one: batch 2 then waits for a predecessor the stream does not hold after the cut.
  PrefixIndex unnamed;
  const auto [unnamed_seqs, unnamed_stats] = replica({}, unnamed);
  CHECK(unnamed_stats.held_records == 1);
  CHECK(unnamed.stats().presences < 5);
}

TEST_CASE("JournalApplier: a timeout the stream holds before the reply it follows waits for it") {
  const Bytes def = Definition("a=vllm@tcp://127.0.0.1:1,model=m,block-size=2");
  // As recorded: batches 0, 1, 3 live (2 missing: a hole), the reply with 2, then the timeout
  // (the reply's end marker never came). Each names the batch record kept before it; the stream
  // holds the timeout before the reply (its publish failed and was resent).
  const Bytes b3 = StoreBatch(3), reply = StoreReply(2);
  const uint64_t link3 = test::LinkOf(b3);
  const uint64_t reply_chained = ChainedLinkId(CaptureRecordType::kReplayed, test::LinkOf(reply),
                                               link3);
  Bytes timeout;
  EncodeCaptureObservation(timeout, CaptureRecordType::kTimeout, SourceId{9}, 0, 1, 0);
  const auto run = [&](std::optional<uint64_t> timeout_prev, PrefixIndex& index) {
    JournalApplier applier(&index);
    uint64_t seq = 0;
    const Bytes b0 = StoreBatch(0), b1 = StoreBatch(1);
    const std::vector<std::pair<Bytes, std::optional<uint64_t>>> stream = {
        {def, std::nullopt},      {b0, std::nullopt},
        {b1, test::LinkOf(b0)},   {b3, test::LinkOf(b1)},
        {timeout, timeout_prev},  {reply, link3}};
    for (const auto& [record, prev] : stream) {
      Entry e(record, 0xabc, ++seq, prev);
      REQUIRE(applier.Apply(e.entry).ok());
    }
    return applier.ingestor().counters(SourceId{0}).sequence;
  };
  PrefixIndex named;
  const auto seqs = run(reply_chained, named);
  CHECK(named.stats().presences == 4);
  CHECK(seqs.recovered == 1);
  CHECK(seqs.lost == 0);
  // A timeout that names nothing (a journal written before records other than batches named
  // their predecessor) is applied where the stream holds it: batch 2 is given up on (and batch 3,
  // its child, is an orphan).
  PrefixIndex unnamed;
  const auto unnamed_seqs = run(std::nullopt, unnamed);
  CHECK(unnamed.stats().presences == 2);
  CHECK(unnamed_seqs.lost == 1);
}

TEST_CASE("JournalApplier: an unregister note purges the instance; a definition again adds it") {
  PrefixIndex index;
  JournalApplier applier(&index);
  uint64_t seq = 0;
  const Bytes def = Definition("a=vllm@tcp://127.0.0.1:1,model=m,block-size=2");
  ApplyAt(applier, def, ++seq);
  ApplyAt(applier, StoreBatch(0), ++seq);
  ApplyAt(applier, StoreBatch(1), ++seq);
  CHECK(index.stats().presences == 2);
  REQUIRE(index.stats().instances.size() == 1);
  Bytes note;
  REQUIRE(EncodeCaptureText(note, CaptureRecordType::kNote, SourceId{9}, 0, kUnregisterNote).ok());
  ApplyAt(applier, note, ++seq);
  CHECK(index.stats().presences == 0);
  CHECK(index.stats().instances.empty());
  CHECK(applier.replay_stats().unregistered == 1);
  // Registered again: the same definition is a new source whose publisher starts over.
  ApplyAt(applier, def, ++seq);
  ApplyAt(applier, StoreBatch(0), ++seq);
  CHECK(index.stats().presences == 1);
  CHECK(index.stats().instances.size() == 1);
  CHECK(applier.ingestor().source_count() == 2);
  CHECK(applier.replay_stats().unknown_source_records == 0);
}

TEST_CASE("JournalApplier: after skipped sequences the next hole is given up on at once") {
  PrefixIndex index;
  JournalApplier applier(&index);
  ApplyAt(applier, Definition("a=vllm@tcp://127.0.0.1:1,model=m"), 1);
  ApplyAt(applier, Batch(1), 2);
  applier.NoteSkipped(7);
  ApplyAt(applier, Batch(5), 10);
  CHECK(!applier.ingestor().waiting(SourceId{0}));
  CHECK(applier.stats().given_up == 1);
}

TEST_CASE("journal snapshot manifest: encodes, parses back, refuses damage") {
  JournalSnapshotManifest m;
  m.id = 1764657000123456789ULL;
  m.covered_seq = 42;
  m.bytes = kJournalSnapshotChunkBytes + 7;
  m.xxh3 = 0xfedcba9876543210ULL;
  m.chunks = {{5, kJournalSnapshotChunkBytes, 1}, {6, 7, 0xffffffffffffffffULL}};
  m.source_keys = {0xabc, 0};
  m.last_links = {JournalLink{0x1111, 0xffffffffffffffffULL}};
  const std::string text = EncodeJournalSnapshotManifest(m);
  CHECK(text.find("\nsource 0000000000000000\nlast 0 0000000000001111 ffffffffffffffff\nend\n") !=
        std::string::npos);
  CHECK(text.rfind("kvindex-journal-snapshot 1\nid 1764657000123456789\ncovered_seq 42\n", 0) == 0);
  Result<JournalSnapshotManifest> back = ParseJournalSnapshotManifest(text);
  REQUIRE(back.ok());
  CHECK(back->id == m.id);
  CHECK(back->covered_seq == 42);
  CHECK(back->bytes == m.bytes);
  CHECK(back->xxh3 == m.xxh3);
  REQUIRE(back->chunks.size() == 2);
  CHECK(back->chunks[1].seq == 6);
  CHECK(back->chunks[1].xxh3 == 0xffffffffffffffffULL);
  CHECK(back->source_keys == m.source_keys);
  CHECK(back->last_links == m.last_links);
  const auto refused = [](const std::string& bad) {
    Result<JournalSnapshotManifest> r = ParseJournalSnapshotManifest(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == StatusCode::kMalformed);
    return r.status().message();
  };
  CHECK(refused(text.substr(0, text.size() - 4)).find("no 'end'") != std::string::npos);
  CHECK(refused("x" + text).find("line 1") != std::string::npos);
  std::string wrong_total = text;
  wrong_total.replace(wrong_total.find("bytes 1048583"), 13, "bytes 1048584");
  CHECK(refused(wrong_total).find("not 1048584") != std::string::npos);
  std::string big_chunk = text;
  big_chunk.replace(big_chunk.find("chunk 6 7 "), 10, "chunk 6 1048577 ");
  CHECK(refused(big_chunk).find("line 7") != std::string::npos);
  // A last link for a source the manifest does not name, twice for one, or before a source.
  std::string unnamed = text;
  unnamed.replace(unnamed.find("last 0 "), 7, "last 2 ");
  CHECK(refused(unnamed).find("line 10: 'last' for a source position") != std::string::npos);
  std::string twice = text;
  twice.insert(twice.find("end\n"), "last 0 0000000000000001 0000000000000002\n");
  CHECK(refused(twice).find("line 11") != std::string::npos);
  std::string source_after = text;
  source_after.insert(source_after.find("end\n"), "source 0000000000000abc\n");
  CHECK(refused(source_after).find("a source after the last links") != std::string::npos);
  std::string short_hex = text;
  short_hex.replace(short_hex.find("0000000000001111"), 16, "1111");
  CHECK(refused(short_hex).find("expected 'last <position>") != std::string::npos);
  CHECK(!ParseJournalSnapshotManifest(text + "end\n").ok());
  CHECK(!ParseJournalSnapshotManifest("").ok());
  CHECK(JournalSnapshotStream("kv") == "kv_SNAP");
}

TEST_CASE("JournalSourceMap: ids in first-seen order") {
  JournalSourceMap map;
  CHECK(map.Local(77).value == 1);
  CHECK(map.Local(5).value == 2);
  CHECK(map.Local(77).value == 1);
}

}  // namespace
TEST_CASE("JournalApplier: each message applied adds the time since the ingester received it") {
  PrefixIndex index;
  JournalApplier applier(&index);
  auto config = ParseSourceSpec("a=vllm@tcp://127.0.0.1:1,model=m");
  REQUIRE(config.ok());
  Bytes def;
  REQUIRE(EncodeCaptureText(def, CaptureRecordType::kSourceDefinition, SourceId{9}, 0,
                            SourceConfigToJson(config->front()))
              .ok());
  uint64_t stream_seq = 0;
  const auto apply = [&](Bytes record) {
    Entry e(std::move(record), 0xabc, ++stream_seq);
    REQUIRE(e.entry.problem.ok());
    REQUIRE(applier.Apply(e.entry).ok());
  };
  const int64_t start = RealtimeNs();
  apply(def);
  CHECK(applier.stats().apply_lag.count == 0);  // a definition is not a batch
  apply(Batch(1, start - 4'000'000'000));       // received 4 s before
  apply(Batch(2, start + 3'600'000'000'000));   // a receive time ahead of this clock: 0
  Bytes note;
  REQUIRE(EncodeCaptureText(note, CaptureRecordType::kNote, SourceId{9}, 0, "backfill").ok());
  apply(note);
  const double elapsed = static_cast<double>(RealtimeNs() - start) * 1e-9;
  const LagHistogram& lag = applier.stats().apply_lag;
  CHECK(lag.count == 2);
  CHECK(lag.buckets[0] == 1);
  // The other lies between 4 s and 4 s plus the time this test took, in the one bucket above
  // 4 s that holds it.
  CHECK(lag.sum_s >= 4.0);
  CHECK(lag.sum_s <= 4.0 + elapsed + 1e-6);
  uint64_t at_least_4s = 0;
  for (size_t i = 1; i < lag.buckets.size(); ++i) {
    if (i < kLagHistogramBounds.size() && kLagHistogramBounds[i] < 4.0) {
      CHECK(lag.buckets[i] == 0);
    } else {
      at_least_4s += lag.buckets[i];
    }
  }
  CHECK(at_least_4s == 1);
}

}  // namespace kvindex
