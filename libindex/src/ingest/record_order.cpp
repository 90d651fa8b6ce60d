// RecordOrderer (record_order.h).
#include "kvindex/ingest/record_order.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <xxhash.h>

#include "kvindex/codec/framing.h"
#include "kvindex/files/capture_record.h"

namespace kvindex {

size_t NextRecordLength(std::span<const std::byte> rest) {
  if (rest.size() < 4) return rest.size();
  uint32_t declared;
  std::memcpy(&declared, rest.data(), 4);
  return declared >= 4 && declared <= rest.size() ? declared : rest.size();
}

std::optional<uint64_t> RecordLinkId(const CaptureRecordView& record) {
  uint64_t seq = 0;
  std::span<const std::byte> payload;
  if (record.type == CaptureRecordType::kMessage) {
    if (record.frames.size() < 2 || record.frames[1].size() != 8) return std::nullopt;
    for (const std::byte b : record.frames[1]) seq = seq << 8 | static_cast<uint8_t>(b);
    payload = record.frames.back();
  } else if (record.type == CaptureRecordType::kReplayed) {
    const Result<ReplayReply> reply = ParseReplayReply(std::span<const FrameView>(record.frames));
    if (!reply.ok()) return std::nullopt;
    if (reply->kind == ReplayReply::Kind::kEnd) {
      seq = std::numeric_limits<uint64_t>::max();
    } else {
      seq = reply->seq;
      payload = reply->payload;
    }
  } else {
    return std::nullopt;
  }
  return XXH3_64bits_withSeed(payload.data(), payload.size(), seq);
}

uint64_t ChainedLinkId(CaptureRecordType type, uint64_t link, std::optional<uint64_t> prev) {
  if (type != CaptureRecordType::kReplayed) return link;
  std::byte bytes[8];
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>(link >> (8 * i));
  return XXH3_64bits_withSeed(bytes, sizeof(bytes), prev.value_or(0) ^ kReplayedLinkSeed);
}

RecordOrderer::Source& RecordOrderer::At(uint64_t source_key) {
  const auto [it, added] = sources_.try_emplace(source_key);
  if (added && lenient_default_) {
    it->second.defined = true;
    it->second.lenient = true;
  }
  return it->second;
}

bool RecordOrderer::Ready(Source& source, const CaptureRecordView& record,
                          std::optional<uint64_t> prev, bool* needs_definition) {
  *needs_definition = false;
  const bool batch =
      record.type == CaptureRecordType::kMessage || record.type == CaptureRecordType::kReplayed;
  if (!batch && !prev) return true;
  if (!source.defined) {
    *needs_definition = true;
    return false;
  }
  if (!prev) return true;
  if (source.recent.count(*prev) != 0) {
    source.lenient = false;  // the source's order is known again
    return true;
  }
  if (source.lenient) {
    source.lenient = false;
    return true;
  }
  return false;
}

void RecordOrderer::Add(uint64_t position, uint64_t source_key, std::span<const std::byte> bytes,
                        CaptureRecordView& record, std::optional<uint64_t> prev,
                        const Sink& sink) {
  bool needs_definition = false;
  if (Ready(At(source_key), record, prev, &needs_definition)) {
    Pass(position, source_key, record, prev, sink);
    return;
  }
  Hold(position, source_key, bytes, prev, needs_definition);
  if (stats_.held_bytes_now > max_held_bytes_) ReleaseAll(sink);
}

void RecordOrderer::Define(uint64_t source_key) { At(source_key).defined = true; }

void RecordOrderer::Lenient(uint64_t source_key) { At(source_key).lenient = true; }

void RecordOrderer::Seed(uint64_t source_key, std::span<const uint64_t> links) {
  Source& source = At(source_key);
  for (const uint64_t link : links) NoteLink(source, link);
}

void RecordOrderer::Hold(uint64_t position, uint64_t source_key, std::span<const std::byte> bytes,
                         std::optional<uint64_t> prev, bool needs_definition) {
  Held held;
  held.source_key = source_key;
  held.bytes.assign(bytes.begin(), bytes.end());
  held.prev = prev;
  held.needs_definition = needs_definition;
  ++stats_.held;
  ++stats_.held_now;
  stats_.held_bytes_now += held.bytes.size();
  if (needs_definition) {
    waiting_definition_.emplace(source_key, position);
  } else {
    waiting_.emplace(std::make_pair(source_key, *prev), position);
  }
  held_.insert_or_assign(position, std::move(held));
}

RecordOrderer::Held RecordOrderer::Take(uint64_t position) {
  const auto it = held_.find(position);
  Held held = std::move(it->second);
  held_.erase(it);
  --stats_.held_now;
  stats_.held_bytes_now -= held.bytes.size();
  return held;
}

void RecordOrderer::NoteLink(Source& source, uint64_t link) {
  if (!source.recent.insert(link).second) return;
  source.recent_order.push_back(link);
  if (source.recent_order.size() > kRecentLinks) {
    source.recent.erase(source.recent_order.front());
    source.recent_order.pop_front();
  }
}

void RecordOrderer::Pass(uint64_t position, uint64_t source_key, CaptureRecordView& record,
                         std::optional<uint64_t> prev, const Sink& sink) {
  // Links passed on whose waiters are still to be released (a work list, not recursion: a chain
  // of held records may be long).
  std::vector<std::pair<uint64_t, uint64_t>> links;
  const auto pass_one = [&](uint64_t at, uint64_t key, CaptureRecordView& view,
                            std::optional<uint64_t> named) {
    const std::optional<uint64_t> link = RecordLinkId(view);
    const std::optional<uint64_t> chained =
        link ? std::optional<uint64_t>(ChainedLinkId(view.type, *link, named)) : std::nullopt;
    const bool definition = view.type == CaptureRecordType::kSourceDefinition;
    sink(at, key, view);
    Source& source = At(key);
    if (link) {
      NoteLink(source, *link);
      links.emplace_back(key, *link);
    }
    if (chained && chained != link) {
      NoteLink(source, *chained);
      links.emplace_back(key, *chained);
    }
    if (definition && !source.defined) {
      source.defined = true;
      // What waited for the definition now waits for its predecessor, or goes on.
      std::vector<uint64_t> positions;
      const auto range = waiting_definition_.equal_range(key);
      for (auto it = range.first; it != range.second; ++it) positions.push_back(it->second);
      waiting_definition_.erase(range.first, range.second);
      std::sort(positions.begin(), positions.end());
      for (const uint64_t p : positions) {
        Held held = Take(p);
        CaptureRecordView again;
        if (!ParseCaptureRecord(held.bytes, again).ok()) continue;  // it parsed when it came
        Add(p, key, held.bytes, again, held.prev, sink);
      }
    }
  };
  pass_one(position, source_key, record, prev);
  while (!links.empty()) {
    const auto waited = links.back();
    links.pop_back();
    const auto range = waiting_.equal_range(waited);
    std::vector<uint64_t> positions;
    for (auto it = range.first; it != range.second; ++it) positions.push_back(it->second);
    waiting_.erase(range.first, range.second);
    std::sort(positions.begin(), positions.end());
    for (const uint64_t p : positions) {
      Held held = Take(p);
      CaptureRecordView view;
      if (!ParseCaptureRecord(held.bytes, view).ok()) continue;
      pass_one(p, held.source_key, view, held.prev);
    }
  }
}

void RecordOrderer::ReleaseSource(uint64_t source_key, const Sink& sink) {
  std::set<uint64_t> positions;
  for (const auto& [position, held] : held_) {
    if (held.source_key == source_key) positions.insert(position);
  }
  std::erase_if(waiting_, [&](const auto& w) { return positions.count(w.second) != 0; });
  std::erase_if(waiting_definition_, [&](const auto& w) { return positions.count(w.second) != 0; });
  Source& source = At(source_key);
  source.defined = true;
  source.lenient = true;
  for (const uint64_t p : positions) {
    if (held_.count(p) == 0) continue;
    Held held = Take(p);
    ++stats_.released_early;
    CaptureRecordView view;
    if (!ParseCaptureRecord(held.bytes, view).ok()) continue;
    Pass(p, held.source_key, view, held.prev, sink);
  }
}

void RecordOrderer::ReleaseAll(const Sink& sink) {
  lenient_default_ = true;
  for (auto& [key, source] : sources_) {
    source.defined = true;
    source.lenient = true;
  }
  // Oldest first across sources: each source's records keep their arrival order.
  waiting_.clear();
  waiting_definition_.clear();
  while (!held_.empty()) {
    const uint64_t p = held_.begin()->first;
    Held held = Take(p);
    ++stats_.released_early;
    CaptureRecordView view;
    if (!ParseCaptureRecord(held.bytes, view).ok()) continue;
    Pass(p, held.source_key, view, held.prev, sink);
  }
}

}  // namespace kvindex
