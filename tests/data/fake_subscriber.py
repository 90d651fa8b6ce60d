#!/usr/bin/python3
"""A minimal, independent KV-event subscriber and replay client for the publish-fake tests.

Written from docs/wire-formats.md and the upstream wire descriptions only (python3-zmq +
python3-msgpack), it shares no code with kvindex. Modes:

  sub     SUB socket: connect (or --bind), subscribe to all topics, read live messages until
          --count messages arrived or nothing came for --idle seconds; print one JSON document
          with every message (frame count, topic, seq, payload hex, decoded summary).
  replay  DEALER socket: send one request (["", seq8] by default, or --raw hex frames), print
          every reply message (as hex frames) until the end marker or --idle seconds of silence.

Decoded summary of a payload (None when msgpack cannot decode it):
  {"batch_len", "ts", "dp_rank", "events": [{"type", "form": "array"|"map", "len", "hashes",
   "parent", "tokens", "block_size", "medium", "key", "signed"}]}
Hashes are normalised to unsigned 64 bits (SGLang sends signed ones); seed-era string hashes
("0x..") are parsed as hex.
"""
import argparse
import json
import sys
import time

import msgpack
import zmq

END = b"\xff" * 8


def u64(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return v & 0xFFFFFFFFFFFFFFFF
    if isinstance(v, bytes):
        return int.from_bytes(v[-8:], "big")
    if isinstance(v, str):
        if v == "":
            return None
        return int(v, 16) if v.startswith("0x") else int(v)
    return v


def hashes(v):
    if v is None:
        return []
    if isinstance(v, list):
        return [u64(x) for x in v]
    return [u64(v)]


def token_form(tokens):
    """SGLang EAGLE sends token ids as bigram pairs [[t0, t1], [t1, t2], ...]: whether these are
    pairs, whether they chain, and the plain tokens they stand for (first of each pair)."""
    if not tokens or not isinstance(tokens[0], list):
        return {"bigram": False, "plain": list(tokens or [])}
    chained = all(len(p) == 2 for p in tokens) and all(
        a[1] == b[0] for a, b in zip(tokens, tokens[1:]))
    return {"bigram": True, "bigram_chained": chained, "plain": [p[0] for p in tokens],
            "next": tokens[-1][1]}


def event_summary(e):
    if isinstance(e, dict):
        t = e.get("type") or e.get("event_type")
        out = {"type": t, "form": "map", "len": len(e)}
        out["hashes"] = hashes(e.get("block_hashes", e.get("seq_hashes")))
        out["parent"] = u64(e.get("parent_block_hash", e.get("parent_hash")))
        out["tokens"] = len(e.get("token_ids") or [])
        out["block_size"] = e.get("block_size")
        out["medium"] = e.get("medium")
        out["dp_rank"] = e.get("dp_rank")
        out["model"] = e.get("model_name")
        out["group"] = e.get("group_idx")
        out["spec_kind"] = e.get("kv_cache_spec_kind")
        out["block_offsets"] = e.get("block_offsets")
        if "skipped_token_ids" in e:
            out["skipped_parent"] = u64(e.get("skipped_parent_block_hash"))
            out["skipped_tokens"] = len(e.get("skipped_token_ids") or [])
            out["skipped_extra_keys"] = len(e.get("skipped_extra_keys") or [])
        out["signed"] = any(isinstance(h, int) and h < 0 for h in e.get("block_hashes") or [])
        return out
    t = e[0]
    out = {"type": t, "form": "array", "len": len(e)}
    if t == "BlockStored":
        out["hashes"] = hashes(e[1])
        out["parent"] = u64(e[2])
        out["tokens"] = len(e[3])
        out["block_size"] = e[4]
        out["medium"] = e[6] if len(e) > 6 and isinstance(e[6], str) else None
        out.update(token_form(e[3]))
        out["signed"] = any(isinstance(h, int) and h < 0 for h in e[1])
    elif t == "BlockRemoved":
        out["hashes"] = hashes(e[1])
        out["medium"] = e[2] if len(e) > 2 else None
    elif t == "BlockStoreEvent":  # seed era, subscriber-guide layout
        out["key"] = e[1]
        out["replicas"] = e[2]
        out["model"] = e[3]
        out["block_size"] = e[4]
        out["hashes"] = hashes(e[5])
        out["parent"] = u64(e[6])
        out["tokens"] = len(e[7])
    elif t == "BlockUpdateEvent":
        out["key"] = e[1]
        out["replicas"] = e[2]
    return out


def decode(payload):
    try:
        batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - any decode failure means "undecodable"
        return None
    if not isinstance(batch, list) or len(batch) < 2 or not isinstance(batch[1], list):
        return None
    return {
        "batch_len": len(batch),
        "ts": batch[0],
        "dp_rank": batch[2] if len(batch) > 2 else None,
        "events": [event_summary(e) for e in batch[1]],
    }


def sub(args):
    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.RCVHWM, 0)
    s.setsockopt(zmq.SUBSCRIBE, args.topic.encode())
    for ep in args.endpoint:
        if args.bind:
            s.bind(ep)
        else:
            s.connect(ep)
    if args.ready:
        open(args.ready, "w").close()
    msgs = []
    deadline = time.time() + args.timeout
    poller = zmq.Poller()
    poller.register(s, zmq.POLLIN)
    while len(msgs) < args.count and time.time() < deadline:
        if not poller.poll(int(args.idle * 1000)):
            if msgs or args.idle_before_first:
                break
            continue
        frames = s.recv_multipart()
        m = {"frames": len(frames)}
        if len(frames) == 3:
            m["topic"] = frames[0].decode("utf-8", "replace")
            m["seq"] = int.from_bytes(frames[1], "big") if len(frames[1]) == 8 else None
            m["payload_hex"] = frames[2].hex() if args.hex else None
            m["decoded"] = decode(frames[2]) if not args.no_decode else None
        msgs.append(m)
    json.dump({"messages": msgs}, sys.stdout)
    print()


def replay(args):
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(args.endpoint[0])
    if args.raw is not None:
        d.send_multipart([bytes.fromhex(x) for x in args.raw])
    else:
        d.send_multipart([b"", args.start.to_bytes(8, "big")])
    replies = []
    ended = False
    while True:
        if not d.poll(int(args.idle * 1000)):
            break
        frames = d.recv_multipart()
        replies.append([f.hex() for f in frames])
        body = frames[1:] if frames and frames[0] == b"" else frames
        # Robust client rule: the end marker is FF x8 in the sequence position with an empty
        # payload (vLLM/SGLang, with or without a topic frame), or an empty sequence frame then
        # FF x8 (Mooncake).
        if (len(body) == 2 and body[0] == END and body[1] == b"") or \
           (len(body) == 3 and body[1] == END and body[2] == b"") or \
           (len(body) == 2 and body[0] == b"" and body[1] == END):
            ended = True
            break
    json.dump({"replies": replies, "ended": ended}, sys.stdout)
    print()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["sub", "replay"])
    p.add_argument("--endpoint", action="append", required=True)
    p.add_argument("--bind", action="store_true")
    p.add_argument("--topic", default="")
    p.add_argument("--count", type=int, default=1 << 62)
    p.add_argument("--timeout", type=float, default=20)
    p.add_argument("--idle", type=float, default=3)
    p.add_argument("--idle-before-first", action="store_true")
    p.add_argument("--hex", action="store_true")
    p.add_argument("--no-decode", action="store_true")
    p.add_argument("--ready", help="touch this file once connected")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--raw", nargs="*", help="replay: send these hex frames instead")
    args = p.parse_args()
    sub(args) if args.mode == "sub" else replay(args)


if __name__ == "__main__":
    main()
