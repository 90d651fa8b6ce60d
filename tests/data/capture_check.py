#!/usr/bin/python3
"""Independent reader of kvindex capture files, written from docs/capture-format.md alone.

Usage: capture_check.py FILE...  Prints one JSON object per record:
{"file": i, "offset": n, "type": t, "recv_ns": n, "source": n, "frames": [hex...]} (frames for
message records) or "body": hex (other records), and exits 1 on the first record whose checksum
does not verify (so it does not tolerate damage: it checks what kvindex writes). Zero bytes from
a record boundary to the end of a file end that file's data (a recorder that did not close it).
"""
import json
import struct
import sys

import xxhash

MAGIC = b"\x89KVCAP\r\n"


def main():
    for index, path in enumerate(sys.argv[1:]):
        data = open(path, "rb").read()
        assert data[:8] == MAGIC, "bad magic"
        version, header_size, file_index, created = struct.unpack_from("<HHIQ", data, 8)
        assert version == 1 and header_size == 32 and file_index == index
        assert struct.unpack_from("<Q", data, 24)[0] == xxhash.xxh3_64_intdigest(data[:24])
        pos = 32
        while pos < len(data):
            if data[pos:pos + 4] == b"\0\0\0\0" and not data[pos:].strip(b"\0"):
                # Zero bytes from a record boundary to the end: the unused reserved space of a
                # mapped recorder that did not close the file (the format page's "zero tail").
                print("zero tail of %d bytes at byte %d" % (len(data) - pos, pos), file=sys.stderr)
                break
            length, rtype, flags, hsize, checksum, recv_ns, source, reserved = struct.unpack_from(
                "<IBBHQqII", data, pos)
            record = data[pos:pos + length]
            assert hsize == 32 and len(record) == length, "torn record at %d" % pos
            seed = struct.unpack_from("<Q", record, 0)[0]
            if xxhash.xxh3_64_intdigest(record[16:], seed=seed) != checksum:
                print("checksum mismatch at byte %d" % pos, file=sys.stderr)
                sys.exit(1)
            body = record[32:]
            out = {"file": index, "offset": pos, "type": rtype, "recv_ns": recv_ns, "source": source}
            if rtype in (2, 3):
                count = struct.unpack_from("<I", body, 0)[0]
                at, frames = 4, []
                for _ in range(count):
                    (n,) = struct.unpack_from("<I", body, at)
                    frames.append(body[at + 4:at + 4 + n].hex())
                    at += 4 + n
                assert at == len(body), "frame lengths do not add up"
                out["frames"] = frames
            else:
                out["body"] = body.hex()
            print(json.dumps(out))
            pos += length


if __name__ == "__main__":
    main()
