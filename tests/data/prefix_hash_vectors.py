#!/usr/bin/python3
"""Independent oracle for kvindex's prefix hash chain (docs/prefix-hash.md).

Written from the definition alone, with Debian's python3-xxhash; it shares no code with libindex.
Prints prefix_hash_vectors.json on stdout (regenerate: scripts/regen-vectors.sh).

  local_i = XXH3_64(tokens of block i as u32 little-endian, seed)
  seq_0   = local_0;  seq_i = XXH3_64(le64(seq_{i-1}) || le64(local_i), seed)
  multimodal: local'_i = XXH3_64(le64(local_i) || le64(XXH3_64(keys, seed)), seed),
              keys = for each (id, offset): le32(len(id)) || id || le64(offset, signed)
"""
import json
import struct

import xxhash


def local_hash(tokens, seed):
    return xxhash.xxh3_64_intdigest(struct.pack("<%dI" % len(tokens), *tokens), seed=seed)


def chain(tokens, block_size, seed, multimodal=None):
    out, locals_, parent = [], [], None
    if block_size == 0:
        return out, locals_
    for i in range(len(tokens) // block_size):
        local = local_hash(tokens[i * block_size:(i + 1) * block_size], seed)
        keys = (multimodal or {}).get(i)
        if keys:
            blob = b"".join(struct.pack("<I", len(k.encode())) + k.encode() + struct.pack("<q", o)
                            for k, o in keys)
            digest = xxhash.xxh3_64_intdigest(blob, seed=seed)
            local = xxhash.xxh3_64_intdigest(struct.pack("<QQ", local, digest), seed=seed)
        locals_.append(local)
        parent = local if parent is None else xxhash.xxh3_64_intdigest(
            struct.pack("<QQ", parent, local), seed=seed)
        out.append(parent)
    return out, locals_


CASES = [
    ("design-doc prompt, block 2", [101, 15, 100, 55, 89, 63], 2, 1337, None),
    ("one block of four", [1, 2, 3, 4], 4, 1337, None),
    ("two blocks of four", [1, 2, 3, 4, 5, 6, 7, 8], 4, 1337, None),
    ("partial tail ignored", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4, 1337, None),
    ("shorter than a block", [1, 2, 3], 4, 1337, None),
    ("empty prompt", [], 16, 1337, None),
    ("block size 0 hashes nothing", [1, 2, 3], 0, 1337, None),
    ("block size 1", [7, 7, 7], 1, 1337, None),
    ("seed 0", [1, 2, 3, 4, 5, 6, 7, 8], 4, 0, None),
    ("seed 42", [1, 2, 3, 4, 5, 6, 7, 8], 4, 42, None),
    ("max u32 token ids", [0xFFFFFFFF, 0, 0x80000000, 1], 2, 1337, None),
    ("sixteen-token blocks", list(range(1000, 1064)), 16, 1337, None),
    ("multimodal key on block 1", [1, 2, 3, 4, 5, 6, 7, 8], 4, 1337,
     {1: [("img-0001", 2)]}),
    ("two multimodal keys, negative offset", [1, 2, 3, 4], 4, 1337,
     {0: [("img-a", -3), ("audio-b", 0)]}),
]


def main():
    cases = []
    for name, tokens, block_size, seed, mm in CASES:
        prefix, locals_ = chain(tokens, block_size, seed, mm)
        case = {"name": name, "tokens": tokens, "block_size": block_size, "seed": seed,
                "local_hashes": locals_, "prefix_hashes": prefix}
        if mm:
            case["multimodal"] = {str(k): [[i, o] for i, o in v] for k, v in mm.items()}
        cases.append(case)
    print(json.dumps({"generator": "tests/data/prefix_hash_vectors.py", "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
