#!/usr/bin/python3
"""Compares a journal export with the capture the same ingester recorded (both read with the
independent tests/data/capture_check.py).

Usage: journal_compare.py CAPTURE EXPORT LOST_RECORDS LOST_BYTES

The export must hold the capture's records (same type, receive time and content; source ids may
differ; in the capture's order except around a failed publish, see docs/scale-out.md), minus
records the journal lost, plus one `journal-lost` note per
source each time records were lost. LOST_RECORDS and LOST_BYTES (the ingester's counters) must be
exactly the count and the total size (32-byte header + body) of the capture records missing.
Prints "kept N, lost M (B bytes), notes K"; exits 1 on any difference.
"""
import json
import os
import subprocess
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture_check.py")


def records(path):
    out = subprocess.run([sys.executable, CHECK, path], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def key(r):
    return (r["type"], r["recv_ns"], tuple(r["frames"]) if "frames" in r else r["body"])


def size(r):
    if "frames" in r:
        return 32 + 4 + sum(4 + len(f) // 2 for f in r["frames"])
    return 32 + len(r["body"]) // 2


def main():
    capture, export = records(sys.argv[1]), records(sys.argv[2])
    lost_records, lost_bytes = int(sys.argv[3]), int(sys.argv[4])
    note = "journal-lost".encode().hex()
    notes = [r for r in export if r["type"] == 8 and r["body"] == note]
    kept = [key(r) for r in export if not (r["type"] == 8 and r["body"] == note)]
    # `kept` must be the capture minus what was lost. Records are compared as a multiset: a record
    # resent after a failed publish may follow records stored meanwhile (docs/scale-out.md), so
    # the order may differ around a failure; how many records moved is printed.
    from collections import Counter
    want = Counter(key(r) for r in capture)
    have = Counter(kept)
    extra = have - want
    if extra:
        sys.exit("%d export record(s) not in the capture, e.g. type %s at %s" %
                 (sum(extra.values()), next(iter(extra))[0], next(iter(extra))[1]))
    lost = want - have
    missing = []
    for r in capture:
        if lost[key(r)] > 0:
            lost[key(r)] -= 1
            missing.append(r)
    missing_keys = set(key(r) for r in missing)
    in_capture = [key(r) for r in capture if key(r) not in missing_keys]
    moved = sum(1 for a, b in zip(in_capture, kept) if a != b)
    if len(missing) != lost_records or sum(map(size, missing)) != lost_bytes:
        sys.exit("capture records missing from the journal: %d (%d bytes); the ingester counted "
                 "%d (%d bytes)" % (len(missing), sum(map(size, missing)), lost_records, lost_bytes))
    if (lost_records == 0) != (len(notes) == 0):
        sys.exit("%d journal-lost notes for %d lost records" % (len(notes), lost_records))
    print("kept %d, lost %d (%d bytes), notes %d, out of capture order %d" %
          (len(kept), len(missing), lost_bytes, len(notes), moved))


if __name__ == "__main__":
    main()
