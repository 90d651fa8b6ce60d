#!/usr/bin/env bash
# `subscribe --snapshot-dir/--snapshot-interval/--snapshot-keep` and `--warm-from http://` with
# the independent Python publisher. Expected answers by hand: batch s holds one block of tokens
# 4s..4s+3 chained on batch s-1, so a prompt of tokens 0..4n-1 matches 4n tokens once batches
# 0..n-1 are indexed. The first subscriber gets batches 0..19 and is killed (-9) after a periodic
# snapshot holds them; batches 20..43 are then "published" while nobody listens (ring only) and
# 44 live once the restarted subscriber has subscribed: it continues from the snapshot's
# watermark 19, the replay fills 20..44, and all 45 blocks are exact. A third subscriber warmed
# from the second's GET /snapshot answers the same.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --snapshot-interval 0
expect_status 2 "--snapshot-interval 0"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --snapshot-keep 0
expect_status 2 "--snapshot-keep 0"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --warm-from http://127.0.0.1
expect_status 2 "--warm-from http without a port"

snapshot_plan "$TMP/p.json"
start_pub p "$TMP/p.json" --replay 'tcp://127.0.0.1:*'
SRC="vllm-0=vllm@$PUB_EP,model=m,block-size=4,replay=$REPLAY_EP"
DIR=$TMP/snaps

"$KVINDEX" subscribe --source "$SRC" --snapshot-dir "$DIR" --snapshot-interval 0.2 \
  --snapshot-keep 2 --stats-interval 0 >"$TMP/a.out" 2>"$TMP/a.err" &
a=$!
PIDS+=($a)
wait_snapshot_watermark "$DIR" 19 || fail "no snapshot with watermark 19"
kill -9 "$a"
wait "$a" 2>/dev/null
[ "$(ls "$DIR"/snapshot-*.kvsnap | wc -l)" -le 2 ] || fail "--snapshot-keep 2 kept more"

PORT_B=$(free_ports 1)
"$KVINDEX" subscribe --source "$SRC" --snapshot-dir "$DIR" --snapshot-interval 0.5 \
  --http "127.0.0.1:$PORT_B" --stats-interval 0 --json "$TMP/b.json" >"$TMP/b.out" 2>"$TMP/b.err" &
b=$!
PIDS+=($b)
"$PY" - "$PORT_B" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "the restarted subscriber is not exact"
import json, sys, time, urllib.error
sys.path.insert(0, sys.argv[2])
from http_client import Server
call = Server(sys.argv[1]).call
want = {"longest_matched": 180, "GPU": 180, "CPU": 0, "DISK": 0, "DP": {"0": 180},
        "state": "exact"}
deadline = time.time() + 15
while True:
    try:
        code, text = call("/query", {"model": "m", "token_ids": list(range(184))})
        if code == 200 and json.loads(text)["data"].get("default", {}).get("vllm-0") == want:
            break
    except (urllib.error.URLError, ConnectionError):
        pass
    if time.time() > deadline:
        sys.exit("never caught up: %s" % text)
    time.sleep(0.1)
for n in (1, 7, 80):
    code, text = call("/query", {"model": "m", "token_ids": list(range(n))})
    m = 4 * (n // 4)
    got = json.loads(text)["data"].get("default", {}).get("vllm-0", {}).get("longest_matched", 0)
    assert got == m, (n, text)
PYEOF
grep -q "continuing from a snapshot" "$TMP/b.err" || fail "the snapshot was not loaded"

# A sibling warmed from the running one over HTTP answers the same (its own publisher link adds
# nothing: the publisher sends no more).
PORT_C=$(free_ports 1)
"$KVINDEX" subscribe --source "$SRC" --warm-from "http://127.0.0.1:$PORT_B" \
  --http "127.0.0.1:$PORT_C" --stats-interval 0 >"$TMP/c.out" 2>"$TMP/c.err" &
c=$!
PIDS+=($c)
"$PY" - "$PORT_B" "$PORT_C" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "the warmed sibling answers differently"
import json, sys, time, urllib.error
sys.path.insert(0, sys.argv[3])
from http_client import Server
b, c = Server(sys.argv[1]).call, Server(sys.argv[2]).call
deadline = time.time() + 10
while True:
    try:
        code, _ = c("/healthz", method="GET")
        if code == 200:
            break
    except (urllib.error.URLError, ConnectionError):
        pass
    if time.time() > deadline:
        sys.exit("the sibling never served")
    time.sleep(0.1)
for n in (0, 5, 40, 100, 184):
    body = {"model": "m", "token_ids": list(range(n))}
    rb, rc = b("/query", body), c("/query", body)
    assert rb == rc and rb[0] == 200, (n, rb, rc)
assert json.loads(b("/global_view", method="GET")[1]) == json.loads(c("/global_view", method="GET")[1])
PYEOF
kill -TERM "$c"
wait "$c" || fail "sibling exit after SIGTERM"
kill -TERM "$b"
wait "$b" || fail "subscribe exit after SIGTERM"
"$PY" -c '
import json,sys
t=json.load(open(sys.argv[1]))["total"]
assert t["lost"]==0 and t["gaps"]>=1 and t["recovered"]>=20, t
' "$TMP/b.json" || fail "counters of the restarted subscriber"
# The final snapshot of the clean stop holds all 45 blocks, exact.
f=$(ls "$DIR"/snapshot-*.kvsnap | tail -n 1)
run "$KVINDEX" replay "$f" --json -
expect_status 0 "final snapshot"
"$PY" -c '
import json,sys
s=json.load(open(sys.argv[1]))
src=s["sources"][0]
assert s["blocks"]==45 and src["watermark"]==44 and src["exact"] and src["lost"]==0, s
' "$stdout_file" || fail "final snapshot content"
finish
