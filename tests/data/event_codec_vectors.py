#!/usr/bin/python3
"""Independent test vectors for kvindex's event codec (docs/wire-formats.md).

Written from the format descriptions (docs/wire-formats.md and the publishers' own code) with
Debian's python3-msgpack and python3-xxhash; it shares no code with libindex. Each vector is a
payload as a publisher of that era writes it (msgpack.packb, which makes msgspec's choices:
narrowest ints, float64, str8) and the content kvindex must decode from it, already normalised by
this script's own rules:

  hashes: int -> u64 two's complement; bin -> last 8 bytes big-endian (shorter: zero-extended);
          str -> decimal / 0x hex, otherwise XXH3_64(seed 0) of the UTF-8 bytes
  tiers:  the table of docs/wire-formats.md "Tiers", case-insensitive; other names upper-cased;
          the spelling as sent is kept when it differs from the normalised name
  extra_keys: the LoRA name (first item, equal to lora_name), (mm id, offset) pairs and
          prompt-embeds digests ("embeds:<hex>", offset 0) become per-block multimodal keys
          (pairs first, then digests), any other string is the cache salt
          extra_keys sent with neither a salt nor a multimodal key (nil entries, the LoRA name
          alone) are remembered as wire "extra_keys_sent"
  vLLM skipped context (skipped_parent_block_hash, skipped_token_ids, skipped_extra_keys): the
          event becomes the sparse form: parent = skipped_parent_block_hash, token_ids = skipped
          tokens then the event's, block_offsets = k .. k+n-1 (k = skipped blocks), the skipped
          blocks' multimodal keys per skipped block, wire "skipped_context" and "run_parent" (the
          parent_block_hash as sent); "extra_keys_sent" when extra_keys came without
          multimodal keys
  TensorRT-LLM mm_keys: per block the segments' (hash, start_offset) are the multimodal keys,
          wire "mm_keys"; a segment's uuid is not kept
  Mooncake RFC: ts milliseconds / 1000; event_type wins over type; seq_hashes over block_hashes

`encode` names the format whose encoder must reproduce the payload byte for byte (absent when
the payload is not in the encoder's canonical layout). Prints event_codec_vectors.json on stdout
(regenerate: scripts/regen-vectors.sh); the binary fuzz corpus is written by --corpus DIR.
"""
import json
import struct
import sys

import msgpack
import xxhash

U64 = (1 << 64) - 1

TIERS = {
    "gpu": "GPU", "npu": "GPU", "cuda": "GPU", "device": "GPU",
    "cpu": "CPU", "host": "CPU", "memory": "CPU", "cpu_pinned": "CPU",
    "disk": "DISK", "ssd": "DISK", "local_disk": "DISK", "storage": "DISK", "external": "DISK",
    "fs": "DISK", "shared_storage": "DISK",
}


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def norm_hash(v):
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, int):
        return v & U64
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(bytes(v)[-8:], "big")
    if isinstance(v, str):
        s = v
        if len(s) > 2 and s[:2] in ("0x", "0X"):
            digits = s[2:]
            if len(digits) <= 16 and all(c in "0123456789abcdefABCDEF" for c in digits):
                return int(digits, 16)
        else:
            body = s[1:] if s.startswith("-") else s
            if body and len(body) <= 20 and all(c in "0123456789" for c in body):
                n = int(s)
                if -(1 << 63) <= n <= U64:
                    return n & U64
        return xxhash.xxh3_64_intdigest(s.encode(), seed=0)
    raise ValueError(v)


def tier(spelling):
    """Returns (tier name, spelling kept or None)."""
    if spelling is None:
        return None, None
    name = TIERS.get(spelling.lower(), spelling.upper())
    return name, (spelling if spelling != name else None)


def stored(hashes, parent, tokens, medium=None, scope=None, wire=None, multimodal=None,
           block_offsets=None, skipped_multimodal=None):
    t, sp = tier(medium)
    w = dict(wire or {})
    if sp is not None:
        w["tier_spelling"] = sp
    if w.get("run_parent") is not None:
        w["run_parent"] = norm_hash(w["run_parent"])
    return {"kind": "stored", "block_hashes": [norm_hash(h) for h in hashes],
            "parent": None if parent is None else norm_hash(parent), "token_ids": tokens,
            "tier": t, "scope": scope or {}, "wire": w, "multimodal": multimodal or [],
            "block_offsets": block_offsets or [],
            "skipped_multimodal": skipped_multimodal or []}


def bigrams(tokens, following):
    """SGLang EAGLE's token_ids: each token paired with the next, the last with `following`."""
    nxt = tokens[1:] + [following]
    return [[a, b] for a, b in zip(tokens, nxt)]


def unbigram(pairs):
    """The plain tokens of bigram pairs (first of each pair) and the token after the last block
    (the last pair's second); the pairs must chain."""
    for a, b in zip(pairs, pairs[1:]):
        assert a[1] == b[0], (a, b)
    return [p[0] for p in pairs], pairs[-1][1]


def removed(hashes, medium=None, scope=None, wire=None):
    t, sp = tier(medium)
    w = dict(wire or {})
    if sp is not None:
        w["tier_spelling"] = sp
    return {"kind": "removed", "block_hashes": [norm_hash(h) for h in hashes], "tier": t,
            "scope": scope or {}, "wire": w}


def cleared(medium=None, scope=None, wire=None):
    t, sp = tier(medium)
    w = dict(wire or {})
    if sp is not None:
        w["tier_spelling"] = sp
    return {"kind": "cleared", "tier": t, "scope": scope or {}, "wire": w}


def update(key, replicas):
    out = []
    for typ, loc in replicas:
        name, sp = tier(typ)
        out.append({"tier": name, "location": loc, "tier_spelling": sp})
    return {"kind": "update", "key": key, "replicas": out}


VECTORS = []


def vec(name, era, payload_obj, expect, encode=None, hint="auto", raw=None):
    payload = raw if raw is not None else pack(payload_obj)
    v = {"name": name, "era": era, "hint": hint, "payload_hex": payload.hex(), "expect": expect}
    if encode:
        v["encode"] = encode
    VECTORS.append(v)


def batch(ts, events, dp_rank=None, errors=None):
    return {"ts": ts, "dp_rank": dp_rank, "events": events, "errors": errors or []}


TS = 1750000000.5
TOK8 = list(range(1, 9))

# ---- vLLM positional ---------------------------------------------------------------------
vec("vllm v0.9: [ts, events], 6-element BlockStored, 2-element BlockRemoved", "vllm-positional",
    [TS, [["BlockStored", [2**64 - 1, 5], None, TOK8, 4, None],
          ["BlockRemoved", [5]], ["AllBlocksCleared"]]],
    batch(TS, [stored([2**64 - 1, 5], None, TOK8, scope={"block_size": 4}),
               removed([5]), cleared()]),
    encode="vllm-v0.9")

vec("vllm v0.9.1: rank added, events still 6 fields", "vllm-positional",
    [TS, [["BlockStored", [7], 3, [1, 2, 3, 4], 4, 2]], 0],
    batch(TS, [stored([7], 3, [1, 2, 3, 4], scope={"block_size": 4, "lora_id": 2})], dp_rank=0))

vec("vllm medium era: 7-element BlockStored, 3-element BlockRemoved", "vllm-positional",
    [TS, [["BlockStored", [2**63], None, [9, 9, 9, 9], 4, None, "CPU"],
          ["BlockRemoved", [2**63], "CPU"]], 1],
    batch(TS, [stored([2**63], None, [9, 9, 9, 9], "CPU", scope={"block_size": 4}),
               removed([2**63], "CPU")], dp_rank=1))

vec("vllm lora_name era: 8 fields, STORAGE medium, nil rank", "vllm-positional",
    [TS, [["BlockStored", [11, 12], 10, TOK8, 4, 3, "STORAGE", "adapter-a"]], None],
    batch(TS, [stored([11, 12], 10, TOK8, "STORAGE",
                      scope={"block_size": 4, "lora_id": 3, "lora_name": "adapter-a"})]))

EMB = bytes(range(32))
vec("vllm full array era: 12 fields with raw extra_keys, group, spec; 4-element BlockRemoved",
    "vllm-positional",
    [TS, [["BlockStored", [21, 22], None, TOK8, 4, 1, "GPU", "adapter-a",
           [["adapter-a", ["img-0001", 2], "tenant-1", EMB], ["adapter-a", ["img-0001", -2]]],
           1, "sliding_window", 128],
          ["BlockRemoved", [21], "GPU", 1], ["AllBlocksCleared"]], 2],
    batch(TS, [stored([21, 22], None, TOK8, "GPU",
                      scope={"block_size": 4, "lora_id": 1, "lora_name": "adapter-a",
                             "salt": "tenant-1", "group": 1},
                      wire={"spec_kind": "sliding_window", "sliding_window": 128},
                      multimodal=[[["img-0001", 2], ["embeds:" + EMB.hex(), 0]],
                                  [["img-0001", -2]]]),
               removed([21], "GPU", scope={"group": 1}), cleared()], dp_rank=2),
    encode="vllm")

vec("vllm full array era without optional values: every trailing field nil", "vllm-positional",
    [TS, [["BlockStored", [1], None, [1, 2], 2, None, None, None, None, None, None, None],
          ["BlockRemoved", [1], None, None]], None],
    batch(TS, [stored([1], None, [1, 2], scope={"block_size": 2}), removed([1])]),
    encode="vllm")

D32 = bytes.fromhex("71f40f563a7a259f47b9267c311bf00d383743b642efb532825c8227cad5456f")
D16 = bytes.fromhex("00112233445566778899aabbccddeeff")
vec("vllm bytes hashes (INT_BLOCK_HASHES=0): 32- and 16-byte digests, short bin", "vllm-positional",
    [TS, [["BlockStored", [D32, D16, b"\x01\x02"], D16, [5, 6, 7, 8, 9, 10], 2, None, "GPU",
           None]], 0],
    batch(TS, [stored([D32, D16, b"\x01\x02"], D16, [5, 6, 7, 8, 9, 10], "GPU",
                      scope={"block_size": 2})], dp_rank=0))

vec("vllm: extra trailing elements and extra batch elements are skipped", "vllm-positional",
    [TS, [["BlockStored", [4], None, [1], 1, None, "GPU", None, None, None, None, None, None,
           "future-1", {"x": [1, 2]}], ["BlockRemoved", [4], "GPU", None, "future"],
          ["AllBlocksCleared", 1]], 0, "future-batch-field"],
    batch(TS, [stored([4], None, [1], "GPU", scope={"block_size": 1}), removed([4], "GPU"),
               cleared()], dp_rank=0))

vec("vllm: hashes as strings (decimal, 0x hex, other text hashed with XXH3-64 seed 0)",
    "vllm-positional",
    [TS, [["BlockStored", ["12345", "0xdeadBEEF", "-1", "block-a"], "0x10", TOK8, 2, None]]],
    batch(TS, [stored(["12345", "0xdeadBEEF", "-1", "block-a"], "0x10", TOK8,
                      scope={"block_size": 2})]))

vec("tier spellings: the tier table, case-insensitive, unknown kept upper-cased", "vllm-positional",
    [TS, [["BlockRemoved", [1], s] for s in
          ["NPU", "cuda", "device", "host", "memory", "CPU_PINNED", "ssd", "local_disk",
           "EXTERNAL", "disk", "hbm"]], 0],
    batch(TS, [removed([1], s) for s in
               ["NPU", "cuda", "device", "host", "memory", "CPU_PINNED", "ssd", "local_disk",
                "EXTERNAL", "disk", "hbm"]], dp_rank=0))

# ---- vLLM tagged maps ----------------------------------------------------------------------
MAP_STORED = {"type": "BlockStored",
              "block_hashes": [9393526030206322031, 3674898810425443572, 7413919842396377344,
                               16893335080673815775],
              "parent_block_hash": None, "token_ids": list(range(100, 116)), "block_size": 4,
              "lora_id": None, "medium": "GPU", "lora_name": None}
vec("vllm map era (>= 0.24): an annotated capture of real map-era bytes", "vllm-map",
    [1750000000.0, [MAP_STORED], 0],
    batch(1750000000.0, [stored(MAP_STORED["block_hashes"], None, list(range(100, 116)), "GPU",
                                scope={"block_size": 4})], dp_rank=0),
    encode="vllm-map")

vec("vllm map era: BlockRemoved medium nil, AllBlocksCleared, optional fields set",
    "vllm-map",
    [TS, [{"type": "BlockStored", "block_hashes": [1, 2], "parent_block_hash": 2**64 - 1,
           "token_ids": TOK8, "block_size": 4, "lora_id": 5, "medium": "CPU",
           "lora_name": "lx", "extra_keys": [["lx", ["img", 0], "salt-1"], ["lx"]],
           "group_idx": 2, "kv_cache_spec_kind": "full_attention",
           "kv_cache_spec_sliding_window": 4096, "locality": "LOCAL", "ownership": "OWNED",
           "session_id": "sess-9"},
          {"type": "BlockRemoved", "block_hashes": [7, 2**63 + 1], "medium": None},
          {"type": "BlockRemoved", "block_hashes": [1], "medium": "CPU", "group_idx": 2,
           "locality": "REMOTE", "ownership": "SHARED"},
          {"type": "AllBlocksCleared"}], 3],
    batch(TS, [stored([1, 2], 2**64 - 1, TOK8, "CPU",
                      scope={"block_size": 4, "lora_id": 5, "lora_name": "lx",
                             "salt": "salt-1", "group": 2},
                      wire={"spec_kind": "full_attention", "sliding_window": 4096,
                            "locality": "LOCAL", "ownership": "OWNED", "session_id": "sess-9"},
                      multimodal=[[["img", 0]], []]),
               removed([7, 2**63 + 1]),
               removed([1], "CPU", scope={"group": 2},
                       wire={"locality": "REMOTE", "ownership": "SHARED"}),
               cleared()], dp_rank=3),
    encode="vllm-map")

vec("vllm map era: typed extra_keys (#55488), keys out of order, unknown keys skipped",
    "vllm-map",
    [TS, [{"block_size": 4, "token_ids": [1, 2, 3, 4], "type": "BlockStored",
           "event_version": 1, "future_key": {"nested": [1, [2, [3]]]},
           "block_hashes": [77], "parent_block_hash": None, "lora_id": None, "medium": "GPU",
           "lora_name": None,
           "extra_keys": [[{"type": "lora", "name": "typed-lora"},
                           {"type": "mm", "modality": "image", "hash": "img-7",
                            "block_offset": 1},
                           {"type": "cache_salt", "salt": "s-typed"},
                           {"type": "prompt_embeds", "hash": b"\xab\xcd"},
                           {"type": "legacy", "value": 5}]]}], 0],
    batch(TS, [stored([77], None, [1, 2, 3, 4], "GPU",
                      scope={"block_size": 4, "lora_name": "typed-lora", "salt": "s-typed"},
                      multimodal=[[["img-7", 1], ["embeds:abcd", 0]]])], dp_rank=0))

vec("vllm map batch (intermediate commit): {ts, events, data_parallel_rank}", "vllm-map",
    {"ts": TS, "events": [{"type": "AllBlocksCleared"},
                          {"type": "BlockRemoved", "block_hashes": [3], "medium": "GPU"}],
     "data_parallel_rank": 4},
    batch(TS, [cleared(), removed([3], "GPU")], dp_rank=4))

# ---- SGLang --------------------------------------------------------------------------------
vec("sglang early: 2-element batch, 6-element BlockStored, signed hashes", "sglang",
    [TS, [["BlockStored", [-1, -(2**63), 2**63 - 1], -2, TOK8[:6], 2, None],
          ["BlockRemoved", [-1]]]],
    batch(TS, [stored([-1, -(2**63), 2**63 - 1], -2, TOK8[:6], scope={"block_size": 2}),
               removed([-1])]),
    encode="sglang", hint="sglang")

vec("sglang with medium: 7-element BlockStored, attn_dp_rank", "sglang",
    [TS, [["BlockStored", [-5], None, [1], 1, None, "CPU_PINNED"],
          ["BlockRemoved", [-5], "CPU_PINNED"], ["AllBlocksCleared"]], 1],
    batch(TS, [stored([-5], None, [1], "CPU_PINNED", scope={"block_size": 1}),
               removed([-5], "CPU_PINNED"), cleared()], dp_rank=1),
    encode="sglang", hint="sglang")

vec("sglang BlockStoredWithMetadata: 8th element {cache_salt, session_id}", "sglang",
    [TS, [["BlockStored", [-300, 300], -7, [4, 5, 6, 7], 2, None, "GPU",
           {"cache_salt": "salt-z", "session_id": "chat-1"}]], 0],
    batch(TS, [stored([-300, 300], -7, [4, 5, 6, 7], "GPU",
                      scope={"block_size": 2, "salt": "salt-z"},
                      wire={"session_id": "chat-1"})], dp_rank=0),
    encode="sglang", hint="sglang")

vec("sglang newest: tagged maps with metadata", "sglang",
    [TS, [{"type": "BlockStored", "block_hashes": [-9], "parent_block_hash": None,
           "token_ids": [1, 2], "block_size": 2, "lora_id": None, "medium": "GPU",
           "metadata": {"cache_salt": "m-salt"}}], 0],
    batch(TS, [stored([-9], None, [1, 2], "GPU", scope={"block_size": 2, "salt": "m-salt"})],
          dp_rank=0),
    hint="sglang")


# ---- SGLang EAGLE (bigram token_ids) ------------------------------------------------------
EAGLE_PAIRS = bigrams([11, 12, 13, 14], 15)
EAGLE_TOKENS, EAGLE_NEXT = unbigram(EAGLE_PAIRS)
vec("sglang eagle: token_ids as bigram pairs, hashed over block_size + 1 tokens", "sglang-eagle",
    [TS, [["BlockStored", [-41, 42], None, EAGLE_PAIRS, 2, None, "GPU"],
          ["BlockRemoved", [-41], "GPU"]], 0],
    batch(TS, [stored([-41, 42], None, EAGLE_TOKENS, "GPU", scope={"block_size": 2},
                      wire={"eagle_next": EAGLE_NEXT}),
               removed([-41], "GPU")], dp_rank=0),
    encode="sglang-eagle", hint="sglang-eagle")

vec("sglang eagle: bigram pairs in the map era, with metadata", "sglang-eagle",
    [TS, [{"type": "BlockStored", "block_hashes": [-43], "parent_block_hash": -41,
           "token_ids": bigrams([21, 22], 23), "block_size": 2, "lora_id": None,
           "medium": "GPU", "metadata": {"cache_salt": "eagle-salt"}}], 0],
    batch(TS, [stored([-43], -41, [21, 22], "GPU", scope={"block_size": 2, "salt": "eagle-salt"},
                      wire={"eagle_next": 23})], dp_rank=0),
    hint="sglang")

vec("sglang eagle: broken pairs fail alone (malformed)", "errors",
    [TS, [["BlockStored", [1], None, [[1, 2], [3, 4]], 2, None],
          ["BlockStored", [2], None, [[1, 2, 3]], 1, None],
          ["BlockStored", [3], None, [[1, 2], 3], 2, None],
          ["BlockRemoved", [4]]]],
    batch(TS, [removed([4])], errors=[{"index": 0, "code": "malformed"},
                                      {"index": 1, "code": "malformed"},
                                      {"index": 2, "code": "malformed"}]))

# ---- vLLM hybrid models (KV-cache groups, sparse groups) ---------------------------------
vec("vllm hybrid: sliding-window group with block_offsets (13-element BlockStored)",
    "vllm-hybrid",
    [TS, [["BlockStored", [501, 502], None, TOK8, 2, None, "GPU", None, None, 0,
           "full_attention", None],
          ["BlockStored", [601, 602], None, TOK8, 2, None, "GPU", None, None, 1,
           "sliding_window", 4, [1, 3]],
          ["BlockRemoved", [601], "GPU", 1]], 0],
    batch(TS, [stored([501, 502], None, TOK8, "GPU", scope={"block_size": 2, "group": 0},
                      wire={"spec_kind": "full_attention"}),
               stored([601, 602], None, TOK8, "GPU", scope={"block_size": 2, "group": 1},
                      wire={"spec_kind": "sliding_window", "sliding_window": 4},
                      block_offsets=[1, 3]),
               removed([601], "GPU", scope={"group": 1})], dp_rank=0))

vec("vllm hybrid map era: a Mamba group's sparse event with block_offsets", "vllm-hybrid",
    [TS, [{"type": "BlockStored", "block_hashes": [701], "parent_block_hash": None,
           "token_ids": TOK8, "block_size": 4, "lora_id": None, "medium": "GPU",
           "lora_name": None, "group_idx": 2, "kv_cache_spec_kind": "mamba",
           "block_offsets": [1]}], 0],
    batch(TS, [stored([701], None, TOK8, "GPU", scope={"block_size": 4, "group": 2},
                      wire={"spec_kind": "mamba"}, block_offsets=[1])], dp_rank=0),
    encode="vllm-map")

def map_stored(hashes, parent, tokens, block_size, **extra):
    """A map-era BlockStored (vLLM's, TensorRT-LLM's): required keys, then the set ones in order."""
    e = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
         "token_ids": tokens, "block_size": block_size, "lora_id": None, "medium": "GPU",
         "lora_name": None}
    e.update(extra)
    return e


def hybrid(hashes, parent, tokens, group, offsets=None):
    """A hybrid model's map BlockStored (block size 2) in group 0 (full attention) or 1 (Mamba),
    and the content kvindex decodes from it."""
    spec = "mamba" if group else "full_attention"
    extra = {"group_idx": group, "kv_cache_spec_kind": spec}
    if offsets is not None:
        extra["block_offsets"] = offsets
    return (map_stored(hashes, parent, tokens, 2, **extra),
            stored(hashes, parent, tokens, "GPU", scope={"block_size": 2, "group": group},
                   wire={"spec_kind": spec}, block_offsets=offsets))


def hybrid_removed(hashes, group):
    return ({"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU", "group_idx": group},
            removed(hashes, "GPU", scope={"group": group}))


# publish-fake --format vllm-hybrid-sparse: group 0 stores chunks 0-3 (block size 2); the Mamba
# group 1 hashes chunks 0, 1 and 3 (not 2: every third chunk is skipped, a run's last chunk is
# always hashed). Chunk 3 is evicted from both groups; storing chunks 3-4 again, group 1 continues
# from chunk 1, the last chunk it still holds: its token_ids start at chunk 2, offsets 1 and 2.
SPARSE = [hybrid([901, 902, 903, 904], None, TOK8, 0),
          hybrid([911, 912, 914], None, TOK8, 1, [0, 1, 3]),
          hybrid_removed([904], 0), hybrid_removed([914], 1),
          hybrid([904, 905], 903, [7, 8, 9, 10], 0),
          hybrid([914, 915], 912, [5, 6, 7, 8, 9, 10], 1, [1, 2])]
vec("vllm hybrid sparse map era: full-attention group 0 and a Mamba group 1 with block_offsets",
    "vllm-hybrid", [TS, [w for w, _ in SPARSE], 0],
    batch(TS, [e for _, e in SPARSE], dp_rank=0), encode="vllm-map")


def skipped_run(hashes, run_parent, tokens, skipped_parent, skipped_tokens, skipped_extra,
                extra, group=1, salt=None, skipped_mm=None):
    """A vLLM BlockStored in the skipped-context form (vllm-project/vllm PR #44488, block size 2,
    a Mamba group) and the sparse event kvindex decodes from it."""
    fields = {} if extra is None else {"extra_keys": extra}  # declaration order
    fields.update(group_idx=group, kv_cache_spec_kind="mamba")
    if skipped_parent is not None:
        fields["skipped_parent_block_hash"] = skipped_parent
    fields["skipped_token_ids"] = skipped_tokens
    fields["skipped_extra_keys"] = skipped_extra
    k = len(skipped_tokens) // 2
    scope = {"block_size": 2, "group": group}
    if salt is not None:
        scope["salt"] = salt
    wire = {"spec_kind": "mamba", "skipped_context": True, "run_parent": run_parent}
    if extra is not None:
        wire["extra_keys_sent"] = True
    return (map_stored(hashes, run_parent, tokens, 2, **fields),
            stored(hashes, skipped_parent, skipped_tokens + tokens, "GPU", scope=scope, wire=wire,
                   block_offsets=list(range(k, k + len(hashes))), skipped_multimodal=skipped_mm))


# A Mamba group (align mode) stores chunk 0 of TOK8, then chunk 3: chunks 1 and 2 were never
# announced, so the second event's skipped context starts after chunk 0 (its skipped parent) and
# its parent_block_hash is chunk 2's hash. vLLM sends extra_keys as a list of nils.
SKIPPED = [(map_stored([921], None, [1, 2], 2, extra_keys=[None], group_idx=1,
                       kv_cache_spec_kind="mamba"),
            stored([921], None, [1, 2], "GPU", scope={"block_size": 2, "group": 1},
                   wire={"spec_kind": "mamba", "extra_keys_sent": True})),
           skipped_run([924], 923, [7, 8], 921, [3, 4, 5, 6], [None, None], [None])]
vec("vllm skipped context: a sparse group's run after chunks it did not announce",
    "vllm-hybrid", [TS, [w for w, _ in SKIPPED], 0],
    batch(TS, [e for _, e in SKIPPED], dp_rank=0), encode="vllm-map")

# From the root: the salt is in the first skipped block's extra keys, an image in the second's.
w_salted, e_salted = skipped_run([933, 934], 932, [5, 6, 7, 8], None, [1, 2, 3, 4],
                                 [["tenant"], [["img", 1]]], [None, None], salt="tenant",
                                 skipped_mm=[[], [["img", 1]]])
vec("vllm skipped context from the root: salt and multimodal keys of the skipped blocks",
    "vllm-hybrid", [TS, [w_salted], 0], batch(TS, [e_salted], dp_rank=0), encode="vllm-map")

vec("vllm skipped context: not whole blocks, wrong extra-key count, no tokens, with offsets",
    "errors",
    [TS, [map_stored([1], 9, [5, 6], 2, skipped_token_ids=[1, 2, 3],
                     skipped_extra_keys=[None, None]),
          map_stored([1], 9, [5, 6], 2, skipped_token_ids=[1, 2], skipped_extra_keys=[None] * 2),
          map_stored([1], 9, [5, 6], 2, skipped_parent_block_hash=7),
          map_stored([1], 9, [3, 4, 5, 6], 2, block_offsets=[1], skipped_token_ids=[1, 2]),
          {"type": "BlockRemoved", "block_hashes": [9], "medium": "GPU"}], 0],
    batch(TS, [removed([9], "GPU")], dp_rank=0,
          errors=[{"index": 0, "code": "unsupported"}, {"index": 1, "code": "malformed"},
                  {"index": 2, "code": "malformed"}, {"index": 3, "code": "malformed"}]))

vec("vllm hybrid: block_offsets not one per hash, or not increasing, fail alone", "errors",
    [TS, [["BlockStored", [1, 2], None, TOK8, 4, None, "GPU", None, None, 1, None, None, [1]],
          ["BlockStored", [1, 2], None, TOK8, 2, None, "GPU", None, None, 1, None, None,
           [2, 2]],
          ["BlockRemoved", [9]]], 0],
    batch(TS, [removed([9])], dp_rank=0, errors=[{"index": 0, "code": "malformed"},
                                                 {"index": 1, "code": "malformed"}]))

# ---- TensorRT-LLM native publisher and LMCache's connector -------------------------------
# TensorRT-LLM's KVCacheWireEvent structs are tagged maps (msgspec tag=True, not array_like,
# omit_defaults): "type" first, then the fields in declaration order, the ones with defaults only
# when set; the batch is positional with the rank. Hashes are signed int64.
vec("trtllm native publisher: tagged map events, signed int64 hashes", "trtllm",
    [TS, [map_stored([-2**63, -7], None, TOK8, 4),
          map_stored([-8], -7, [9, 10, 11, 12], 4, group_idx=0, locality="LOCAL"),
          {"type": "BlockRemoved", "block_hashes": [-7, -8], "medium": "GPU"},
          {"type": "AllBlocksCleared"}], 1],
    batch(TS, [stored([-2**63, -7], None, TOK8, "GPU", scope={"block_size": 4}),
               stored([-8], -7, [9, 10, 11, 12], "GPU", scope={"block_size": 4, "group": 0},
                      wire={"locality": "LOCAL"}),
               removed([-7, -8], "GPU"), cleared()], dp_rank=1),
    encode="trtllm", hint="trtllm")

vec("trtllm native publisher: a removal and a clear", "trtllm",
    [TS, [{"type": "BlockRemoved", "block_hashes": [-7, -8], "medium": "GPU"},
          {"type": "AllBlocksCleared"}], 1],
    batch(TS, [removed([-7, -8], "GPU"), cleared()], dp_rank=1),
    encode="trtllm", hint="trtllm")

def mm_key(h, offset, **more):
    return dict({"type": "mm_key", "hash": h, "start_offset": offset}, **more)


vec("trtllm native publisher: mm_keys segments are the blocks' multimodal keys", "trtllm",
    [TS, [map_stored([-5, -6], None, TOK8, 4, mm_keys=[[mm_key("ab12", 1)],
                                                       [mm_key("cd34", 0), mm_key("ef56", 2)]]),
          map_stored([-7], -6, [9, 10, 11, 12], 4, mm_keys=[[mm_key("ef56", 0)]])], 1],
    batch(TS, [stored([-5, -6], None, TOK8, "GPU", scope={"block_size": 4},
                      wire={"mm_keys": True},
                      multimodal=[[["ab12", 1]], [["cd34", 0], ["ef56", 2]]]),
               stored([-7], -6, [9, 10, 11, 12], "GPU", scope={"block_size": 4},
                      wire={"mm_keys": True}, multimodal=[[["ef56", 0]]])], dp_rank=1),
    encode="trtllm", hint="trtllm")

vec("trtllm native publisher: mm_keys uuids are not kept, empty lists and nil carry nothing, "
    "a wrong count or a segment without hash fails alone", "errors",
    [TS, [map_stored([-5], None, [1, 2, 3, 4], 4, mm_keys=[[mm_key("ab12", 1, uuid="img-a")]]),
          map_stored([-6], None, [5, 6, 7, 8], 4, mm_keys=[[]]),
          map_stored([-7], None, [9, 10, 11, 12], 4, mm_keys=None),
          map_stored([-8], None, [1, 2, 3, 4], 4, mm_keys=[[mm_key("ab12", 1)], []]),
          map_stored([-9], None, [1, 2, 3, 4], 4, mm_keys=[[{"type": "mm_key",
                                                             "start_offset": 1}]])], 1],
    batch(TS, [stored([-5], None, [1, 2, 3, 4], "GPU", scope={"block_size": 4},
                      wire={"mm_keys": True}, multimodal=[[["ab12", 1]]]),
               stored([-6], None, [5, 6, 7, 8], "GPU", scope={"block_size": 4}),
               stored([-7], None, [9, 10, 11, 12], "GPU", scope={"block_size": 4})], dp_rank=1,
          errors=[{"index": 3, "code": "malformed"}, {"index": 4, "code": "malformed"}]),
    hint="trtllm")

vec("lmcache connector: vllm positional BlockStored of a whole chunk, medium CPU", "lmcache",
    [TS, [["BlockStored", [801, 802], None, TOK8, 4, None, "CPU", None, None, None, None,
           None]], 0],
    batch(TS, [stored([801, 802], None, TOK8, "CPU", scope={"block_size": 4})], dp_rank=0),
    encode="lmcache", hint="vllm")

vec("new media: FS and SHARED_STORAGE are DISK, OBJ and unknown names are their own tier",
    "vllm-positional",
    [TS, [["BlockRemoved", [1], s] for s in ["FS", "SHARED_STORAGE", "OBJ", "cxl"]], 0],
    batch(TS, [removed([1], s) for s in ["FS", "SHARED_STORAGE", "OBJ", "cxl"]], dp_rank=0))

# ---- Mooncake RFC #1527 --------------------------------------------------------------------


def rfc_event(event_type, legacy, hashes=None, parent=None, tokens=None, medium="cpu",
              event_id=1, key=None, **over):
    m = {"event_id": event_id, "timestamp": 1750000000123, "event_type": event_type,
         "type": legacy, "model_name": "qwen", "block_size": 16, "additional_salt": None,
         "lora_name": None, "tenant_id": "default", "backend_id": "store-0", "group_id": None,
         "medium": medium, "dp_rank": None, "object_key": key,
         "seq_hashes": hashes,
         "block_hashes": None if hashes is None else [h - (1 << 64) if h >= 1 << 63 else h
                                                       for h in hashes],
         "base_block_idx": 0, "parent_hash": parent, "token_ids": tokens,
         "parent_block_hash": parent}
    m.update(over)
    return m


RFC_SCOPE = {"model": "qwen", "block_size": 16, "tenant": "default"}
RFC_WIRE = {"event_id": 1, "timestamp_ms": 1750000000123, "backend_id": "store-0",
            "base_block_idx": 0}
vec("mooncake RFC #1527: [ts_ms, [maps], dp_rank], every key of the store publisher",
    "mooncake-rfc",
    [1750000000123, [rfc_event("stored", "BlockStored", [2**64 - 2, 42], key="0xfffffffffffffffe"),
                     rfc_event("removed", "BlockRemoved", [42], medium="disk", event_id=2)], 0],
    batch(1750000000.123,
          [stored([2**64 - 2, 42], None, [], "cpu", scope=RFC_SCOPE,
                  wire=dict(RFC_WIRE, object_key="0xfffffffffffffffe")),
           removed([42], "disk", scope=RFC_SCOPE, wire=dict(RFC_WIRE, event_id=2))], dp_rank=0),
    encode="mooncake", hint="mooncake")

vec("mooncake RFC: tokens, parent, salt, lora, group, per-event dp_rank, cleared", "mooncake-rfc",
    [1750000000000, [rfc_event("stored", "BlockStored", [5, 6], parent=4,
                               tokens=list(range(32)), medium="gpu", additional_salt="as",
                               lora_name="lo", group_id=1, dp_rank=3, tenant_id="t1"),
                     rfc_event("cleared", "AllBlocksCleared", medium="cpu", event_id=9)], 2],
    batch(1750000000.0,
          [stored([5, 6], 4, list(range(32)), "gpu",
                  scope=dict(RFC_SCOPE, salt="as", lora_name="lo", group=1, dp_rank=3,
                             tenant="t1"), wire=RFC_WIRE),
           cleared("cpu", scope=RFC_SCOPE, wire=dict(RFC_WIRE, event_id=9))], dp_rank=2),
    encode="mooncake", hint="mooncake")

vec("mooncake RFC minimal: only event_type, seq_hashes and medium", "mooncake-rfc",
    [1750000000000, [{"event_type": "removed", "seq_hashes": [42], "medium": "cpu"}], 0],
    batch(1750000000.0, [removed([42], "cpu")], dp_rank=0))

vec("mooncake RFC: event_type wins over type, seq_hashes over block_hashes, int tenant_id",
    "mooncake-rfc",
    [1750000000000, [{"event_type": "removed", "type": "BlockStored", "seq_hashes": [1],
                      "block_hashes": [99], "medium": "disk", "tenant_id": 17,
                      "lora_id": 5, "session_id": "engine-only keys are ignored"}], 0],
    batch(1750000000.0, [removed([1], "disk", scope={"tenant": "17"})], dp_rank=0),
    hint="mooncake")

vec("a map without event_type or seq_hashes is a vLLM/SGLang map (RFC keys ignored)",
    "vllm-map",
    [1750000000000, [{"type": "BlockStored", "block_hashes": [-1], "parent_block_hash": 8,
                      "token_ids": [1, 2], "block_size": 2, "tenant_id": 17,
                      "model_name": "ignored"}], 0],
    batch(1750000000.0, [stored([-1], 8, [1, 2], scope={"block_size": 2})], dp_rank=0),
    hint="mooncake")

# ---- Mooncake seed era -----------------------------------------------------------------------
vec("mooncake seed: the store's own two events (BlockUpdateEvent, RemoveAllEvent)", "mooncake-seed",
    [1700000000.5, [["BlockUpdateEvent", "k1", [["memory", "tcp://h:1"]]], ["RemoveAllEvent"]]],
    batch(1700000000.5, [update("k1", [["memory", "tcp://h:1"]]), cleared()]),
    encode="mooncake-seed")

vec("mooncake seed: BlockStoreEvent (subscriber guide layout) then an update removing the disk",
    "mooncake-seed",
    [1700000001.0, [["BlockStoreEvent", "key_12345",
                     [["memory", "tcp://192.168.1.10:6000"],
                      ["disk", "/data/blocks/block_12345.bin"],
                      ["local_disk", "tcp://192.168.1.10:7000"]],
                     "llama2-7b", 512, "0x41234125", "0x51512342", [1, 2, 3, 4, 5]],
                    ["BlockUpdateEvent", "key_12345", [["memory", "tcp://192.168.1.10:6000"]]],
                    ["BlockUpdateEvent", "gone", []]]],
    batch(1700000001.0,
          [stored(["0x41234125"], "0x51512342", [1, 2, 3, 4, 5],
                  scope={"model": "llama2-7b", "block_size": 512},
                  wire={"object_key": "key_12345"}),
           update("key_12345", [["memory", "tcp://192.168.1.10:6000"],
                                ["disk", "/data/blocks/block_12345.bin"],
                                ["local_disk", "tcp://192.168.1.10:7000"]]),
           update("key_12345", [["memory", "tcp://192.168.1.10:6000"]]),
           update("gone", [])]),
    encode="mooncake-seed")

# ---- per-event failures ----------------------------------------------------------------------
vec("unknown tag between good events: only it fails (unsupported)", "errors",
    [TS, [["BlockRemoved", [1], "GPU"], ["BlockMoved", [1]], ["AllBlocksCleared"]], 0],
    batch(TS, [removed([1], "GPU"), cleared()], dp_rank=0,
          errors=[{"index": 1, "code": "unsupported"}]))

vec("events of another publisher family than the batch's first fail alone (unsupported)",
    "errors",
    [TS, [["AllBlocksCleared"], ["BlockRemoved", [1], "GPU"],
          ["BlockUpdateEvent", "k", []],
          {"event_type": "removed", "seq_hashes": [2]},
          ["RemoveAllEvent"], ["BlockRemoved", [3], None]], 0],
    batch(TS, [cleared(), removed([1], "GPU"), cleared(), removed([3])], dp_rank=0,
          errors=[{"index": 2, "code": "unsupported"}, {"index": 3, "code": "unsupported"}]))

vec("token id beyond u32 and a wrong-typed field: those events fail (malformed)", "errors",
    [TS, [["BlockStored", [1], None, [2**32], 1, None],
          ["BlockStored", [2], None, "not-a-list", 1, None],
          ["BlockRemoved", [3]],
          {"type": "Unknown"},
          ["BlockStored", [4], None, [-1], 1, None]]],
    batch(TS, [removed([3])], errors=[{"index": 0, "code": "malformed"},
                                      {"index": 1, "code": "malformed"},
                                      {"index": 3, "code": "unsupported"},
                                      {"index": 4, "code": "malformed"}]))


def to_json():
    return {"generator": "tests/data/event_codec_vectors.py", "vectors": VECTORS}


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--corpus":
        # --corpus DIR [GOLDEN_DIR]: the fuzz corpus, these payloads plus the golden captures'.
        import glob
        import os
        os.makedirs(sys.argv[2], exist_ok=True)
        for i, v in enumerate(VECTORS):
            with open(os.path.join(sys.argv[2], "vector-%02d.bin" % i), "wb") as f:
                f.write(bytes.fromhex(v["payload_hex"]))
        if len(sys.argv) == 4:
            seen = set()
            for path in sorted(glob.glob(os.path.join(sys.argv[3], "*.json"))):
                doc = json.load(open(path))
                stem = os.path.splitext(os.path.basename(path))[0]
                frames = doc.get("frames", []) + doc.get("encoded_only", [])
                for i, frame in enumerate(frames):
                    payload = bytes.fromhex(frame["payload_hex"])
                    if payload in seen:
                        continue
                    seen.add(payload)
                    with open(os.path.join(sys.argv[2], "golden-%s-%02d.bin" % (stem, i)),
                              "wb") as f:
                        f.write(payload)
        return
    print(json.dumps(to_json(), indent=1))


if __name__ == "__main__":
    main()
