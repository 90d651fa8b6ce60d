// RecordOrderer (ingest/record_order.h): link ids against python3-xxhash, batch records put back
// into their recorder's order after a carrier delivered them late, definitions first, releases
// when predecessors are lost. (JournalApplier's use of it: capture_record_test.cpp.)
#include "kvindex/ingest/record_order.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kvindex/codec/framing.h"
#include "kvindex/files/capture_record.h"
#include "record_test_util.h"

namespace kvindex {
namespace {

using test::B;
using test::Bytes;

Bytes Message(uint64_t seq, const Bytes& payload) { return test::LiveRecord(seq, payload); }

Bytes Message(uint64_t seq) { return Message(seq, B("payload-" + std::to_string(seq))); }

Bytes Text(CaptureRecordType type, std::string_view text) {
  Bytes out;
  REQUIRE(EncodeCaptureText(out, type, SourceId{9}, 1, text).ok());
  return out;
}

uint64_t Link(const Bytes& record) { return test::LinkOf(record); }

// Feeds records to an orderer and keeps what it passes on: each record's text (definitions,
// notes) or sequence (batches), in order.
struct Harness {
  RecordOrderer orderer;
  std::vector<std::string> out;
  uint64_t position = 0;
  RecordOrderer::Sink sink = [this](uint64_t, uint64_t, CaptureRecordView& record) {
    if (record.type == CaptureRecordType::kMessage) {
      uint64_t seq = 0;
      for (const std::byte b : record.frames[1]) seq = seq << 8 | static_cast<uint8_t>(b);
      out.push_back(std::to_string(seq));
    } else {
      out.emplace_back(record.text());
    }
  };

  explicit Harness(size_t max_held_bytes = size_t{64} << 20) : orderer(max_held_bytes) {}

  void Add(const Bytes& record, std::optional<uint64_t> prev = std::nullopt, uint64_t key = 1) {
    CaptureRecordView view;
    REQUIRE(ParseCaptureRecord(record, view).ok());
    orderer.Add(++position, key, record, view, prev, sink);
  }
};

using Out = std::vector<std::string>;

TEST_CASE("RecordLinkId: XXH3-64 of the payload seeded with the sequence (python3-xxhash)") {
  // xxhash.xxh3_64(b"payload-7", seed=7) and xxhash.xxh3_64(b"", seed=2**64-1).
  CHECK(Link(Message(7)) == 0x48439ccc73488839ULL);
  const std::vector<Frame> end = BuildReplayEnd(ReplayStyle::kVllm);
  std::vector<std::span<const std::byte>> frames(end.begin(), end.end());
  Bytes record;
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{9}, 1, frames).ok());
  CHECK(Link(record) == 0x4c093276ae47a555ULL);
  // A replay reply of the same batch has the live copy's link id.
  const std::vector<Frame> reply =
      BuildReplayReply(ReplayStyle::kVllmTopic, B("kv"), 7, B("payload-7"));
  frames.assign(reply.begin(), reply.end());
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{9}, 1, frames).ok());
  CHECK(Link(record) == 0x48439ccc73488839ULL);
  CaptureRecordView view;
  const Bytes note = Text(CaptureRecordType::kNote, "backfill");
  REQUIRE(ParseCaptureRecord(note, view).ok());
  CHECK(!RecordLinkId(view).has_value());
}

// A replay reply record of batch `seq` (payload "payload-<seq>") and an end marker record.
Bytes Replayed(uint64_t seq) {
  const std::vector<Frame> reply = BuildReplayReply(ReplayStyle::kVllmTopic, B("kv"), seq,
                                                    B("payload-" + std::to_string(seq)));
  const std::vector<std::span<const std::byte>> frames(reply.begin(), reply.end());
  Bytes record;
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{9}, 1, frames).ok());
  return record;
}

Bytes End() {
  const std::vector<Frame> end = BuildReplayEnd(ReplayStyle::kVllm);
  const std::vector<std::span<const std::byte>> frames(end.begin(), end.end());
  Bytes record;
  REQUIRE(EncodeCaptureFrames(record, CaptureRecordType::kReplayed, SourceId{9}, 1, frames).ok());
  return record;
}

std::optional<uint64_t> Chained(const Bytes& record, std::optional<uint64_t> prev) {
  CaptureRecordView view;
  REQUIRE(ParseCaptureRecord(record, view).ok());
  const std::optional<uint64_t> link = RecordLinkId(view);
  if (!link) return std::nullopt;
  return ChainedLinkId(view.type, *link, prev);
}

TEST_CASE("ChainedLinkId: a replay reply and an end marker depend on their predecessor") {
  // python3-xxhash: r = xxh3_64(pack("<Q", 0x48439ccc73488839), seed=0 ^ 0x7265706c61796564),
  // then xxh3_64(pack("<Q", 0x4c093276ae47a555), seed=r ^ 0x7265706c61796564).
  CHECK(Chained(Message(7), std::nullopt) == 0x48439ccc73488839ULL);  // live: its link id
  CHECK(Chained(Message(7), 5) == 0x48439ccc73488839ULL);
  CHECK(Chained(Replayed(7), std::nullopt) == 0x5bf81d95c6a3e883ULL);
  CHECK(Chained(End(), 0x5bf81d95c6a3e883ULL) == 0x12a3f234ab89ba56ULL);
  CHECK(Chained(End(), 1) != Chained(End(), 2));
  CHECK(!Chained(Text(CaptureRecordType::kNote, "n"), 1).has_value());
}

TEST_CASE("RecordOrderer: an end marker ahead of its reply waits for it (chained link ids)") {
  // Recorded: live 1, live 3 (2 was missed), the replay reply of 2 and 3, its end marker, live 4.
  // Delivered: the end marker and live 4 first, then the reply. By link id alone the end marker
  // would follow live 3 (the reply's last batch has live 3's link id); by chained link id it
  // waits for the replayed 3.
  const Bytes l1 = Message(1), l3 = Message(3), r2 = Replayed(2), r3 = Replayed(3), end = End();
  const Bytes l4 = Message(4);
  const uint64_t c1 = *Chained(l1, std::nullopt), c3 = *Chained(l3, c1);
  const uint64_t cr2 = *Chained(r2, c3), cr3 = *Chained(r3, cr2), cend = *Chained(end, cr3);
  Out seen;
  RecordOrderer orderer;
  uint64_t position = 0;
  const RecordOrderer::Sink sink = [&seen](uint64_t, uint64_t, CaptureRecordView& record) {
    const std::string kind = record.type == CaptureRecordType::kMessage ? "live " : "replayed ";
    const Result<ReplayReply> reply = ParseReplayReply(std::span<const FrameView>(record.frames));
    if (record.type == CaptureRecordType::kReplayed && reply.ok() &&
        reply->kind == ReplayReply::Kind::kEnd) {
      seen.push_back("end");
      return;
    }
    uint64_t seq = 0;
    if (record.type == CaptureRecordType::kMessage) {
      for (const std::byte b : record.frames[1]) seq = seq << 8 | static_cast<uint8_t>(b);
    } else {
      seq = reply.ok() ? reply->seq : 0;
    }
    seen.push_back(kind + std::to_string(seq));
  };
  const auto add = [&](const Bytes& record, std::optional<uint64_t> prev) {
    CaptureRecordView view;
    REQUIRE(ParseCaptureRecord(record, view).ok());
    orderer.Add(++position, 1, record, view, prev, sink);
  };
  orderer.Define(1);
  add(l1, std::nullopt);
  add(l3, c1);
  add(end, cr3);
  add(l4, cend);
  CHECK(seen == Out{"live 1", "live 3"});
  add(r2, c3);
  add(r3, cr2);
  CHECK(seen == Out{"live 1", "live 3", "replayed 2", "replayed 3", "end", "live 4"});
  CHECK(orderer.stats().released_early == 0);
}

TEST_CASE("RecordOrderer: a first batch that comes after later ones is passed on before them") {
  Harness h;
  const Bytes b0 = Message(0), b1 = Message(1), b2 = Message(2), b3 = Message(3);
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(b1, Link(b0));
  h.Add(b2, Link(b1));
  CHECK(h.out == Out{"def"});
  CHECK(h.orderer.stats().held_now == 2);
  h.Add(Text(CaptureRecordType::kNote, "note"));  // not a batch: at once
  h.Add(b0);                                       // names no predecessor: the recorder's first
  h.Add(b3, Link(b2));
  CHECK(h.out == Out{"def", "note", "0", "1", "2", "3"});
  CHECK(h.orderer.stats().held == 2);
  CHECK(h.orderer.stats().held_now == 0);
  CHECK(h.orderer.stats().held_bytes_now == 0);
  CHECK(h.orderer.stats().released_early == 0);
}

TEST_CASE("RecordOrderer: batches wait for their source's definition; other sources do not") {
  Harness h;
  const Bytes b0 = Message(0), b1 = Message(1);
  h.Add(b0, std::nullopt, 1);
  h.Add(b1, Link(b0), 1);
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def2"), std::nullopt, 2);
  h.Add(Message(5), std::nullopt, 2);
  CHECK(h.out == Out{"def2", "5"});
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def1"), std::nullopt, 1);
  CHECK(h.out == Out{"def2", "5", "def1", "0", "1"});
  // Define(): a source known from elsewhere.
  h.orderer.Define(3);
  h.Add(Message(9), std::nullopt, 3);
  CHECK(h.out.back() == "9");
}

TEST_CASE("RecordOrderer: a duplicate from another recorder satisfies a predecessor") {
  // Two recorders of the same publisher: B missed batch 4, so its 5 names 3; A's 4 came first.
  Harness h;
  const Bytes b3 = Message(3), b4 = Message(4), b5 = Message(5);
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(b3);
  h.Add(b4, Link(b3));
  h.Add(b5, Link(b3));
  h.Add(b4, Link(b3));  // the other recorder's copy
  CHECK(h.out == Out{"def", "3", "4", "5", "4"});
  CHECK(h.orderer.stats().held == 0);
}

TEST_CASE("RecordOrderer: releases pass held records on oldest first, then one unknown passes") {
  Harness h;
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(Message(0));
  const Bytes lost = Message(1);
  h.Add(Message(3), Link(Message(2)));
  h.Add(Message(2), Link(lost));
  CHECK(h.out == Out{"def", "0"});
  h.orderer.ReleaseSource(1, h.sink);
  CHECK(h.out == Out{"def", "0", "3", "2"});
  CHECK(h.orderer.stats().released_early == 2);
  // Lenient once: the next unknown predecessor passes, the one after that waits again.
  h.Add(Message(7), Link(Message(6)));
  h.Add(Message(9), Link(Message(8)));
  CHECK(h.out.back() == "7");
  CHECK(h.orderer.stats().held_now == 1);
  h.orderer.ReleaseAll(h.sink);
  CHECK(h.out.back() == "9");
  // After ReleaseAll(), a source seen for the first time is defined and lenient.
  h.Add(Message(4), Link(Message(3)), 5);
  CHECK(h.out.back() == "4");
}

TEST_CASE("RecordOrderer: leniency ends at a record whose predecessor was seen") {
  Harness h;
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(Message(1));
  h.orderer.Lenient(1);
  // The next record follows one passed on: the order is known, and a later record whose
  // predecessor is missing waits for it.
  h.Add(Message(2), Link(Message(1)));
  h.Add(Message(4), Link(Message(3)));
  CHECK(h.out == Out{"def", "1", "2"});
  h.Add(Message(3), Link(Message(2)));
  CHECK(h.out == Out{"def", "1", "2", "3", "4"});
  CHECK(h.orderer.stats().released_early == 0);
}

TEST_CASE("RecordOrderer: seeded link ids stand for records before the point reading starts") {
  // The record before the point (not read) and the three after it, the first two of those
  // delivered late: they are put in order, none passed on early.
  const Bytes before = Message(10);
  Harness h;
  h.orderer.Define(1);
  const uint64_t seeds[] = {Link(before)};
  h.orderer.Seed(1, seeds);
  h.Add(Message(12), Link(Message(11)));
  h.Add(Message(13), Link(Message(12)));
  CHECK(h.out.empty());
  h.Add(Message(11), Link(before));
  CHECK(h.out == Out{"11", "12", "13"});
  CHECK(h.orderer.stats().released_early == 0);
}

TEST_CASE("RecordOrderer: a record that is not a batch waits for the predecessor it names") {
  Harness h;
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(Message(1));
  // A note naming batch 2 arrives before it; one naming nothing passes at once.
  h.Add(Text(CaptureRecordType::kNote, "after-2"), Link(Message(2)));
  h.Add(Text(CaptureRecordType::kNote, "free"));
  CHECK(h.out == Out{"def", "1", "free"});
  h.Add(Message(2), Link(Message(1)));
  CHECK(h.out == Out{"def", "1", "free", "2", "after-2"});
  CHECK(h.orderer.stats().held == 1);
}

TEST_CASE("RecordOrderer: more than max_held_bytes held releases everything") {
  const Bytes b0 = Message(0);
  Harness h(b0.size() * 2 + 1);
  h.Add(Text(CaptureRecordType::kSourceDefinition, "def"));
  h.Add(Message(1), Link(b0));
  h.Add(Message(2), Link(Message(1)));
  CHECK(h.out == Out{"def"});
  h.Add(Message(3), Link(Message(2)));
  CHECK(h.out == Out{"def", "1", "2", "3"});
  CHECK(h.orderer.stats().held_now == 0);
}

}  // namespace
}  // namespace kvindex
