// The decoder's fast path for the common vLLM positional batch: a straight-line read through the
// msgpack-cxx token reader (token_reader.h) that takes one exact shape (vllm_fast_decoder.cpp
// lists it) and gives up at the first value outside it, so the general decoder (decoder.h)
// decodes everything else.
//
// Thread safety: a pure function of its arguments; distinct calls may run concurrently.
#ifndef KVINDEX_SRC_CODEC_VLLM_FAST_DECODER_H_
#define KVINDEX_SRC_CODEC_VLLM_FAST_DECODER_H_

#include <cstddef>
#include <span>

#include "kvindex/core/event.h"

namespace kvindex::codec_internal {

// True: `batch` holds exactly what the general decoder gives for `payload`. False: the payload is
// outside that shape and `batch` holds an unspecified (valid) value. DecodeEventBatchInto() tries
// it first when no format is asked for. `payload` is only borrowed for the call.
bool DecodeVllmFast(std::span<const std::byte> payload, EventBatch& batch);

}  // namespace kvindex::codec_internal

#endif  // KVINDEX_SRC_CODEC_VLLM_FAST_DECODER_H_
