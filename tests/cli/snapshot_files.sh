#!/usr/bin/env bash
# Snapshot files in the CLI: `replay CAPTURE --write-snapshot`, `replay SNAPSHOT` (summary and
# --json) and `query --snapshot`, on the design document's example capture written by an
# independent Python writer (tests/data/design_capture.py): the snapshot answers as the capture
# does (hand-computed rows), and damaged snapshots fail with the file and a byte offset.
. "$(dirname "$0")/lib.sh"
data=$KVINDEX_SOURCE_DIR/tests/data
py=${KVINDEX_PYTHON:-/usr/bin/python3}
"$py" "$data/design_capture.py" "$TMP/d.kvcap" "$TMP/q.jsonl" "$TMP/dump.jsonl" || { echo "generator failed"; exit 1; }

run "$KVINDEX" replay "$TMP/d.kvcap" --write-snapshot "$TMP/d.kvsnap"
expect_status 0 "--write-snapshot"
[ -s "$TMP/d.kvsnap" ] || fail "no snapshot written"
[ -e "$TMP/d.kvsnap.tmp" ] && fail "temporary file left"

# The same answers as from the capture (tests/cli/replay_capture.sh has the hand computation).
run "$KVINDEX" query --snapshot "$TMP/d.kvsnap" --model m --tokens 101,15,100,55,89,63
expect_status 0 "query --snapshot"
grep -qE '^vllm-0 +2 +6 +4 +4 +4 +- +0:4 1:2 +exact$' "$stdout_file" || fail "query table row"
run "$KVINDEX" query --snapshot "$TMP/d.kvsnap" --model m --hashes 11,12
expect_status 0 "query --snapshot --hashes"
grep -qE '^vllm-0 +2 +4 ' "$stdout_file" || fail "engine-hash query"
for q in "--tokens 101,15,100,55,89,63" "--hashes 11,12" "--tokens 1,2 --explain"; do
  run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m $q --json -
  cp "$stdout_file" "$TMP/from_capture.json"
  run "$KVINDEX" query --snapshot "$TMP/d.kvsnap" --model m $q --json -
  cmp -s "$stdout_file" "$TMP/from_capture.json" || fail "snapshot and capture answers differ ($q)"
done

# Summary: sources with their sequence state, resident tiers.
run "$KVINDEX" replay "$TMP/d.kvsnap"
expect_status 0 "replay SNAPSHOT"
expect_stdout_contains "vllm-0/dp1"
expect_stdout_contains "watermark"
grep -qE '^store +DISK +2$' "$stdout_file" || fail "store DISK row"
run "$KVINDEX" replay "$TMP/d.kvsnap" --json -
expect_status 0 "replay SNAPSHOT --json"
"$py" -c "
import json, sys
s = json.load(open('$stdout_file'))
src = {r['source']: r for r in s['sources']}
assert set(src) == {'vllm-0/dp0', 'vllm-0/dp1', 'store'}, src
assert all(r['exact'] and r['lost'] == 0 for r in src.values()), src
assert all(isinstance(r['watermark'], int) for r in src.values()), src
assert s['snapshot_version'] == 2 and s['presences'] > 0
" || fail "replay SNAPSHOT --json"
run "$KVINDEX" replay "$TMP/d.kvsnap" --dump
expect_status 2 "a snapshot takes no --dump"

# Damage: a truncated file and a flipped byte name the file and an offset; exit 1.
size=$(stat -c %s "$TMP/d.kvsnap")
head -c $((size - 3)) "$TMP/d.kvsnap" > "$TMP/cut.kvsnap"
run "$KVINDEX" replay "$TMP/cut.kvsnap"
expect_status 1 "truncated"
expect_stderr_contains "cut.kvsnap: byte "
"$py" - "$TMP/d.kvsnap" "$TMP/flip.kvsnap" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[len(b) // 2] ^= 0x10
open(sys.argv[2], 'wb').write(b)
PY
run "$KVINDEX" query --snapshot "$TMP/flip.kvsnap" --model m --tokens 1,2
expect_status 1 "bit flip"
expect_stderr_contains "flip.kvsnap: byte "
run "$KVINDEX" query --snapshot "$TMP/d.kvsnap" --capture "$TMP/d.kvcap" --model m --tokens 1
expect_status 2 "--snapshot with --capture"
finish
