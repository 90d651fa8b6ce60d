// KV-cache events as plain structs: what every wire format decodes into and encodes from.
//
// An EventBatch is one published message: a timestamp, an optional data-parallel rank, and events
// in order. Fields that only some formats carry are optional; absent means "not sent", and the
// source's configuration (model, block size, tenant, ...) then applies. The codec keeps what it
// needs to encode a batch back into the bytes its publisher sent (WireDetails); the index ignores
// those details.
//
// Vocabulary (one word per concept): a *block* is block_size tokens of a prompt; a *tier* is where
// it is held; wire names such as `medium` and `block_hashes` appear only in the codec.
//
// Thread safety: plain values.
#ifndef KVINDEX_CORE_EVENT_H_
#define KVINDEX_CORE_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvindex/core/block_hash.h"
#include "kvindex/core/instance.h"
#include "kvindex/core/status.h"

namespace kvindex {

// Per-event fields some formats carry that matter to scoping (Mooncake RFC #1527 maps carry all
// of them on every event; vLLM and SGLang carry a few). Absent = the source's configuration.
struct EventScopeFields {
  std::optional<std::string> model;
  std::optional<std::string> tenant;
  std::optional<std::string> salt;  // RFC additional_salt; the request's cache_salt
  std::optional<std::string> lora_name;
  std::optional<int64_t> lora_id;  // -1 or absent: no LoRA (scope.h)
  std::optional<uint32_t> block_size;
  std::optional<uint32_t> group;  // KV-cache group; absent = 0
  std::optional<DpRank> dp_rank;  // per-event rank (RFC); else the batch's

  friend bool operator==(const EventScopeFields&, const EventScopeFields&) = default;
};

// Fields kept only so that an event encodes back to the publisher's bytes; the index ignores
// them. The codec owns their meaning (docs/wire-formats.md).
struct WireDetails {
  std::optional<uint64_t> event_id;        // RFC event_id
  std::optional<int64_t> timestamp_ms;     // RFC per-event timestamp
  std::optional<std::string> backend_id;   // RFC backend_id
  std::optional<uint64_t> base_block_idx;  // RFC depth of the first block
  std::optional<std::string> object_key;   // RFC object_key / Mooncake store key
  std::optional<std::string> spec_kind;    // vLLM kv_cache_spec_kind
  std::optional<int64_t> sliding_window;   // vLLM kv_cache_spec_sliding_window
  std::optional<std::string> locality;     // vLLM locality
  std::optional<std::string> ownership;    // vLLM ownership
  std::optional<std::string> session_id;   // SGLang metadata / vLLM session_id
  std::optional<std::string> tier_spelling;  // the medium as sent, when it differs from name()
  // SGLang EAGLE: token_ids were sent as bigram pairs [[t0,t1],[t1,t2],...]; this is the second
  // item of the last pair (the token after the event's last block). Present exactly when the
  // event came as pairs; the event's token_ids hold the first item of every pair.
  std::optional<TokenId> eagle_next;
  // vLLM's skipped-context form (a sparse group's run of blocks after chunks it did not store):
  // the event's `parent` is skipped_parent_block_hash, its token_ids begin with
  // skipped_token_ids (block_offsets[0] chunks), and this is the parent_block_hash as sent (the
  // engine hash of the chunk just before the run, which the group never announced).
  bool skipped_context = false;
  std::optional<EngineHash> run_parent;
  // extra_keys were sent although they carry nothing kvindex keeps (nil entries, or the LoRA
  // name only); the encoder then writes them back.
  bool extra_keys_sent = false;
  // The multimodal keys came as TensorRT-LLM's mm_keys segments ({hash, start_offset} per block),
  // not in extra_keys.
  bool mm_keys = false;

  friend bool operator==(const WireDetails&, const WireDetails&) = default;
};

// Blocks were stored: block_hashes[i] holds token_ids[i*block_size, (i+1)*block_size).
struct BlockStored {
  std::vector<EngineHash> block_hashes;
  std::optional<EngineHash> parent;  // nullopt: the chain starts at the root (0 is a valid hash)
  std::vector<TokenId> token_ids;    // empty: a tokenless event (indexed by engine hash only)
  std::optional<Tier> tier;          // nullopt: no medium sent (an engine event -> GPU)
  EventScopeFields scope;
  // Empty, or one entry per block: the multimodal items touching that block.
  std::vector<std::vector<MultimodalKey>> multimodal;
  // True when block_hashes are already kvindex prefix hashes (RFC `hash=standard` sources).
  bool standard_hashes = false;
  // Empty (dense: block_hashes[i] holds chunk i of token_ids), or one entry per block hash: the
  // block_size chunk of token_ids that block_hashes[i] holds (vLLM block_offsets, sparse groups
  // such as Mamba in align mode). Strictly increasing.
  std::vector<uint32_t> block_offsets;
  // Sparse events only: empty, or one entry per chunk before block_offsets[0] (the chunks of
  // vLLM's skipped_token_ids): the multimodal items touching those chunks, which no block hash of
  // this event covers but which the chain runs through.
  std::vector<std::vector<MultimodalKey>> skipped_multimodal;
  WireDetails wire;

  friend bool operator==(const BlockStored&, const BlockStored&) = default;
};

// Blocks were evicted from one tier.
struct BlockRemoved {
  std::vector<EngineHash> block_hashes;
  std::optional<Tier> tier;  // nullopt: no medium sent (-> GPU)
  EventScopeFields scope;
  WireDetails wire;

  friend bool operator==(const BlockRemoved&, const BlockRemoved&) = default;
};

// Every block of the source was dropped (vLLM AllBlocksCleared, Mooncake RemoveAllEvent / cleared).
struct AllCleared {
  std::optional<Tier> tier;  // RFC may name one tier; nullopt = every tier
  EventScopeFields scope;
  WireDetails wire;

  friend bool operator==(const AllCleared&, const AllCleared&) = default;
};

// One replica of a Mooncake store object: its tier and where it lives (endpoint or file path).
struct Replica {
  Tier tier;
  std::string location;
  // The replica type as sent ("memory", "disk", "local_disk"), when it differs from tier.name();
  // kept so the seed format encodes back to the publisher's bytes (added by the codec).
  std::optional<std::string> tier_spelling = std::nullopt;
  friend bool operator==(const Replica&, const Replica&) = default;
};

// Mooncake store (seed era) BlockUpdateEvent: the object's *full current* replica set. A set
// without a tier removes that tier's presence; an empty set removes the object.
struct StoreUpdate {
  std::string key;
  std::vector<Replica> replicas;
  friend bool operator==(const StoreUpdate&, const StoreUpdate&) = default;
};

using Event = std::variant<BlockStored, BlockRemoved, AllCleared, StoreUpdate>;

// An event of a batch that failed to decode: its position in the batch and why. The other events
// of the batch are kept.
struct EventError {
  uint32_t index = 0;
  Status status;
  friend bool operator==(const EventError&, const EventError&) = default;
};

struct EventBatch {
  double ts = 0;                 // seconds, as sent (RFC milliseconds are divided by 1000)
  std::optional<DpRank> dp_rank;  // nullopt: not sent, or nil
  std::vector<Event> events;
  std::vector<EventError> errors;  // per-event failures, in order

  friend bool operator==(const EventBatch&, const EventBatch&) = default;
};

}  // namespace kvindex

#endif  // KVINDEX_CORE_EVENT_H_
