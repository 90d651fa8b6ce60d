#!/usr/bin/env bash
# A replica never stops on a journal record it cannot use: a body that is no capture record and
# a source definition whose text is not JSON, published into the stream by a raw NATS client
# (the protocol's PUB, not kvindex's code), are counted as bad records and skipped, and the
# replica goes on: every final query publish-fake expects is answered exactly once it has
# applied the stream to its end, and it exits 0 with `bad_records` 2 in its --json.
. "$(dirname "$0")/journal_lib.bash"

journal_start 5
http_ing=$((base + 3)) http_rep=$((base + 4))
SRC=$(fake_source "$pub")
launch_ingester ing "$http_ing" --journal-stream kvbad
launch_replica rep "$http_rep" --journal-stream kvbad --json "$TMP/rep.json"
rep=$REP_PID
# Half the stream, the two bad records, the other half.
fake() {
  run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --count 100 --rate 2000 \
    --seed "$1" --wait-subscribers 1 --wait-timeout 20 --linger 0.5 --emit-queries "$TMP/q$1.jsonl"
  expect_status 0 "publish-fake $1"
}
fake 1
wait_acked "$http_ing" none || fail "ingester journal state"
"$PY" - "$nats" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "raw NATS publish"
import socket, sys
sys.path.insert(0, sys.argv[2])
import kvcap
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
f = s.makefile("rb")
assert f.readline().startswith(b"INFO "), "no INFO"
def pub(subject, body):
    s.sendall(b"PUB %s %d\r\n%s\r\n" % (subject, len(body), body))
s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
pub(b"kvbad.src.00000000000000ab", b"not a capture record")
pub(b"kvbad.src.00000000000000ac", kvcap.record(kvcap.SOURCE, 1, 1750000000000000000, b"{not json"))
s.sendall(b"PING\r\n")
line = f.readline()
while line.startswith(b"INFO ") or line == b"+OK\r\n":
    line = f.readline()
assert line == b"PONG\r\n", line
PYEOF
fake 2
wait_acked "$http_ing" none || fail "ingester journal state after the bad records"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_rep" "$last" || fail "replica after the bad records: $(tail -3 "$TMP/rep.err")"
check_answers "$TMP/q2.jsonl" "$http_rep" || fail "replica answers after the bad records"
grep -q "replica: journal seq [0-9]*: skipped: " "$TMP/rep.err" || fail "no log line for the refused record"
kill -TERM "$rep"
wait "$rep" || fail "replica exit $?: $(tail -3 "$TMP/rep.err")"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; assert j["bad_records"] == 2, j' \
  "$TMP/rep.json" || fail "replica --json: bad_records"
finish
