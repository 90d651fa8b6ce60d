#!/usr/bin/env bash
# bench/http_load, the open-loop generator of scripts/bench-http.sh, checked against the server's
# own count: 1.5 s at 200 requests/s over 3 connections (0.5 s of it warm-up) must send exactly
# 300 /query requests, all answered 200, and report 200 measured latencies; the server's
# /metrics query count must rise by exactly 300. Usage errors exit 2. bench/http_floor (the
# machine's latency floor in bench-http.sh) must answer the same load with 0 errors and survive a
# request that is not HTTP. A run whose idle connections the server closes (keep-alive timeout)
# still sends and counts every request. The generator's stall probe sees a stop made on purpose
# and leaves the requests it delayed out of the clear percentiles.
. "$(dirname "$0")/../cli/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
[ -x "$HTTP_LOAD" ] || fail "HTTP_LOAD not set"

run "$HTTP_LOAD" --rate 10
expect_status 2 "no --bodies"
run "$HTTP_LOAD" --bodies x --rate 0 --port 1
expect_status 2 "--rate 0"

PORT=$(free_ports 1)
"$KVINDEX" subscribe --source "a=vllm@tcp://127.0.0.1:1,model=m,block-size=4" --http "127.0.0.1:$PORT" \
  --http-threads 2 --stats-interval 0 >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
PIDS+=($sub)
count() {  # the server's /query count
  "$PY" - "$PORT" <<'PYEOF'
import sys, time, urllib.request
deadline = time.time() + 20
while True:
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
        break
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.1)
print(sum(int(float(l.split()[-1])) for l in text.splitlines()
          if l.startswith("kvindex_http_requests_total{") and 'endpoint="/query"' in l))
PYEOF
}
before=$(count)
printf '%s\n' '{"model": "m", "token_ids": [1, 2, 3, 4]}' '{"model": "m", "token_ids": [5, 6, 7, 8, 9]}' >"$TMP/bodies.jsonl"
run "$HTTP_LOAD" --port "$PORT" --bodies "$TMP/bodies.jsonl" --rate 200 --duration 1 --warmup 0.5 \
  --connections 3 --out "$TMP/r.json" --samples "$TMP/s.tsv"
expect_status 0 "http_load run"
after=$(count)
[ $((after - before)) -eq 300 ] || fail "server saw $((after - before)) /query requests, want 300"
"$PY" - "$TMP/r.json" "$TMP/s.tsv" <<'PYEOF' || fail "http_load result"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["measured"] == 200 and r["errors"] == 0 and r["connections"] == 3, r
assert r["duration_s"] == 1 and r["warmup_s"] == 0.5, r
assert 0 < r["p50_us"] <= r["p99_us"] <= r["max_us"], r
rows = [list(map(int, l.split())) for l in open(sys.argv[2])]
assert len(rows) == 200, len(rows)
# Due times of the measured requests: 500 ms (warm-up) + k * 5 ms.
assert [d for d, _ in rows] == [500000 + 5000 * k for k in range(200)], rows[:3]
# The samples are whole microseconds (truncated), max_us is rounded to 0.1 us.
assert abs(max(l for _, l in rows) - r["max_us"]) <= 1, (max(l for _, l in rows), r["max_us"])
# The stall figures are there; requests clear of stalls are a subset of the measured ones.
assert 0 <= r["clear"] <= r["measured"] and r["machine_stalls"] >= 0, r
assert r["machine_stalls"] > 0 or r["clear"] == r["measured"], r
PYEOF

# A stall made on purpose: the generator is stopped (SIGSTOP) for 300 ms inside its measured window,
# so its probe thread wakes at least 250 ms late once, and every request due during the stop
# (about 60 at 200/s) overlaps that stall: they leave the clear percentiles, which must then be
# below the stall's length while the plain p99 is above it.
"$HTTP_LOAD" --port "$PORT" --bodies "$TMP/bodies.jsonl" --rate 200 --duration 2 --warmup 0.5 \
  --connections 3 --out "$TMP/stop.json" >/dev/null 2>&1 &
load=$!
PIDS+=($load)
sleep 1.5
kill -STOP $load
sleep 0.3
kill -CONT $load
wait $load || fail "http_load run with a stop"
"$PY" - "$TMP/stop.json" <<'PYEOF' || fail "http_load stall probe"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["measured"] == 400 and r["errors"] == 0, r
assert r["machine_stalls"] >= 1 and r["machine_stall_max_us"] >= 250000, r
assert r["machine_stalled_ms"] >= 250, r
assert r["measured"] - r["clear"] >= 50, r
assert r["p99_us"] >= 200000 and r["p99_us_clear"] < 200000, r
PYEOF
kill -TERM $sub
wait $sub

# A server that closes connections idle for 0.3 s and stalls for 200 ms after every 20th request
# (tests/data/idle_closing_server.py): at 40 requests/s the generator reuses its most recent
# connection, so the others idle out and are reconnected, and the stalls make all 3 busy at
# once. Every request must be sent once and counted once, and the run must end. (The generator used
# to put a connection closed while idle on its idle list a second time, then sent two requests at
# once on it and waited forever for the first one's answer.)
"$PY" "$(dirname "$0")/../data/idle_closing_server.py" "$TMP/idle.count" >"$TMP/idle.port" &
idle_server=$!
PIDS+=($idle_server)
for _ in $(seq 1 100); do [ -s "$TMP/idle.port" ] && break; sleep 0.1; done
run timeout 20 "$HTTP_LOAD" --port "$(cat "$TMP/idle.port")" --bodies "$TMP/bodies.jsonl" --rate 40 \
  --duration 3 --warmup 0 --connections 3 --out "$TMP/idle.json"
[ "$status" -ne 124 ] || fail "http_load hung on connections closed while idle"
kill -TERM $idle_server
wait $idle_server
"$PY" - "$TMP/idle.json" "$TMP/idle.count" <<'PYEOF' || fail "http_load with connections closed while idle"
import json, sys
r = json.load(open(sys.argv[1]))
answered = int(open(sys.argv[2]).read())
# A request sent just as the server closes the idle connection is an error (a real client's race
# too), never a second send: what the server answered is exactly what was measured.
assert r["measured"] + r["errors"] == 120 and r["errors"] <= 3, r
assert answered == r["measured"], (answered, r)
PYEOF

[ -x "$HTTP_FLOOR" ] || fail "HTTP_FLOOR not set"
run "$HTTP_FLOOR"
expect_status 2 "http_floor without --port"
run "$HTTP_FLOOR" --port 1 --host nowhere
expect_status 2 "http_floor --host not an address"
FPORT=$(free_ports 1)
"$HTTP_FLOOR" --port "$FPORT" >"$TMP/f.out" 2>"$TMP/f.err" &
floor=$!
PIDS+=($floor)
"$PY" - "$FPORT" <<'PYEOF' || fail "http_floor: garbage, then a real request"
import socket, sys, time
port = int(sys.argv[1])
deadline = time.time() + 20
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5); break
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.1)
s.sendall(b"\x00garbage without a header line\r\nno colon here\r\n\r\n")
assert s.recv(100) == b"", "a request that is not HTTP closes the connection"
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"POST /query HTTP/1.1\r\nHost: x\r\ncontent-LENGTH: 2\r\n\r\n{}")
answer = b""
while not answer.endswith(b'{"floor":true}'):
    chunk = s.recv(1000)
    assert chunk, answer
    answer += chunk
assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 14\r\n" in answer, answer
PYEOF
run "$HTTP_LOAD" --port "$FPORT" --bodies "$TMP/bodies.jsonl" --rate 200 --duration 1 --warmup 0.5 \
  --connections 3 --out "$TMP/f.json"
expect_status 0 "http_load against http_floor"
"$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["measured"] == 200 and r["errors"] == 0, r
' "$TMP/f.json" || fail "http_floor result"
kill -TERM $floor
wait $floor || fail "http_floor exits 0 on SIGTERM"
finish
