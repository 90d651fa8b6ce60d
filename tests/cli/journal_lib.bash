# Helpers for the journal CLI tests (journal_*.sh; not a .sh, so not a test itself): a real
# nats-server with JetStream on a free loopback port and a temporary store, stopped at the end,
# ingesters and replicas started on it, and checks of replicas' HTTP answers against
# publish-fake's expected answers. A test sources this file alone: it sources lib.sh,
# live_lib.bash (PIDS, its EXIT trap) and publish_fake_lib.bash (PY) itself.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/live_lib.bash"
. "$(dirname "${BASH_SOURCE[0]}")/publish_fake_lib.bash"
# Debian installs it in /usr/sbin, which a user's PATH may lack.
NATS_SERVER=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$NATS_SERVER" ] || { echo "FAIL: nats-server not found (scripts/setup.sh installs it)"; exit 1; }

# start_nats PORT [ARGS...]: starts nats-server -js on 127.0.0.1:PORT with the store
# $TMP/js-PORT; sets NATS_PID and waits (<= 10 s) until it accepts connections.
start_nats() {
  local port=$1
  shift
  "$NATS_SERVER" -js -sd "$TMP/js-$port" -a 127.0.0.1 -p "$port" "$@" >>"$TMP/nats-$port.log" 2>&1 &
  NATS_PID=$!
  PIDS+=("$NATS_PID")
  wait_port "$port" || fail "nats-server on port $port did not start"
}

# fake_source PORT [replay]: the --source of publish-fake's source fake-0 on PORT (model
# fake-model), with its replay endpoint on PORT+1 when "replay" is given.
fake_source() {
  echo "fake-0=vllm@tcp://127.0.0.1:$1,model=fake-model${2:+,replay=tcp://127.0.0.1:$(($1 + 1))}"
}

# launch_ingester NAME PORT [ARGS...]: an ingester, `subscribe --source "$SRC" --journal "$J"`
# serving HTTP on PORT, with ARGS after those flags; its output goes to $TMP/NAME.out and
# $TMP/NAME.err; its status line every STATS_INTERVAL seconds (default 0: none). Sets ING_PID to
# its pid (it does not wait for the port).
launch_ingester() {
  local name=$1 port=$2
  shift 2
  log_flags
  "$KVINDEX" "${LOG_FLAGS[@]}" subscribe --source "$SRC" --journal "$J" --http "127.0.0.1:$port" \
    --stats-interval "${STATS_INTERVAL:-0}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  ING_PID=$!
  PIDS+=("$ING_PID")
}

# launch_replica NAME PORT [ARGS...]: a replica, `subscribe --from-journal "$J"` serving HTTP on
# PORT, with ARGS after its own flags; its output is appended to $TMP/NAME.out and $TMP/NAME.err
# (a restart keeps the earlier run's). Sets REP_PID to its pid and waits until it serves.
launch_replica() {
  local name=$1 port=$2
  shift 2
  log_flags
  "$KVINDEX" "${LOG_FLAGS[@]}" subscribe --from-journal "$J" --http "127.0.0.1:$port" \
    --stats-interval 0 "$@" >>"$TMP/$name.out" 2>>"$TMP/$name.err" &
  REP_PID=$!
  PIDS+=("$REP_PID")
  wait_port "$port" || fail "replica $name on port $port did not serve"
}

# log_flags: LOG_FLAGS=(--log-level LOG_LEVEL) when LOG_LEVEL is set, else none (for the two
# launchers above).
log_flags() {
  LOG_FLAGS=()
  [ -z "${LOG_LEVEL:-}" ] || LOG_FLAGS=(--log-level "$LOG_LEVEL")
}

# journal_start N: N free loopback ports from $base on (nats-server on $nats = base, publish-fake
# on $pub = base + 1, its replay port, if any, on base + 2; the test names the rest), nats-server
# started, J its URL.
journal_start() {
  base=$(free_ports "$1")
  nats=$base pub=$((base + 1))
  start_nats "$nats"
  J=nats://127.0.0.1:$nats
}

# wait_port PORT: waits (<= 10 s) until 127.0.0.1:PORT accepts a TCP connection.
wait_port() {
  "$PY" - "$1" <<'PYEOF'
import socket, sys, time
deadline = time.time() + 10
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}

# http_json PORT PATH: GET http://127.0.0.1:PORT/PATH, the body on stdout.
http_json() {
  "$PY" -c 'import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=5).read().decode())' "$@"
}

# wait_acked PORT LOST [SECONDS]: waits (<= SECONDS, default 10) until the ingester on PORT is
# connected to the journal with nothing pending, then checks what it lost: LOST "none" (no record
# lost) or "some" (records and bytes lost). Prints the journal object of /healthz on failure.
wait_acked() {
  "$PY" - "$@" <<'PYEOF'
import json, sys, time, urllib.request
port, lost = sys.argv[1], sys.argv[2]
deadline = time.time() + (float(sys.argv[3]) if len(sys.argv) > 3 else 10)
while True:
    j = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % port, timeout=5).read())["journal"]
    if (j["connected"] and j["records_pending"] == 0) or time.time() > deadline:
        break
    time.sleep(0.1)
assert j["connected"] and j["records_pending"] == 0, j
if lost == "none":
    assert j["lost_records"] == 0, j
else:
    assert j["lost_records"] > 0 and j["lost_bytes"] > 0, j
PYEOF
}

# wait_lag0 PORT MIN_SEQ: waits (<= 15 s) until the replica on PORT has applied at least MIN_SEQ
# and reports lag 0 in /healthz.
wait_lag0() {
  "$PY" - "$@" <<'PYEOF'
import json, sys, time, urllib.request
port, min_seq = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 15
j = None
while time.time() < deadline:
    try:
        j = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % port, timeout=2).read())["journal"]
        if j["lag"] == 0 and j["applied_seq"] >= min_seq:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit("replica on %s: not caught up: %s" % (port, j))
PYEOF
}

# check_answers QUERIES PORT...: every final query of QUERIES (publish-fake --emit-queries) is
# answered exactly (its `expect`) by POST /query on each replica, and every replica gives the same
# answer body, journal_seq included (all have applied the same journal).
check_answers() {
  "$PY" - "$@" <<'PYEOF'
import json, sys, urllib.request
qfile, ports = sys.argv[1], sys.argv[2:]
def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%s/query" % port, data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())
def exact(data):
    # Every instance's answer without its trust state, which must be "exact".
    out = {}
    for name, answer in data.items():
        answer = dict(answer)
        assert answer.pop("state", None) == "exact", (name, data)
        out[name] = answer
    return out
final = [q for q in map(json.loads, open(qfile)) if "after" not in q]
assert len(final) >= 3, "too few final queries"
for q in final:
    answers = [post(p, q["query"]) for p in ports]
    for p, a in zip(ports, answers):
        assert exact(a["data"].get("default", {})) == q["expect"], (p, q["id"], a, q["expect"])
        assert isinstance(a.get("journal_seq"), int) and a["journal_seq"] > 0, a
    assert all(a == answers[0] for a in answers), answers
print(len(final), "queries exact on", len(ports), "replicas")
PYEOF
}


# JetStream's API and plain publishing over the NATS protocol itself (a socket, no client
# library): JS_PY is Python defining request(port, subject, payload) -> reply bytes, api() and
# frames(record) (a capture record's frames), for scripts
# run as "$PY" -c "$JS_PY"$'\n'"...".
JS_PY=$(cat <<'PYEOF'
import json, socket, time
def request(port, subject, payload=b""):
    if isinstance(payload, str):
        payload = payload.encode()
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    buf = b""
    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("nats closed the connection")
            buf += chunk
        out, buf = buf.split(b"\r\n", 1)
        return out
    def take(n):
        nonlocal buf
        while len(buf) < n + 2:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("nats closed the connection")
            buf += chunk
        out, buf = buf[:n], buf[n + 2:]
        return out
    assert line().startswith(b"INFO ")
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.t 1\r\n')
    s.sendall(b"PUB %s _INBOX.t %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
    s.sendall(b"PING\r\n")
    while True:
        l = line()
        if l.startswith(b"MSG "):
            reply = take(int(l.split()[-1]))
            s.close()
            return reply
        if l == b"PING":
            s.sendall(b"PONG\r\n")
        elif l.startswith(b"-ERR"):
            raise OSError(l.decode())
def api(port, what, body=None):
    return json.loads(request(port, "$JS.API." + what, json.dumps(body or {})))
def frames(record):  # the frames of one capture record (docs/capture-format.md)
    import struct
    body, out = record[32:], []
    count, at = struct.unpack_from("<I", body, 0)[0], 4
    for _ in range(count):
        (n,) = struct.unpack_from("<I", body, at)
        out.append(body[at + 4:at + 4 + n])
        at += 4 + n
    return out
def journal_links(port, stream, upto):
    # Every record of the journal's messages 1..upto with the link ids of docs/scale-out.md "Order
    # within a source", computed with python3-xxhash: yields (message seq, its headers, its
    # subject, first record of the message?, the source's last batch record's (link, chained)
    # before this record or None, this record's (link, chained) or None when it is not a batch
    # record, its record type, its body).
    import base64, struct, xxhash
    TAG, END = 0x7265706c61796564, 2**64 - 1
    links = {}
    for n in range(1, upto + 1):
        m = api(port, "STREAM.MSG.GET." + stream, {"seq": n})["message"]
        data = base64.b64decode(m["data"])
        hdrs = base64.b64decode(m.get("hdrs", "")).decode().split("\r\n")[1:]
        hdrs = dict(h.split(": ", 1) for h in hdrs if ": " in h)
        pos, first = 0, True
        while pos < len(data):
            length, rtype = struct.unpack_from("<IB", data, pos)
            record = data[pos:pos + length]
            pos += length
            if rtype not in (2, 3):
                yield n, hdrs, m["subject"], first, links.get(m["subject"]), None, rtype, record[32:]
                first = False
                continue
            f = frames(record)
            seq = int.from_bytes(f[1], "big")
            link = xxhash.xxh3_64_intdigest(b"" if seq == END else f[-1], seed=seq)
            prev = links.get(m["subject"])
            chained = link
            if rtype == 3:
                seed = (0 if prev is None else prev[1]) ^ TAG
                chained = xxhash.xxh3_64_intdigest(struct.pack("<Q", link), seed=seed)
            links[m["subject"]] = (link, chained)
            yield n, hdrs, m["subject"], first, prev, (link, chained), rtype, None
            first = False
def check_prev_headers(port, stream, upto):
    # Every message of 1..upto names, by link id (Kvindex-Prev) and chained link id
    # (Kvindex-Chained-Prev), the predecessor of its first record that names one (any record but a
    # definition and a journal-lost note): its source's last batch record before it, or none.
    # Returns (messages checked, replay records seen).
    named, headers, replayed = {}, {}, 0
    for n, hdrs, subject, first, prev, link, rtype, body in journal_links(port, stream, upto):
        headers[n] = hdrs
        replayed += rtype == 3
        if n in named or rtype == 1 or (rtype == 8 and body == b"journal-lost"):
            continue
        named[n] = prev
    for n, hdrs in headers.items():
        prev = named.get(n)
        for header, i in (("Kvindex-Prev", 0), ("Kvindex-Chained-Prev", 1)):
            want = None if prev is None else "%016x" % prev[i]
            assert hdrs.get(header) == want, (n, header, hdrs, want)
    return len(headers), replayed
PYEOF
)

# keep_mid_snapshot PORT STREAM LAST: removes every journal snapshot of STREAM (in STREAM_SNAP)
# but the newest one that covers less than the journal's LAST sequence, and prints "COVERED ID"
# of the one kept.
keep_mid_snapshot() {
  "$PY" -c "$JS_PY"$'\n''
import base64, sys
port, stream, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
S = stream + "_SNAP"
subjects = api(port, "STREAM.INFO." + S, {"subjects_filter": S + ".*.m"})["state"]["subjects"]
snaps = []
for subject in subjects:
    text = base64.b64decode(api(port, "STREAM.MSG.GET." + S, {"last_by_subj": subject})["message"]["data"]).decode()
    fields = dict(l.split(" ", 1) for l in text.splitlines() if " " in l)
    snaps.append((int(fields["covered_seq"]), int(fields["id"])))
assert len(snaps) >= 3, snaps
covered, keep = max(s for s in snaps if 1 < s[0] < last)
for c, i in snaps:
    if i != keep:
        assert api(port, "STREAM.PURGE." + S, {"filter": "%s.%d.>" % (S, i)})["success"]
print(covered, keep)' "$@"
}

# wait_log FILE TEXT: waits (<= 15 s) until FILE contains TEXT.
wait_log() {
  local i
  for i in $(seq 150); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
