#!/usr/bin/env bash
# `replay CAPTURE` reads around damage in the middle of a capture (docs/sequence-rules.md
# "Damaged captures"): the batches of the damaged records count as lost, with the damage's byte
# offset, and every later batch is applied. The capture is written by the independent Python
# writer (tests/data/kvcap.py); the damaged offsets and the expected counts are computed here.
. "$(dirname "$0")/lib.sh"
data=$KVINDEX_SOURCE_DIR/tests/data
py=${KVINDEX_PYTHON:-/usr/bin/python3}

# Two vLLM sources without replay endpoints, 12 batches each (seq 0..11), interleaved a0 b0 a1 b1
# ...; batch k of source s stores one root block (engine hash 1000*s + k). Damage:
#   one.kvcap: one byte of the payload of a's batch 5 (a checksum mismatch: skipped by length);
#   two.kvcap: the length fields of b's batches 3 and 4 (a scan to the next good record).
"$py" - "$data" "$TMP" <<'PY' || { echo "capture generator failed"; exit 1; }
import json, sys
sys.path.insert(0, sys.argv[1])
import msgpack
import kvcap
out = sys.argv[2]
data = kvcap.file_header()
data += kvcap.definition(0, 1, name="a", format="vllm", model="m", block_size=2)
data += kvcap.definition(1, 2, name="b", format="vllm", model="m", block_size=2)
offsets = {}
for k in range(12):
    for s in (0, 1):
        payload = msgpack.packb(
            [1.0, [["BlockStored", [1000 * s + k], None, [k, s], 2, None, "GPU", None]]],
            use_bin_type=True)
        offsets[(s, k)] = len(data)
        data += kvcap.message(s, 10 + 2 * k + s, b"kv", k, payload)
one = bytearray(data)
one[offsets[(0, 5)] + 60] ^= 0xFF  # inside the body (the record header is 32 bytes)
open(out + "/one.kvcap", "wb").write(one)
two = bytearray(data)
for k in (3, 4):
    two[offsets[(1, k)]:offsets[(1, k)] + 4] = b"\xff\xff\xff\x7f"
open(out + "/two.kvcap", "wb").write(two)
json.dump({"one": offsets[(0, 5)], "two": offsets[(1, 3)]}, open(out + "/offsets.json", "w"))
PY
one_at=$("$py" -c "import json; print(json.load(open('$TMP/offsets.json'))['one'])")
two_at=$("$py" -c "import json; print(json.load(open('$TMP/offsets.json'))['two'])")

# One damaged record: a's batch 5 is lost; a's 6..11 and all of b are applied.
run "$KVINDEX" replay "$TMP/one.kvcap" --json "$TMP/one.json"
expect_status 0 "one damaged record"
expect_stderr_contains "one.kvcap: byte $one_at: record at byte $one_at: record checksum mismatch"
expect_stderr_contains "one.kvcap: byte $one_at: damage: source 'a': 1 batch(es) lost, seq 5..5"
expect_stderr_contains "1 damaged stretch(es) read around, 1 batch(es) lost to them"
"$py" - "$TMP/one.json" "$one_at" <<'PY' || fail "one damaged record: summary"
import json, sys
s = json.load(open(sys.argv[1]))
src = {r["source"]: r for r in s["sources"]}
assert (src["a"]["applied"], src["a"]["lost"], src["a"]["gaps"]) == (11, 1, 0), src["a"]
assert (src["b"]["applied"], src["b"]["lost"]) == (12, 0), src["b"]
assert s["blocks"] == 23, s["blocks"]
d = s["damage"]
assert (d["stretches"], d["lost"]) == (1, 1), d
assert d["losses"] == [{"file": d["losses"][0]["file"], "offset": int(sys.argv[2]), "source": "a",
                        "first_seq": 5, "count": 1}], d
PY

# --dump: the batches after the damage are applied, in order.
run "$KVINDEX" replay "$TMP/one.kvcap" --dump
expect_status 0 "--dump"
"$py" - "$stdout_file" <<'PY' || fail "one damaged record: --dump"
import json, sys
seqs = [json.loads(l)["seq"] for l in open(sys.argv[1]) if json.loads(l)["source"] == "a"]
assert seqs == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11], seqs
PY

# Two records with damaged lengths, found again by scanning: b's batches 3 and 4 are lost.
run "$KVINDEX" replay "$TMP/two.kvcap" --json "$TMP/two.json"
expect_status 0 "two damaged lengths"
expect_stderr_contains "two.kvcap: byte $two_at: damage: source 'b': 2 batch(es) lost, seq 3..4"
"$py" - "$TMP/two.json" <<'PY' || fail "two damaged lengths: summary"
import json, sys
s = json.load(open(sys.argv[1]))
src = {r["source"]: r for r in s["sources"]}
assert (src["b"]["applied"], src["b"]["lost"]) == (10, 2), src["b"]
assert (src["a"]["applied"], src["a"]["lost"]) == (12, 0), src["a"]
assert s["damage"]["lost"] == 2 and s["blocks"] == 22, s
PY

# query --capture reads the same way: b's block 1007 (after the damage) is there.
run "$KVINDEX" query --capture "$TMP/two.kvcap" --model m --hashes 1007 --instance b --json -
expect_status 0 "query --capture"
expect_stdout_contains '"longest_matched": 2'

finish
