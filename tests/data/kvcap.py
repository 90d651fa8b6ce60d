"""Writes kvindex capture files from docs/capture-format.md alone (Debian's python3-xxhash), for
tests that need captures made independently of the C++ writer."""
import json
import struct

import xxhash

MAGIC = b"\x89KVCAP\r\n"
SOURCE, MESSAGE, REPLAYED, GAP, LOST, RESTART, MALFORMED, NOTE, TIMEOUT = range(1, 10)


def file_header(index=0, created_ns=1750000000000000000):
    head = MAGIC + struct.pack("<HHIQ", 1, 32, index, created_ns)
    return head + struct.pack("<Q", xxhash.xxh3_64_intdigest(head))


def record(rtype, source, recv_ns, body):
    length = 32 + len(body)
    first8 = struct.pack("<IBBH", length, rtype, 0, 32)
    rest = struct.pack("<qII", recv_ns, source, 0) + body
    checksum = xxhash.xxh3_64_intdigest(rest, seed=struct.unpack("<Q", first8)[0])
    return first8 + struct.pack("<Q", checksum) + rest


def frames(*parts):
    return struct.pack("<I", len(parts)) + b"".join(struct.pack("<I", len(p)) + p for p in parts)


def definition(source, recv_ns, **config):
    return record(SOURCE, source, recv_ns, json.dumps(config).encode())


def message(source, recv_ns, topic, seq, payload):
    return record(MESSAGE, source, recv_ns, frames(topic, struct.pack(">Q", seq), payload))
