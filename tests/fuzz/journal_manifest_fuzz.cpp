// Fuzz target for the journal snapshot manifest (nats/journal_snapshot.h): the text a replica
// reads from the snapshot stream before it trusts any chunk. Properties (a violation aborts):
//  - any bytes give a manifest or a kMalformed error, never a crash;
//  - an error is non-empty and one line;
//  - an accepted manifest's chunks add up to its size, there is at least one, none is empty or
//    larger than 1 MiB, and its encoding parses back into the same manifest.
//
// Corpus (tests/fuzz/corpus/journal_manifest/): manifests as the ingester writes them (one and
// several chunks, with and without sources and last links) and broken ones.
#include <cstdint>
#include <string>
#include <string_view>

#include "kvindex/nats/journal_snapshot.h"

#include "fuzz_check.h"

namespace {

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("journal_manifest_fuzz", what, detail, input);
}

bool Same(const kvindex::JournalSnapshotManifest& a, const kvindex::JournalSnapshotManifest& b) {
  if (a.id != b.id || a.covered_seq != b.covered_seq || a.bytes != b.bytes || a.xxh3 != b.xxh3 ||
      a.chunks.size() != b.chunks.size() || a.source_keys != b.source_keys ||
      a.last_links != b.last_links) {
    return false;
  }
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    if (a.chunks[i].seq != b.chunks[i].seq || a.chunks[i].bytes != b.chunks[i].bytes ||
        a.chunks[i].xxh3 != b.chunks[i].xxh3) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const kvindex::Result<kvindex::JournalSnapshotManifest> parsed =
      kvindex::ParseJournalSnapshotManifest(input);
  if (!parsed.ok()) {
    if (parsed.status().code() != kvindex::StatusCode::kMalformed) {
      Fail("unexpected error code", parsed.status().ToString(), input);
    }
    if (parsed.status().message().empty() || !kvindex::fuzz::IsOneLine(parsed.status().message())) {
      Fail("error is not one line", parsed.status().message(), input);
    }
    return 0;
  }
  uint64_t total = 0;
  for (const kvindex::JournalSnapshotChunk& chunk : parsed->chunks) {
    if (chunk.bytes == 0 || chunk.bytes > kvindex::kJournalSnapshotChunkBytes) {
      Fail("chunk size out of range", std::to_string(chunk.bytes), input);
    }
    total += chunk.bytes;
  }
  if (parsed->chunks.empty() || total != parsed->bytes) {
    Fail("chunks do not add up", std::to_string(total), input);
  }
  const std::string encoded = kvindex::EncodeJournalSnapshotManifest(*parsed);
  const kvindex::Result<kvindex::JournalSnapshotManifest> again =
      kvindex::ParseJournalSnapshotManifest(encoded);
  if (!again.ok() || !Same(*parsed, *again)) Fail("encoding does not parse back", encoded, input);
  return 0;
}
