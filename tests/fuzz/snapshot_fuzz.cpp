// Fuzz target for SnapshotReader: any bytes either fail with one clear line naming the input and a
// byte offset, or load; a loaded index snapshots again into bytes that load into the same
// presences. Inputs whose first byte is odd have every frame's
// checksum recomputed first (walking the frames by their lengths, docs/snapshot-format.md), so
// that mutations reach the frame decoders instead of stopping at the checksum. The bytes are fed
// in pieces whose sizes the second byte chooses. Seeds (corpus/snapshot/) are snapshots of small
// random indexes written by the C++ writer, with a mode byte prepended.
#include <xxhash.h>

#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "kvindex/index/index_state.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/snapshot/snapshot.h"

namespace {

// Rewrites each frame's checksum (XXH3-64 of the payload, seeded with the kind byte).
void FixChecksums(std::string& s) {
  size_t at = 16;
  while (at + 5 <= s.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
    const uint64_t len = p[1] | (uint64_t{p[2]} << 8) | (uint64_t{p[3]} << 16) |
                         (uint64_t{p[4]} << 24);
    if (at + 5 + len + 8 > s.size()) return;
    const uint64_t h = XXH3_64bits_withSeed(s.data() + at + 5, len, p[0]);
    for (int i = 0; i < 8; ++i) s[at + 5 + len + i] = static_cast<char>(h >> (8 * i));
    at += 5 + len + 8;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool fix = (data[0] & 1) != 0;
  const size_t piece = 1 + data[1] * 17u;
  std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  if (fix) FixChecksums(bytes);
  kvindex::PrefixIndex index;
  kvindex::SnapshotReader reader("fuzz.kvsnap", &index);
  kvindex::Status st;
  for (size_t at = 0; at < bytes.size() && st.ok(); at += piece) {
    st = reader.Feed(std::string_view(bytes).substr(at, piece));
  }
  if (st.ok()) {
    auto info = reader.Finish();
    if (!info.ok()) {
      st = info.status();
    } else {
      if (index.stats().presences != info->presences) {
        kvindex::fuzz::Violation("snapshot", "presences differ", "", bytes);
      }
      std::string again;
      auto n = kvindex::WriteSnapshot(index.CopyState(), info->seq, info->created_ns,
                                      [&](std::string_view c) {
                                        again.append(c);
                                        return true;
                                      });
      kvindex::PrefixIndex copy;
      kvindex::SnapshotReader reread("again", &copy);
      if (!n.ok() || !reread.Feed(again).ok() || !reread.Finish().ok() ||
          copy.stats().presences != info->presences) {
        kvindex::fuzz::Violation("snapshot", "a loaded snapshot does not write back", "", bytes);
      }
      return 0;
    }
  }
  const std::string& m = st.message();
  if (m.rfind("fuzz.kvsnap: byte ", 0) != 0 || !kvindex::fuzz::IsOneLine(m)) {
    kvindex::fuzz::Violation("snapshot", "unclear error", m, bytes);
  }
  return 0;
}
