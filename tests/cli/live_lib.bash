# Helpers for the live-path CLI tests (record.sh, subscribe.sh; not a .sh, so not a test itself): an independent Python publisher
# (tests/data/py_publisher.py) on loopback ports it picks itself. Sourced after lib.sh.
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
PUBLISHER=$KVINDEX_SOURCE_DIR/tests/data/py_publisher.py
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT

# plan FILE FIRST LAST [EXTRA_STEPS_JSON]: wait for a subscriber, then batches FIRST..LAST-1
# (one block each), then EXTRA (a JSON list of steps).
plan() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
steps = [{"wait_sub": True}]
for s in range(first, last):
    steps.append({"seq": s, "blocks": [[1000 + s, None if s == 0 else 999 + s,
                                        list(range(4 * s, 4 * s + 4))]]})
json.dump({"steps": steps + extra}, open(path, "w"))
PYEOF
}

# start_pub NAME PLAN [ARGS...]: starts the publisher; sets PUB_EP, REPLAY_EP, PUB_PID.
start_pub() {
  local name=$1 planfile=$2
  shift 2
  rm -f "$TMP/$name.ready"
  "$PY" "$PUBLISHER" --pub 'tcp://127.0.0.1:*' --plan "$planfile" --ready "$TMP/$name.ready" \
    --log "$TMP/$name.log" --serve 25 "$@" >/dev/null 2>&1 &
  PUB_PID=$!
  PIDS+=("$PUB_PID")
  local i
  for i in $(seq 1 400); do
    [ -s "$TMP/$name.ready" ] && break
    sleep 0.05
  done
  PUB_EP=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pub"])' "$TMP/$name.ready")
  REPLAY_EP=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("replay",""))' "$TMP/$name.ready")
}

# wait_records FILE N: waits (<= 20 s) until FILE holds at least N message records.
wait_records() {
  local i
  for i in $(seq 1 400); do
    if [ -s "$1" ] && [ "$("$PY" "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$1" 2>/dev/null | grep -c '"type": 2')" -ge "$2" ]; then
      return 0
    fi
    sleep 0.05
  done
  return 1
}

# same_messages CAPTURE LOG: the capture's message records equal the publisher's log, in order.
same_messages() {
  "$PY" - "$@" <<'PYEOF'
import json, subprocess, sys
cap, log = sys.argv[1], sys.argv[2]
out = subprocess.run([sys.executable, sys.argv[0] if False else
                      __import__("os").environ["KVINDEX_SOURCE_DIR"] + "/tests/data/capture_check.py",
                      cap], capture_output=True, text=True, check=True).stdout
got = [r["frames"] for r in map(json.loads, out.splitlines()) if r["type"] == 2]
sent = [json.loads(l) for l in open(log)]
if got != sent[:len(got)] or not got:
    sys.exit("capture messages differ from what was sent: %d vs %d" % (len(got), len(sent)))
print(len(got))
PYEOF
}

# snapshot_plan FILE: batches 0..19 live, then (once a second subscription arrives) 20..39 only
# into the ring (published while nobody listened) and 40..44 live; one chained block each.
snapshot_plan() {
  "$PY" - "$1" <<'PYEOF'
import json, sys
def batch(s, **kw):
    return dict(seq=s, blocks=[[1000 + s, None if s == 0 else 999 + s, list(range(4 * s, 4 * s + 4))]], **kw)
steps = [{"wait_sub": True}] + [batch(s) for s in range(20)] + [{"wait_subs": 2}]
# 40..43 skipped too: when the live 44 reveals the gap, the ring already holds 40..44 whatever the
# timing, so a ring of 5 answers the replay with exactly 40..43.
steps += [batch(s, skip=True) for s in range(20, 44)] + [batch(44)]
json.dump({"steps": steps + [{"sleep": 30}]}, open(sys.argv[1], "w"))
PYEOF
}

# newest_watermark DIR: the first source's watermark in the newest snapshot of DIR ("" if none).
newest_watermark() {
  local f
  f=$(ls "$1"/snapshot-*.kvsnap 2>/dev/null | tail -n 1)
  [ -n "$f" ] || return 0
  "$KVINDEX" replay "$f" --json - 2>/dev/null |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["watermark"])' 2>/dev/null
}

# wait_snapshot_watermark DIR W: waits (<= 20 s) until the newest snapshot of DIR has watermark W.
wait_snapshot_watermark() {
  local i
  for i in $(seq 1 200); do
    [ "$(newest_watermark "$1")" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
