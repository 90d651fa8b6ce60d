#!/usr/bin/env bash
# NATS down with a small --journal-buffer: the ingester keeps indexing, drops what does not fit and
# counts it; after NATS is back the journal holds the capture the ingester recorded beside it minus
# exactly the records and bytes the ingester says it lost, with a journal-lost note for the source
# (tests/data/journal_compare.py). A replica of that journal ends with no hole left open.
. "$(dirname "$0")/journal_lib.bash"

journal_start 5
http_ing=$((base + 3)) http_rep=$((base + 4))
SRC=$(fake_source "$pub")
launch_ingester ing "$http_ing" --journal-buffer 20000 --record "$TMP/cap.kvcap" \
  --json "$TMP/ing.json"
ing=$ING_PID
launch_replica rep "$http_rep" --json "$TMP/rep.json"
rep=$REP_PID
timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --count 600 --rate 200 \
  --wait-subscribers 1 --wait-timeout 20 --linger 1 >"$TMP/pub.out" 2>"$TMP/pub.err" &
pubpid=$!
sleep 1
kill -TERM "$NATS_PID"
wait "$NATS_PID" 2>/dev/null
sleep 1.5
start_nats "$nats"
wait "$pubpid" || fail "publish-fake: $(cat "$TMP/pub.err")"
wait_acked "$http_ing" some || fail "ingester after the overflow"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_rep" "$last" || fail "replica lag"
kill -TERM "$ing" "$rep"
wait "$ing" || fail "ingester exit"
wait "$rep" || fail "replica exit"
read -r lost lost_bytes < <("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; print(j["lost_records"], j["lost_bytes"])' "$TMP/ing.json")
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
run "$PY" "$KVINDEX_SOURCE_DIR/tests/data/journal_compare.py" "$TMP/cap.kvcap" "$TMP/j.kvcap" "$lost" "$lost_bytes"
expect_status 0 "the journal holds the capture minus exactly what was counted lost"
[ "$status" -eq 0 ] || cat "$stdout_file" "$stderr_file" >&2
# The replica gave up on the hole the loss left (no replay of it can come from the journal).
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; assert j["lost_notes"] >= 1 and j["given_up"] >= 1, j' \
  "$TMP/rep.json" || fail "replica did not give up on the lost stretch"
finish
