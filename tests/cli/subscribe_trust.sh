#!/usr/bin/env bash
# Trust states over the live path (docs/http-api.md "Trust states"): publish-fake publishers on
# loopback, `subscribe --http`, the answers checked with python3. Expected values by hand:
#  - `deg`: 21 batches, every 5th not sent live (seqs 4, 9, 14, 19) and a ring of 1, so no replay
#    can fill them: degraded, reason lost, lost_batches 4;
#  - `rst`: 14 batches, seqs 4 and 9 dropped the same way, then a restart after 12 (seq 0, 1):
#    the restart returns it to exact (reason restart);
#  - `st`: 3 batches, then silence: stale after --stale-after 1; a second publisher on the same
#    port (a restart) makes it heard again.
# Usage errors of --stale-after are exit 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --stale-after -1
expect_status 2 "--stale-after -1"
expect_stderr_contains "--stale-after"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --stale-after x
expect_status 2 "--stale-after x"
run "$KVINDEX" subscribe --help
expect_stdout_contains "--stale-after"

PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
base=$(free_ports 5) || { fail "no free ports"; finish; }
http=$((base + 4))
# pub NAME PORT ARGS...: a publish-fake source on PORT (replay ROUTER on PORT+1).
pub() {
  local name=$1 port=$2
  shift 2
  timeout 40 "$KVINDEX" publish-fake --format vllm --model m --port "$port" \
    --replay-port $((port + 1)) --rate 50 --wait-subscribers 1 --wait-timeout 20 --linger 1 \
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PUB_PID=$!
  PIDS+=($PUB_PID)
}
pub deg "$base" --count 21 --drop-every 5 --ring 1
deg_pid=$PUB_PID
pub rst $((base + 2)) --count 14 --drop-every 5 --ring 1 --restart-after 12
rst_pid=$PUB_PID
"$KVINDEX" subscribe --source "deg=vllm@tcp://127.0.0.1:$base,model=m,replay=tcp://127.0.0.1:$((base + 1))" \
  --source "rst=vllm@tcp://127.0.0.1:$((base + 2)),model=m,replay=tcp://127.0.0.1:$((base + 3))" \
  --http "127.0.0.1:$http" --stats-interval 0.2 --record "$TMP/live.kvcap" \
  >"$TMP/s1.out" 2>"$TMP/s1.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$http" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "live trust checks failed (see above)"
import calendar, json, sys, time, urllib.error
sys.path.insert(0, sys.argv[2])
from http_client import Server
call = Server(sys.argv[1]).call
start = time.time()
deadline = start + 25

def sources():
    try:
        code, text = call("/instances")
    except (urllib.error.URLError, ConnectionError):
        return None
    return {s["name"]: s for s in json.loads(text)["sources"]} if code == 200 else None

# Wait until both runs are fully ingested: deg 17 applied + 4 lost; rst 10 + 2 of the new run.
while True:
    s = sources()
    if s and s["deg"]["counters"]["applied"] + s["deg"]["counters"]["lost"] == 21 \
         and s["rst"]["counters"]["restarts"] == 1 and s["rst"]["counters"]["applied"] == 12:
        break
    if time.time() > deadline:
        sys.exit("never fully ingested: %s" % json.dumps(s and {k: v["counters"] for k, v in s.items()}))
    time.sleep(0.1)
deg, rst = s["deg"], s["rst"]
assert deg["counters"]["lost"] == 4, deg["counters"]
assert deg["trust"]["state"] == "degraded" and deg["trust"]["reason"] == "lost", deg["trust"]
assert deg["trust"]["lost_batches"] == 4, deg["trust"]
assert deg["trust"]["transitions"]["lost"] == 1, deg["trust"]
since = calendar.timegm(time.strptime(deg["trust"]["since"], "%Y-%m-%dT%H:%M:%SZ"))
assert start - 5 <= since <= time.time() + 5, (since, start)
assert rst["trust"] == {"state": "exact", "reason": "restart", "transitions": dict(
    {k: 0 for k in ["lost", "malformed", "damaged", "late_join", "orphans", "cleared", "silent", "heard"]},
    lost=1, restart=1)}, rst["trust"]

code, text = call("/query", {"model": "m", "token_ids": [1, 2, 3, 4]})
assert code == 200, (code, text)
answer = json.loads(text)["data"]["default"]
assert answer["deg"]["state"] == "degraded" and answer["deg"]["lost_batches"] == 4, answer
assert answer["deg"]["since"] == deg["trust"]["since"], answer
assert answer["rst"]["state"] == "exact" and "lost_batches" not in answer["rst"], answer
code, text = call("/query_by_hash", {"model": "m", "block_hash": [1]})
assert code == 200 and json.loads(text)["data"]["default"]["deg"]["state"] == "degraded", text
code, text = call("/cache", {"instances": ["deg", "rst", "nobody"], "token_ids": [1, 2, 3, 4], "model_name": "m", "lora_id": -1})
cache = json.loads(text)
assert code == 200 and set(cache["HitStatus"]) == {"deg", "rst", "nobody"}, text
assert cache["InstanceState"] == {"deg": {"state": "degraded", "lost_batches": 4, "since": deg["trust"]["since"]},
                                  "rst": {"state": "exact"}}, text

code, text = call("/metrics")
lines = set(text.splitlines())
for want in ['kvindex_source_state{source="deg",instance="deg",state="degraded"} 1',
             'kvindex_source_state{source="deg",instance="deg",state="exact"} 0',
             'kvindex_source_state{source="rst",instance="rst",state="exact"} 1',
             'kvindex_trust_transitions_total{source="deg",instance="deg",reason="lost"} 1',
             'kvindex_trust_transitions_total{source="rst",instance="rst",reason="restart"} 1',
             'kvindex_source_degraded_lost_batches{source="deg",instance="deg"} 4',
             'kvindex_source_degraded_lost_batches{source="rst",instance="rst"} 0',
             'kvindex_source_degraded_since_seconds{source="deg",instance="deg"} %d' % since,
             'kvindex_source_lost_total{source="rst",instance="rst"} 2']:
    assert want in lines, (want, [l for l in lines if "state" in l or "degraded" in l])
PYEOF
# `query --server` prints the state per instance.
run "$KVINDEX" query --server "http://127.0.0.1:$http" --model m --tokens 1,2,3,4
expect_status 0 "query --server"
expect_stdout_contains "degraded (4 lost since 20"
grep -E '^rst .* exact *$' "$stdout_file" >/dev/null || fail "query --server: rst is not exact"
# The status line counts sources per state (printed every 0.2 s: the first one after the restart
# may still be due).
for _ in $(seq 1 100); do
  grep -q "sources exact 1, degraded 1, stale 0" "$TMP/s1.err" && break
  sleep 0.1
done
grep -q "sources exact 1, degraded 1, stale 0" "$TMP/s1.err" || fail "status line: $(tail -2 "$TMP/s1.err")"
kill -INT $sub
wait $sub || fail "subscribe exit $?: $(tail -3 "$TMP/s1.err")"
# Offline: the capture's own losses give the same states (never stale).
run "$KVINDEX" query --capture "$TMP/live.kvcap" --model m --tokens 1,2,3,4 --json -
expect_status 0 "query --capture"
"$PY" - "$stdout_file" <<'PYEOF' || fail "offline states"
import json, sys
a = json.load(open(sys.argv[1]))["data"]["default"]
assert a["deg"]["state"] == "degraded" and a["deg"]["lost_batches"] == 4, a
assert a["rst"]["state"] == "exact", a
PYEOF

wait $deg_pid || fail "publish-fake deg: $(cat "$TMP/deg.err")"
wait $rst_pid || fail "publish-fake rst: $(cat "$TMP/rst.err")"

# Stale: a publisher that falls silent; then a new one on the same port is heard (a restart).
port=$base
pub st1 "$port" --count 3 --seed 1
"$KVINDEX" subscribe --source "st=vllm@tcp://127.0.0.1:$port,model=m" --http "127.0.0.1:$http" \
  --compat conductor --stale-after 1 --stats-interval 0 >"$TMP/s2.out" 2>"$TMP/s2.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$http" "$KVINDEX_SOURCE_DIR/tests/data" "$KVINDEX" "$port" "$TMP" <<'PYEOF' || fail "stale checks failed (see above)"
import json, subprocess, sys, time, urllib.error
sys.path.insert(0, sys.argv[2])
from http_client import Server
call = Server(sys.argv[1]).call
kvindex, port, tmp = sys.argv[3], int(sys.argv[4]), sys.argv[5]
deadline = time.time() + 25

def poll(pred, what):
    while True:
        try:
            code, text = call("/instances")
            src = json.loads(text)["sources"][0] if code == 200 else None
        except (urllib.error.URLError, ConnectionError):
            src = None
        if src and pred(src):
            return src
        if time.time() > deadline:
            sys.exit("never %s: %s" % (what, src))
        time.sleep(0.1)

poll(lambda s: s["trust"]["state"] == "stale", "stale")
code, text = call("/query", {"model": "m", "token_ids": [1, 2, 3, 4]})
assert code == 200 and json.loads(text)["default"]["st"]["state"] == "stale", text  # no data wrapper
code, text = call("/metrics")
assert 'kvindex_source_state{source="st",instance="st",state="stale"} 1' in text, text
# A new publisher on the port once the first has let it go: heard again (a different seed: a
# restart, not duplicates).
import socket
while True:
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", port))
        probe.close()
        break
    except OSError:
        probe.close()
        if time.time() > deadline:
            sys.exit("port %d never freed" % port)
        time.sleep(0.1)
again = subprocess.Popen([kvindex, "publish-fake", "--format", "vllm", "--model", "m", "--port", str(port),
                          "--replay-port", str(port + 1), "--count", "3", "--seed", "2", "--rate", "50",
                          "--wait-subscribers", "1", "--wait-timeout", "15", "--linger", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    s = poll(lambda s: s["trust"]["transitions"]["heard"] >= 1 and s["counters"]["restarts"] >= 1, "heard again")
    assert s["trust"]["transitions"]["silent"] >= 1, s["trust"]
finally:
    again.wait(timeout=20)
PYEOF
kill -INT $sub
wait $sub || fail "subscribe (stale) exit $?: $(tail -3 "$TMP/s2.err")"

finish
