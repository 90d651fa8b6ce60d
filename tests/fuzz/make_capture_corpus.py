#!/usr/bin/python3
"""Writes the seed corpus of capture_fuzz (corpus/capture/*.kvcap) from docs/capture-format.md,
independently of the C++ writer. Run from tests/fuzz/: /usr/bin/python3 make_capture_corpus.py"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from kvcap import file_header, frames, record  # noqa: E402  (the documented format, in Python)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "capture")
    os.makedirs(out, exist_ok=True)
    definition = record(1, 0, 1, b'{"name":"vllm-0","format":"vllm","model":"m"}')
    message = record(2, 0, 2, frames(b"kv-events", struct.pack(">Q", 7),
                                     bytes.fromhex("92cb41da1398e700000090")))
    replayed = record(3, 0, 3, frames(b"", struct.pack(">Q", 8), b"\x90"))
    end_marker = record(3, 0, 4, frames(b"", b"\xff" * 8, b""))
    gap = record(4, 0, 5, struct.pack("<QQ", 5, 9))
    lost = record(5, 0, 6, struct.pack("<QQ", 5, 4))
    restart = record(6, 0, 7, struct.pack("<QQ", 900, 0))
    malformed = record(7, 0, 8, b"expected 3 frames, got 2")
    note = record(8, 0, 9, b"recording started")
    files = {
        "all_types.kvcap": file_header() + definition + message + replayed + end_marker + gap +
        lost + restart + malformed + note,
        "one_message.kvcap": file_header() + definition + message,
        "torn_tail.kvcap": file_header() + definition + message + message[:20],
        "empty.kvcap": file_header(),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
