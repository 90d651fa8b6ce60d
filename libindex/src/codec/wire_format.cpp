#include <string>

#include "kvindex/codec/event_codec.h"

namespace kvindex {

Result<WireFormat> ParseWireFormat(std::string_view name) {
  for (WireFormat f : {WireFormat::kVllmV09, WireFormat::kVllm, WireFormat::kVllmMap,
                       WireFormat::kSglang, WireFormat::kMooncake, WireFormat::kMooncakeSeed,
                       WireFormat::kSglangEagle, WireFormat::kTrtllm, WireFormat::kLmcache}) {
    if (name == WireFormatName(f)) return f;
  }
  return Status::InvalidArgument("unknown wire format '" + std::string(name) +
                                 "' (expected vllm-v0.9, vllm, vllm-map, sglang, mooncake, "
                                 "mooncake-seed, sglang-eagle, trtllm or lmcache)");
}

std::string_view WireFormatName(WireFormat format) {
  switch (format) {
    case WireFormat::kVllmV09:
      return "vllm-v0.9";
    case WireFormat::kVllm:
      return "vllm";
    case WireFormat::kVllmMap:
      return "vllm-map";
    case WireFormat::kSglang:
      return "sglang";
    case WireFormat::kMooncake:
      return "mooncake";
    case WireFormat::kMooncakeSeed:
      return "mooncake-seed";
    case WireFormat::kSglangEagle:
      return "sglang-eagle";
    case WireFormat::kTrtllm:
      return "trtllm";
    case WireFormat::kLmcache:
      return "lmcache";
  }
  return "vllm";
}

}  // namespace kvindex
