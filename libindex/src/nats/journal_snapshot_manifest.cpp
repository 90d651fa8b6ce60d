// The snapshot manifest's text (journal_snapshot.h):
//
//   kvindex-journal-snapshot 1
//   id <decimal>
//   covered_seq <decimal>
//   bytes <decimal>
//   xxh3 <16 hex digits>
//   chunk <seq> <bytes> <16 hex digits>     (one per chunk, in order)
//   source <16 hex digits>                  (one per snapshot source, in order)
//   last <position> <16 hex> <16 hex>       (a source's last batch record before the cut: its link
//                                           id and chained link id; positions increasing)
//   end
#include <charconv>
#include <cstdio>
#include <optional>

#include "kvindex/nats/journal_snapshot.h"

namespace kvindex {
namespace {

constexpr std::string_view kMagic = "kvindex-journal-snapshot 1";
constexpr size_t kMaxChunks = 1'000'000;
constexpr size_t kMaxSources = 65'536;

std::string Hex(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

// Splits off the next space-separated field of `line` into `field`.
bool NextField(std::string_view& line, std::string_view& field) {
  if (line.empty()) return false;
  const size_t space = line.find(' ');
  field = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return !field.empty();
}

bool ParseNumber(std::string_view text, uint64_t& out, int base) {
  if (text.empty() || (base == 16 && text.size() != 16)) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string JournalSnapshotStream(const std::string& stream) { return stream + "_SNAP"; }

std::string EncodeJournalSnapshotManifest(const JournalSnapshotManifest& m) {
  std::string out(kMagic);
  out += "\nid " + std::to_string(m.id) + "\ncovered_seq " + std::to_string(m.covered_seq) +
         "\nbytes " + std::to_string(m.bytes) + "\nxxh3 " + Hex(m.xxh3) + "\n";
  for (const JournalSnapshotChunk& c : m.chunks) {
    out +=
        "chunk " + std::to_string(c.seq) + " " + std::to_string(c.bytes) + " " + Hex(c.xxh3) + "\n";
  }
  for (const uint64_t key : m.source_keys) out += "source " + Hex(key) + "\n";
  for (size_t i = 0; i < m.last_links.size() && i < m.source_keys.size(); ++i) {
    if (!m.last_links[i]) continue;
    out += "last " + std::to_string(i) + " " + Hex(m.last_links[i]->link) + " " +
           Hex(m.last_links[i]->chained) + "\n";
  }
  out += "end\n";
  return out;
}

Result<JournalSnapshotManifest> ParseJournalSnapshotManifest(std::string_view text) {
  JournalSnapshotManifest m;
  size_t line_no = 0;
  bool ended = false;
  int fixed = 0;  // the fixed lines read (magic, id, covered_seq, bytes, xxh3)
  uint64_t chunk_total = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      return Status::Malformed("snapshot manifest: line " + std::to_string(line_no + 1) +
                               ": no line end");
    }
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    const auto bad = [line_no](std::string_view what) {
      return Status::Malformed("snapshot manifest: line " + std::to_string(line_no) + ": " +
                               std::string(what));
    };
    if (ended) return bad("text after 'end'");
    if (fixed == 0) {
      if (line != kMagic) return bad("not a kvindex journal snapshot manifest (version 1)");
      ++fixed;
      continue;
    }
    std::string_view key;
    if (!NextField(line, key)) return bad("empty line");
    static constexpr std::string_view kFixed[] = {"id", "covered_seq", "bytes", "xxh3"};
    if (fixed < 5) {
      uint64_t* const targets[] = {&m.id, &m.covered_seq, &m.bytes, &m.xxh3};
      std::string_view value;
      if (key != kFixed[fixed - 1] || !NextField(line, value) || !line.empty() ||
          !ParseNumber(value, *targets[fixed - 1], fixed == 4 ? 16 : 10)) {
        return bad("expected '" + std::string(kFixed[fixed - 1]) + " <value>'");
      }
      ++fixed;
      continue;
    }
    if (key == "chunk") {
      if (!m.source_keys.empty()) return bad("a chunk after the sources");
      if (m.chunks.size() >= kMaxChunks) return bad("too many chunks");
      JournalSnapshotChunk c;
      std::string_view seq, bytes, hash;
      if (!NextField(line, seq) || !NextField(line, bytes) || !NextField(line, hash) ||
          !line.empty() || !ParseNumber(seq, c.seq, 10) || !ParseNumber(bytes, c.bytes, 10) ||
          !ParseNumber(hash, c.xxh3, 16) || c.seq == 0 || c.bytes == 0 ||
          c.bytes > kJournalSnapshotChunkBytes) {
        return bad("expected 'chunk <seq> <1..1048576 bytes> <xxh3>'");
      }
      chunk_total += c.bytes;
      m.chunks.push_back(c);
    } else if (key == "source") {
      if (!m.last_links.empty()) return bad("a source after the last links");
      if (m.source_keys.size() >= kMaxSources) return bad("too many sources");
      std::string_view hash;
      uint64_t value = 0;
      if (!NextField(line, hash) || !line.empty() || !ParseNumber(hash, value, 16)) {
        return bad("expected 'source <key>'");
      }
      m.source_keys.push_back(value);
    } else if (key == "last") {
      std::string_view position, link, chained;
      uint64_t at = 0;
      JournalLink value;
      if (!NextField(line, position) || !NextField(line, link) || !NextField(line, chained) ||
          !line.empty() || !ParseNumber(position, at, 10) || !ParseNumber(link, value.link, 16) ||
          !ParseNumber(chained, value.chained, 16)) {
        return bad("expected 'last <position> <link> <chained>'");
      }
      if (at >= m.source_keys.size() || at < m.last_links.size()) {
        return bad("'last' for a source position not named, or not in increasing order");
      }
      m.last_links.resize(at + 1);
      m.last_links[at] = value;
    } else if (key == "end" && line.empty()) {
      ended = true;
    } else {
      return bad("unknown line");
    }
  }
  if (!ended) return Status::Malformed("snapshot manifest: no 'end' line");
  if (chunk_total != m.bytes || m.chunks.empty()) {
    return Status::Malformed("snapshot manifest: its chunks hold " + std::to_string(chunk_total) +
                             " bytes, not " + std::to_string(m.bytes));
  }
  return m;
}

}  // namespace kvindex
