#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/framing/: messages as framing_fuzz.cpp reads them (each frame one
length byte, then its bytes), taken from the golden captures (tests/data/golden/*.json: the live
messages and the replay requests and replies) plus every replay layout's end marker.

    /usr/bin/python3 tests/fuzz/make_framing_corpus.py tests/data/golden tests/fuzz/corpus/framing
"""
import json
import os
import sys

END = bytes.fromhex("ff" * 8)


def encode(frames):
    out = b""
    for frame in frames:
        assert len(frame) < 256, "frame too long for the one-byte length"
        out += bytes([len(frame)]) + frame
    return out


def main(golden_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cases = {
        "end_vllm": [b"", END, b""],
        "end_vllm_topic": [b"", b"", END, b""],
        "end_mooncake": [b"", b"", END],
        "end_req_socket": [END, b""],
        "request_req_socket": [bytes(7) + b"\x05"],
        "topic_reply": [b"", b"kv-events", bytes(7) + b"\x02", b"\x92\x01\x90"],
    }
    for name in sorted(os.listdir(golden_dir)):
        if not name.endswith(".json"):
            continue
        golden = json.load(open(os.path.join(golden_dir, name)))
        stem = name[: -len(".json")]
        for frame in golden["frames"][:4]:
            cases["%s-live-%02d" % (stem, frame["index"])] = [
                bytes.fromhex(frame["topic_hex"]),
                bytes.fromhex(frame["seq_hex"]),
                bytes.fromhex(frame["payload_hex"]),
            ]
        for kind, replay in sorted(golden["replay"].items()):
            cases["%s-%s-request" % (stem, kind)] = [bytes.fromhex(h) for h in replay["request_frames_hex"]]
            for i, message in enumerate(replay["reply_messages_hex"]):
                cases["%s-%s-reply-%d" % (stem, kind, i)] = [bytes.fromhex(h) for h in message]
    for name, frames in cases.items():
        with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
            f.write(encode(frames))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
