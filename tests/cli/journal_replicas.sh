#!/usr/bin/env bash
# publish-fake (dropped batches, recovered by replay) -> `subscribe --journal` -> a real
# nats-server -> two `subscribe --from-journal` replicas: every final query publish-fake expects
# (its own model, which never links the index) is answered exactly and identically by both; a
# replica killed with SIGKILL and restarted catches up and is exact again; `record --from-journal`
# exports the journal as a capture whose replay answers every query, `after` positions included.
. "$(dirname "$0")/journal_lib.bash"

journal_start 6
http_ing=$((base + 3)) http_a=$((base + 4)) http_b=$((base + 5))
SRC=$(fake_source "$pub" replay)
launch_ingester ing "$http_ing" --journal-stream kvtest --json "$TMP/ing.json"
ing=$ING_PID
start_replica() {
  launch_replica "rep-$1" "$1" --journal-stream kvtest
}
start_replica "$http_a"
rep_a=$REP_PID
start_replica "$http_b"
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 300 --rate 3000 --drop-every 11 --wait-subscribers 1 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl" --query-every 30
expect_status 0 "publish-fake"

# The ingester's journal: everything acknowledged, nothing lost.
wait_acked "$http_ing" none || fail "ingester journal state"
http_json "$http_ing" /healthz | "$PY" -c 'import json, sys
j = json.load(sys.stdin)["journal"]
assert j["role"] == "ingester" and j["last_acked_seq"] > 300, j' || fail "ingester journal role and sequence"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_a" "$last" || fail "replica a lag"
wait_lag0 "$http_b" "$last" || fail "replica b lag"
check_answers "$TMP/q.jsonl" "$http_a" "$http_b" || fail "replica answers"
# Every message names its first record's predecessor (none for a definition) by link id
# (Kvindex-Prev) and by chained link id (Kvindex-Chained-Prev), computed here independently with
# python3-xxhash (docs/scale-out.md "Order within a source"); replays are among the records
# (--drop-every); a message that begins with a note or an observation is checked the same way.
"$PY" -c "$JS_PY"$'\n''
import sys
checked, replayed = check_prev_headers(sys.argv[1], "kvtest", int(sys.argv[2]))
assert replayed > 0 and checked > 300, (replayed, checked)
' "$nats" "$last" || fail "predecessor headers"
# /metrics names the journal position.
http_json "$http_a" /metrics | grep -q "^kvindex_journal_applied_seq $last\$" || fail "metrics applied_seq"
http_json "$http_a" /metrics | grep -q "^kvindex_journal_lag 0\$" || fail "metrics lag"
http_json "$http_ing" /metrics | grep -q "^kvindex_journal_lost_records 0\$" || fail "ingester metrics"
# A replica takes its sources from the journal: /register is refused (501).
code=$("$PY" -c 'import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/register" % sys.argv[1], data=b"{}"), timeout=5)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)' "$http_a")
[ "$code" = 501 ] || [ "$code" = 400 ] || fail "replica /register answered $code"

# SIGKILL a replica and start it again: it applies the journal from the start and is exact again.
kill -9 "$rep_a"
wait "$rep_a" 2>/dev/null
start_replica "$http_a"
wait_lag0 "$http_a" "$last" || fail "restarted replica lag"
check_answers "$TMP/q.jsonl" "$http_a" "$http_b" || fail "answers after the restart"

# The journal as a capture: its replay answers every emitted query, `after` positions included.
run "$KVINDEX" record --from-journal "$J" --journal-stream kvtest --out "$TMP/j.kvcap" --json "$TMP/rec.json"
expect_status 0 "record --from-journal"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; assert j["last_seq"]==int(sys.argv[2]) and j["records"]==j["last_seq"], j' \
  "$TMP/rec.json" "$last" || fail "export covers the stream"
run "$KVINDEX" replay "$TMP/j.kvcap" --queries "$TMP/q.jsonl"
expect_status 0 "replay of the export"
expect_stderr_contains " 0 differ"

kill -TERM "$ing"
wait "$ing" || fail "ingester exit after SIGTERM"
"$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["total"]["lost"]==0 and t["journal"]["lost_records"]==0, t' \
  "$TMP/ing.json" || fail "ingester summary"
finish
