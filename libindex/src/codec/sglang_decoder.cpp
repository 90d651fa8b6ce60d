// SGLang's addition to the positional and map events: the metadata map {cache_salt, session_id}
// (BlockStoredWithMetadata, SGLang main). The rest of an SGLang event reads as vLLM's
// (vllm_array_decoder.cpp, vllm_map_decoder.cpp); signed hashes mark its batches (Flags).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvindex/core/event.h"

#include "decoder.h"

namespace kvindex::codec_internal {

bool Decoder::ReadMetadata(std::optional<std::string>& salt, std::optional<std::string>& session) {
  if (r_.TryNil()) return true;
  uint32_t n;
  if (!r_.ReadMap(n)) return TypeFail("metadata", "map");
  flags_.sglang_metadata = true;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    if (r_.ReadStr(key)) {
      if (Eq(key, "cache_salt")) {
        if (!ReadOptStr("metadata.cache_salt", salt)) return false;
        continue;
      }
      if (Eq(key, "session_id")) {
        if (!ReadOptStr("metadata.session_id", session)) return false;
        continue;
      }
    } else if (!Skip("metadata", 5)) {
      return false;
    }
    if (!Skip("metadata", 5)) return false;
  }
  return true;
}

}  // namespace kvindex::codec_internal
