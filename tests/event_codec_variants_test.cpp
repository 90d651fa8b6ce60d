// The encoder's side of the publisher variants (docs/wire-formats.md): EAGLE bigram pairs,
// block_offsets and TensorRT-LLM's signed hashes go out only in the formats that carry them, and
// come back as they went. The bytes of each variant are checked against the python3-msgpack
// oracle's vectors in event_codec_test.cpp; this file checks what each format refuses.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/codec/event_codec.h"
#include "codec_test_util.h"

namespace kvindex {
namespace {

using test::ToHex;

TEST_CASE("EAGLE pairs and block_offsets travel only in the formats that carry them") {
  EventBatch batch;
  batch.ts = 1.5;
  BlockStored s;
  s.block_hashes = {EngineHash{1}, EngineHash{2}};
  s.token_ids = {5, 6, 7, 8};
  s.scope.block_size = 2;
  s.wire.eagle_next = 9;
  batch.events.push_back(s);
  std::vector<std::byte> out;
  // Pairs: sglang-eagle and vllm-map (SGLang's map era) write them, the others refuse.
  for (WireFormat f : {WireFormat::kSglangEagle, WireFormat::kVllmMap}) {
    CAPTURE(WireFormatName(f));
    REQUIRE(EncodeEventBatch(batch, f, out).ok());
    auto back = DecodeEventBatch(out);
    REQUIRE(back.ok());
    CHECK(back->events == batch.events);
  }
  for (WireFormat f : {WireFormat::kSglang, WireFormat::kVllm, WireFormat::kTrtllm,
                       WireFormat::kLmcache, WireFormat::kVllmV09, WireFormat::kMooncake}) {
    CAPTURE(WireFormatName(f));
    CHECK(EncodeEventBatch(batch, f, out).code() == StatusCode::kUnsupported);
  }
  // sglang-eagle needs the token after the last block.
  std::get<BlockStored>(batch.events[0]).wire.eagle_next.reset();
  CHECK(EncodeEventBatch(batch, WireFormat::kSglangEagle, out).code() ==
        StatusCode::kInvalidArgument);
  // block_offsets: the vLLM layouts (positional element 12, map key) only; TensorRT-LLM's
  // structs have no such field.
  std::get<BlockStored>(batch.events[0]).block_offsets = {0, 1};
  for (WireFormat f : {WireFormat::kVllm, WireFormat::kVllmMap, WireFormat::kLmcache}) {
    CAPTURE(WireFormatName(f));
    REQUIRE(EncodeEventBatch(batch, f, out).ok());
    auto back = DecodeEventBatch(out);
    REQUIRE(back.ok());
    CHECK(back->events == batch.events);
  }
  for (WireFormat f : {WireFormat::kSglang, WireFormat::kVllmV09, WireFormat::kTrtllm}) {
    CAPTURE(WireFormatName(f));
    CHECK(EncodeEventBatch(batch, f, out).code() == StatusCode::kUnsupported);
  }
  // trtllm writes a hash above 2^63 as a negative int64 (0xd3), vllm as a uint64 (0xcf).
  std::get<BlockStored>(batch.events[0]).block_hashes = {EngineHash{~uint64_t{0} - 1}};
  std::get<BlockStored>(batch.events[0]).block_offsets.clear();
  std::get<BlockStored>(batch.events[0]).token_ids = {5, 6};
  REQUIRE(EncodeEventBatch(batch, WireFormat::kTrtllm, out).ok());
  // A tagged map (0x8?), "block_hashes": [-2] as a negative fixint.
  CHECK(ToHex(out).find("ac626c6f636b5f68617368657391fe") != std::string::npos);
  CHECK(ToHex(out).find("a474797065ab426c6f636b53746f726564") != std::string::npos);
  REQUIRE(EncodeEventBatch(batch, WireFormat::kVllm, out).ok());
  CHECK(ToHex(out).find("91cffffffffffffffffe") != std::string::npos);
}

}  // namespace
}  // namespace kvindex
