#!/usr/bin/env bash
# `subscribe --snapshot-dir` with a publisher ring too small for the downtime (py_publisher
# --ring 5): the restarted subscriber continues from the snapshot's watermark 19, the live batch
# 44 reveals the gap, the ring holds only batches 40..44, so 20..39 are counted lost (20), the source is no longer exact, and
# the index holds the 20 blocks of the snapshot (a prompt of tokens 0..79 matches 80; the blocks
# after the loss are orphans). The plan is tests/cli/live_lib.bash snapshot_plan.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

snapshot_plan "$TMP/p.json"
start_pub p "$TMP/p.json" --replay 'tcp://127.0.0.1:*' --ring 5
SRC="vllm-0=vllm@$PUB_EP,model=m,block-size=4,replay=$REPLAY_EP"
DIR=$TMP/snaps
"$KVINDEX" subscribe --source "$SRC" --snapshot-dir "$DIR" --snapshot-interval 0.2 \
  --stats-interval 0 >"$TMP/a.out" 2>"$TMP/a.err" &
a=$!
PIDS+=($a)
wait_snapshot_watermark "$DIR" 19 || fail "no snapshot with watermark 19"
kill -9 "$a"
wait "$a" 2>/dev/null

"$KVINDEX" subscribe --source "$SRC" --snapshot-dir "$DIR" --snapshot-interval 0.2 \
  --stats-interval 0 --json "$TMP/b.json" >"$TMP/b.out" 2>"$TMP/b.err" &
b=$!
PIDS+=($b)
# Caught up once a periodic snapshot shows watermark 44; then a clean stop.
wait_snapshot_watermark "$DIR" 44 || fail "never reached seq 44"
kill -TERM "$b"
wait "$b" || fail "subscribe exit after SIGTERM"
"$PY" -c '
import json,sys
t=json.load(open(sys.argv[1]))["total"]
assert t["lost"]==20 and t["gaps"]>=1, t
' "$TMP/b.json" || fail "lost batches not counted"
f=$(ls "$DIR"/snapshot-*.kvsnap | tail -n 1)
run "$KVINDEX" replay "$f" --json -
expect_status 0 "final snapshot"
"$PY" -c '
import json,sys
s=json.load(open(sys.argv[1]))
src=s["sources"][0]
assert src["watermark"]==44 and not src["exact"] and src["lost"]==20, src
assert isinstance(src["last_loss_ns"], int), src
' "$stdout_file" || fail "final snapshot sequence state"
run "$KVINDEX" query --snapshot "$f" --model m --tokens-file /dev/stdin <<<"$(seq -s, 0 183)"
expect_status 0 "query --snapshot"
grep -qE '^vllm-0 +4 +80 ' "$stdout_file" || fail "the snapshot's 20 blocks"
finish
