#!/usr/bin/python3
"""Builds the upstream design document's example (docs/index-rules.md "Worked example") as a
capture, independently of kvindex: vLLM positional payloads and Mooncake RFC #1527 maps encoded with
python3-msgpack, framed per docs/capture-format.md. Block size 2, prompt [101,15,100,55,89,63] =
H1 H2 H3:
  vllm-0 DP rank 0 stores H1,H2 in GPU; DP rank 1 stores H1 in GPU;
  a Mooncake store serving vllm-0 holds H1 in CPU+DISK, H2 in CPU, H3 in DISK.
Usage: design_capture.py OUT.kvcap QUERIES.jsonl DUMP.jsonl
Writes the capture, the query file (with hand-computed `expect` answers) and the expected --dump.
"""
import json
import sys

import msgpack

sys.path.insert(0, __import__("os").path.dirname(__file__))
import kvcap  # noqa: E402

PROMPT = [101, 15, 100, 55, 89, 63]
TS = 1750000000.5


def vllm_stored(hashes, parent, tokens):
    # [tag, block_hashes, parent, token_ids, block_size, lora_id, medium, lora_name]
    return ["BlockStored", hashes, parent, tokens, 2, None, "GPU", None]


def vllm_batch(events, rank):
    return msgpack.packb([TS, events, rank], use_bin_type=True)


def rfc_stored(event_id, medium, hashes, parent, tokens):
    event = {"event_id": event_id, "timestamp": 1750000000500, "event_type": "stored",
             "model_name": "m", "block_size": 2, "medium": medium, "seq_hashes": hashes,
             "token_ids": tokens}
    if parent is not None:
        event["parent_hash"] = parent
    return event


def main():
    out, queries_path, dump_path = sys.argv[1:4]
    data = kvcap.file_header()
    data += kvcap.definition(0, 1, name="vllm-0", format="vllm", model="m", block_size=2, dp_rank=0)
    data += kvcap.definition(1, 2, name="vllm-0", format="vllm", model="m", block_size=2, dp_rank=1)
    data += kvcap.definition(2, 3, name="store", format="mooncake", model="m", block_size=2,
                             serves=["vllm-0"])
    dump = []

    def dump_line(source, instance, rank, seq, recv_ns, hashes, parent, tokens, tier, ts):
        dump.append({"source": source, "instance": instance, "dp_rank": rank, "seq": seq, "ts": ts,
                     "recv_ns": recv_ns, "type": "stored", "block_hashes": hashes,
                     "parent_block_hash": parent, "token_ids": tokens, "block_size": 2,
                     "tier": tier, "lora_name": None, "lora_id": None})

    # DP rank 0: H1, H2 in GPU (engine hashes 11, 12). DP rank 1: H1 in GPU (engine hash 21).
    data += kvcap.message(0, 100, b"kv-events", 0,
                          vllm_batch([vllm_stored([11, 12], None, PROMPT[:4])], 0))
    dump_line("vllm-0/dp0", "vllm-0", 0, 0, 100, [11, 12], None, PROMPT[:4], "GPU", TS)
    data += kvcap.message(1, 200, b"kv-events", 0,
                          vllm_batch([vllm_stored([21], None, PROMPT[:2])], 1))
    dump_line("vllm-0/dp1", "vllm-0", 1, 0, 200, [21], None, PROMPT[:2], "GPU", TS)
    # The store (RFC #1527, sequence from 1): H1,H2 in CPU; H1 in DISK; H3 in DISK after H2.
    store = [rfc_stored(1, "cpu", [1001, 1002], None, PROMPT[:4]),
             rfc_stored(2, "disk", [1001], None, PROMPT[:2]),
             rfc_stored(3, "disk", [1003], 1002, PROMPT[4:6])]
    data += kvcap.message(2, 300, b"", 1, msgpack.packb([1750000000500, store, 0], use_bin_type=True))
    for hashes, parent, tokens, tier in [([1001, 1002], None, PROMPT[:4], "CPU"),
                                         ([1001], None, PROMPT[:2], "DISK"),
                                         ([1003], 1002, PROMPT[4:6], "DISK")]:
        dump_line("store", "store", 0, 1, 300, hashes, parent, tokens, tier, 1750000000.5)
    with open(out, "wb") as f:
        f.write(data)

    zero = {"longest_matched": 0, "GPU": 0, "CPU": 0, "DISK": 0}
    queries = [
        # After DP rank 0's batch only: H1,H2 in GPU on rank 0; rank 1 known but empty.
        {"id": "dp0-only", "query": {"model": "m", "token_ids": PROMPT},
         "after": {"source": "vllm-0/dp0", "seq": 0},
         "expect": {"vllm-0": {"longest_matched": 4, "GPU": 4, "CPU": 0, "DISK": 0,
                               "DP": {"0": 4, "1": 0}}}},
        # The design document's answer, at the end.
        {"id": "design-doc", "query": {"model": "m", "token_ids": PROMPT},
         "expect": {"vllm-0": {"longest_matched": 6, "GPU": 4, "CPU": 4, "DISK": 4,
                               "DP": {"0": 4, "1": 2}}}},
        # Another model, scope or block size matches nothing.
        {"id": "other-lora", "query": {"model": "m", "token_ids": PROMPT, "lora_name": "x"}},
        {"id": "first-block-absent", "query": {"model": "m", "token_ids": [9, 9] + PROMPT},
         "expect": {"vllm-0": dict(zero, DP={"0": 0, "1": 0})}},
    ]
    with open(queries_path, "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    with open(dump_path, "w") as f:
        for line in dump:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
