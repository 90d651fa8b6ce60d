#!/usr/bin/env bash
# `replay CAPTURE` applies the sequence rules' defences (docs/sequence-rules.md "Late join",
# "Restart or duplicate: the content decides", "Corrupt sequences") and reports their counters in
# --json. The capture is written by the independent Python writer (tests/data/kvcap.py); the
# expected counts are worked out by hand in the comments below.
. "$(dirname "$0")/lib.sh"
data=$KVINDEX_SOURCE_DIR/tests/data
py=${KVINDEX_PYTHON:-/usr/bin/python3}

# Sources (vLLM, no replay endpoint unless said):
#   late:   first seen at seq 5                       -> late_joins 1, late_join_batches 5
#   fill:   first seen at seq 5, has a replay endpoint -> no late join
#   jump:   0 1 2 3, then 2^63, then 4 5              -> corrupt_seqs 1, applied 6, restarts 0
#   dup:    0..9, then batch 1 again (same bytes)     -> duplicates 1, restarts 0
#   again:  0..9, then batch 9 with other bytes       -> restarts 1
"$py" - "$data" "$TMP/r.kvcap" <<'PY' || { echo "capture generator failed"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import msgpack
import kvcap

def batch(h):
    return msgpack.packb([1.0, [["BlockStored", [h], None, [h, h], 2, None, "GPU", None]]],
                         use_bin_type=True)

names = ["late", "fill", "jump", "dup", "again"]
data = kvcap.file_header()
for i, name in enumerate(names):
    extra = {"replay": "tcp://127.0.0.1:1"} if name == "fill" else {}
    data += kvcap.definition(i, 1, name=name, format="vllm", model="m", block_size=2, **extra)
plan = {
    "late": [(5, 5), (6, 6)],
    "fill": [(5, 5), (6, 6)],
    "jump": [(0, 0), (1, 1), (2, 2), (3, 3), (1 << 63, 99), (4, 4), (5, 5)],
    "dup": [(s, s) for s in range(10)] + [(1, 1)],
    "again": [(s, s) for s in range(10)] + [(9, 1000)],
}
ns = 10
for i, name in enumerate(names):
    for seq, h in plan[name]:
        ns += 1
        data += kvcap.message(i, ns, b"kv", seq, batch(h))
open(sys.argv[2], "wb").write(data)
PY

run "$KVINDEX" replay "$TMP/r.kvcap" --json "$TMP/r.json"
expect_status 0 "replay"
"$py" - "$TMP/r.json" <<'PY' || fail "sequence-rule counters"
import json, sys
src = {r["source"]: r for r in json.load(open(sys.argv[1]))["sources"]}
def want(name, **counts):
    got = {k: src[name][k] for k in counts}
    assert got == counts, (name, got, counts)
want("late", late_joins=1, late_join_batches=5, applied=2)
want("fill", late_joins=0, late_join_batches=0)
want("jump", corrupt_seqs=1, applied=6, restarts=0, gaps=0, lost=0, late_joins=0)
want("dup", duplicates=1, restarts=0, applied=10)
want("again", restarts=1, duplicates=0, applied=11)
PY

finish
