#!/usr/bin/env bash
# NATS stopped for a few seconds mid-stream and started again (same port, same store): the
# ingester keeps indexing and serving HTTP meanwhile, reports the journal down with records
# pending, then catches up with nothing lost; the journal then holds exactly the records of the
# capture the ingester recorded beside it (same order, same bytes: tests/data/journal_compare.py),
# and a replica that lived through the outage answers every final query exactly.
. "$(dirname "$0")/journal_lib.bash"

journal_start 5
http_ing=$((base + 3)) http_rep=$((base + 4))
SRC=$(fake_source "$pub" replay)
STATS_INTERVAL=0.5 launch_ingester ing "$http_ing" --record "$TMP/cap.kvcap" --json "$TMP/ing.json"
ing=$ING_PID
launch_replica rep "$http_rep"
timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 800 --rate 200 --drop-every 17 --wait-subscribers 1 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl" >"$TMP/pub.out" 2>"$TMP/pub.err" &
pubpid=$!
sleep 1.2
kill -TERM "$NATS_PID"
wait "$NATS_PID" 2>/dev/null
sleep 1.5
# NATS is down: the ingester still indexes and serves, and reports what waits for the journal.
"$PY" - "$http_ing" <<'PYEOF' || fail "ingester state while NATS is down"
import json, sys, urllib.request
h = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1], timeout=5).read())
j = h["journal"]
assert h["status"] == "ok" and h["blocks"] > 0, h
assert not j["connected"] and j["records_pending"] > 0 and j["bytes_pending"] > 0, j
assert j["lost_records"] == 0, j
PYEOF
sleep 1
start_nats "$nats"
wait "$pubpid" || fail "publish-fake: $(cat "$TMP/pub.err")"
# Caught up: nothing pending, nothing lost.
wait_acked "$http_ing" none || fail "ingester caught up"
grep -q "journal DOWN: [1-9][0-9]* pending" "$TMP/ing.err" || fail "status line never showed the journal down"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
rep_log() {  # the replica's log on failure: a sanitizer's report whole, else the last lines
  if grep -q "ERROR: .*Sanitizer" "$TMP/rep.err"; then
    sed -n '/ERROR: .*Sanitizer/,$p' "$TMP/rep.err" | head -120
  else
    tail -5 "$TMP/rep.err"
  fi
}
wait_lag0 "$http_rep" "$last" || fail "replica lag after the outage: $(rep_log)"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers after the outage"
kill -TERM "$ing"
wait "$ing" || fail "ingester exit"
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
run "$PY" "$KVINDEX_SOURCE_DIR/tests/data/journal_compare.py" "$TMP/cap.kvcap" "$TMP/j.kvcap" 0 0
expect_status 0 "the journal holds the capture's records"
finish
