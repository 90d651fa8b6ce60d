#!/usr/bin/env bash
# `subscribe --http-mode pool|dedicated --http-threads N --http-max-connections M`: with the pool,
# N I/O threads serve every open connection, so more open keep-alive connections than threads are
# all answered while they stay open; dedicated, each connection has its own thread. In both, at
# --http-max-connections a further connection waits until one closes, and /metrics counts the
# threads and the open connections.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT

run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:1 --http-max-connections 0
expect_status 2 "--http-max-connections 0"
expect_stderr_contains "--http-max-connections"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:1 --http-max-connections x
expect_status 2 "--http-max-connections x"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:1 --http-mode threads
expect_status 2 "--http-mode threads"
expect_stderr_contains "--http-mode"
run "$KVINDEX" subscribe --help
expect_stdout_contains "--http-max-connections"
expect_stdout_contains "--http-mode"

for mode in pool dedicated; do

PORT=$(free_ports 1)
"$KVINDEX" subscribe --source "a=vllm@tcp://127.0.0.1:1,model=m,block-size=4" --http "127.0.0.1:$PORT" \
  --http-mode "$mode" --http-threads 2 --http-max-connections 5 --stats-interval 0 \
  >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$PORT" "$mode" <<'PYEOF' || fail "connection checks failed with --http-mode $mode (see above)"
import http.client, json, socket, sys, time
port = int(sys.argv[1])
# The pool's 2 I/O threads, or one thread per open connection.
workers = 2.0 if sys.argv[2] == "pool" else 5.0
body = json.dumps({"model": "m", "token_ids": [1, 2, 3, 4]})
want = {"data": {"default": {"a": {"longest_matched": 0, "GPU": 0, "CPU": 0, "DISK": 0, "DP": {"0": 0},
                                  "state": "exact"}}}}

def connect():
    deadline = time.time() + 20
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.connect()
            return c
        except OSError:
            if time.time() > deadline:
                sys.exit("no server")
            time.sleep(0.1)

def ask(c):
    c.request("POST", "/query", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    assert r.status == 200 and json.loads(text) == want, (r.status, text)

def answered_within(c, seconds):
    """Sends a query on c and says whether its answer arrived within `seconds`."""
    c.request("POST", "/query", body, {"Content-Type": "application/json"})
    c.sock.settimeout(seconds)
    try:
        r = c.getresponse()
    except socket.timeout:
        return False
    finally:
        c.sock.settimeout(30)
    text = r.read()
    assert r.status == 200 and json.loads(text) == want, (r.status, text)
    return True

# Five open keep-alive connections (on 2 I/O threads with the pool): each is answered at once, while every earlier
# connection stays open and keeps asking.
conns = []
for n in range(5):
    c = connect()
    for earlier in conns:
        ask(earlier)
    assert answered_within(c, 10), "connection %d of 5 was not answered while the others stayed open" % (n + 1)
    conns.append(c)
# /metrics (asked on one of the five: a new connection would wait) counts the threads and the five
# connections.
conns[0].request("GET", "/metrics")
r = conns[0].getresponse()
text = r.read().decode()
assert r.status == 200, r.status
gauges = {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
          if l.split()[0] in ("kvindex_http_workers", "kvindex_http_connections")}
assert gauges == {"kvindex_http_workers": workers, "kvindex_http_connections": 5.0}, gauges
# A sixth is over --http-max-connections 5: it waits while the five stay open (each asked again
# first, so that none nears the server's 2 s keep-alive timeout, which would close it) ...
for c in conns:
    ask(c)
sixth = connect()
sixth.request("POST", "/query", body, {"Content-Type": "application/json"})
sixth.sock.settimeout(0.5)
try:
    sixth.getresponse()
    sys.exit("a sixth connection was served beyond --http-max-connections 5")
except socket.timeout:
    pass
# ... and is answered once one of them closes.
conns.pop().close()
sixth.sock.settimeout(20)
r = sixth.getresponse()
text = r.read()
assert r.status == 200 and json.loads(text) == want, (r.status, text)
for c in conns:
    ask(c)
PYEOF
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe --http-mode $mode after SIGTERM should exit 0"
done
finish
