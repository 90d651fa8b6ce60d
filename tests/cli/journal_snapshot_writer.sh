#!/usr/bin/env bash
# One snapshot writer among the ingesters of a journal (docs/scale-out.md, "Several ingesters"):
# ingesters with --snapshot-to-journal hold the writer lease one at a time. The holder writes
# snapshots, the others stand by (logs, /healthz, /metrics); a clean stop hands the lease over at
# once, a kill -9 once it expires; an ingester that joined the journal late with an empty index
# never writes (a sibling warm-started from another's /snapshot may); a replica then starts from
# the new writer's snapshot and answers every final query. Uses a real nats-server.
. "$(dirname "$0")/journal_lib.bash"

journal_start 8
http_rep=$((base + 3))
SRC=$(fake_source "$pub" replay)
port_of() { echo $((base + 3 + $1)); }
declare -A ING
start_ingester() {  # start_ingester K [ARGS...]: ingester K on HTTP port base + 3 + K
  local k=$1
  shift
  LOG_LEVEL=info launch_ingester "ing$k" "$(port_of "$k")" --snapshot-to-journal 0.5 "$@"
  ING[$k]=$ING_PID
}
# wait_role K ROLE [SECONDS]: ingester K's last "journal snapshots:" line says it writes (writer),
# stands by (standby) or may not write (cold).
wait_role() {
  local want i
  case $2 in
    writer) want="writes them\$" ;;
    standby) want="this one stands by" ;;
    cold) want="not written by this ingester" ;;
  esac
  for i in $(seq $((${3:-15} * 10))); do
    grep "journal snapshots:" "$TMP/ing$1.err" 2>/dev/null | tail -n 1 | grep -q -- "$want" && return 0
    sleep 0.1
  done
  return 1
}
journal_field() {  # journal_field K FIELD: FIELD of ingester K's /healthz journal object
  http_json "$(port_of "$1")" /healthz | "$PY" -c 'import json, sys
v = json.load(sys.stdin)["journal"][sys.argv[1]]
print(str(v).lower() if isinstance(v, bool) else v)' "$2"
}

start_ingester 1
wait_role 1 writer || fail "ingester 1 did not take the lease: $(cat "$TMP/ing1.err")"
wait_port "$(port_of 1)" || fail "ingester 1 did not serve"
start_ingester 2 --warm-from "http://127.0.0.1:$(port_of 1)"
wait_role 2 standby || fail "ingester 2 did not stand by: $(cat "$TMP/ing2.err")"
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 200 --rate 1000 --wait-subscribers 2 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl"
expect_status 0 "publish-fake"
sleep 1.5
[ "$(journal_field 1 snapshot_writer)" = true ] || fail "ingester 1 /healthz is not the writer"
[ "$(journal_field 2 snapshot_writer)" = false ] || fail "ingester 2 /healthz says it writes"
[ "$(journal_field 1 snapshots_written)" -gt 0 ] || fail "the writer wrote no snapshot"
[ "$(journal_field 2 snapshots_written)" -eq 0 ] || fail "the standby wrote snapshots"
http_json "$(port_of 1)" /metrics >"$TMP/m1"
http_json "$(port_of 2)" /metrics >"$TMP/m2"
grep -q '^kvindex_journal_snapshot_writer 1$' "$TMP/m1" || fail "writer metric"
grep -q '^kvindex_journal_snapshot_writer 0$' "$TMP/m2" || fail "standby metric"
grep -q "stands by" "$TMP/ing1.err" && fail "ingester 1 stood by"

# A clean stop hands over at once.
kill -TERM "${ING[1]}"
wait "${ING[1]}" || fail "ingester 1 exit"
wait_role 2 writer 5 || fail "ingester 2 did not take over after a clean stop: $(cat "$TMP/ing2.err")"
# Late with an empty index: never a writer. Warm-started from the writer: a standby.
start_ingester 3
wait_role 3 cold || fail "ingester 3 (late, empty) did not refuse to write: $(cat "$TMP/ing3.err")"
wait_port "$(port_of 2)" || fail "ingester 2 does not serve"
start_ingester 4 --warm-from "http://127.0.0.1:$(port_of 2)"
wait_role 4 standby || fail "ingester 4 did not stand by: $(cat "$TMP/ing4.err")"
# kill -9: the lease expires (10 s after its last renewal) and the warm standby takes over.
kill -9 "${ING[2]}"
wait "${ING[2]}" 2>/dev/null
wait_role 4 writer 25 || fail "ingester 4 did not take over after kill -9: $(cat "$TMP/ing4.err")"
before=$(journal_field 4 snapshots_written)
for i in $(seq 50); do [ "$(journal_field 4 snapshots_written)" -gt "$before" ] && break; sleep 0.1; done
[ "$(journal_field 4 snapshots_written)" -gt "$before" ] || fail "ingester 4 writes no snapshot"
[ "$(journal_field 3 snapshots_written)" -eq 0 ] || fail "the late empty ingester wrote snapshots"
wait_role 3 cold 1 || fail "ingester 3 changed its mind"

# A replica starts from the new writer's snapshot and answers every final query.
LOG_LEVEL=info launch_replica rep "$http_rep"
wait_lag0 "$http_rep" "$(journal_field 4 last_acked_seq)" || fail "replica lag"
http_json "$http_rep" /healthz | "$PY" -c 'import json, sys
assert json.load(sys.stdin)["journal"]["started_from"] == "snapshot"' || fail "replica did not start from a snapshot"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers"
finish
