#!/usr/bin/env bash
# `subscribe --journal --journal-batch 8`: several records of a source per JetStream message.
# publish-fake (dropped batches, recovered by replay) -> the ingester, writing snapshots into the
# journal every 0.1 s -> a real nats-server -> a replica that answers every final query
# publish-fake expects exactly; the stream holds fewer messages than records; a second replica
# started from a mid-stream snapshot (no message holds records from both sides of the point a
# snapshot covers) is exact too; `record --from-journal` splits the messages again: every live
# batch once, in order, and its replay answers the queries too.
. "$(dirname "$0")/journal_lib.bash"

journal_start 6
http_ing=$((base + 3)) http_rep=$((base + 4)) http_rep2=$((base + 5))
SRC=$(fake_source "$pub" replay)
launch_ingester ing "$http_ing" --journal-batch 8 --snapshot-to-journal 0.1 --snapshot-keep 100 \
  --json "$TMP/ing.json"
ing=$ING_PID
launch_replica rep "$http_rep"
# Fast enough that records wait for the publishing thread together. Drops are rare enough that
# the ingester often has no hole waiting for a replay, the moment a snapshot's cut needs, also
# on a loaded machine, so snapshots are taken while batches still arrive.
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 10000 --rate 10000 --drop-every 500 --wait-subscribers 1 --wait-timeout 20 --linger 3 \
  --emit-queries "$TMP/q.jsonl" --query-every 100
expect_status 0 "publish-fake"
wait_acked "$http_ing" none || fail "ingester journal state"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_rep" "$last" || fail "replica lag"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers"

kill -TERM "$ing"
wait "$ing" || fail "ingester exit"
"$PY" - "$TMP/ing.json" "$last" <<'PYEOF' || fail "fewer messages than records"
import json, sys
j = json.load(open(sys.argv[1]))["journal"]
last = int(sys.argv[2])
# Every record acknowledged, in fewer messages: the stream's last sequence counts messages.
assert j["records_acked"] == j["records_accepted"] and j["lost_records"] == 0, j
assert j["messages_acked"] == last < j["records_acked"], (j, last)
PYEOF

# Each message (of several records) names the predecessor of its first record that names one,
# computed here from the records with python3-xxhash.
"$PY" -c "$JS_PY"$'\n''
import sys
checked, replayed = check_prev_headers(sys.argv[1], "kvindex", int(sys.argv[2]))
assert checked == int(sys.argv[2]) and replayed > 0, (checked, replayed)
' "$nats" "$last" || fail "predecessor headers"
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
"$PY" - "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$TMP/j.kvcap" "$TMP/ing.json" <<'PYEOF' || fail "export"
import json, subprocess, sys
out = subprocess.run([sys.executable, sys.argv[1], sys.argv[2]], capture_output=True, text=True, check=True).stdout
records = list(map(json.loads, out.splitlines()))
assert len(records) == json.load(open(sys.argv[3]))["journal"]["records_acked"], len(records)
live = [int(r["frames"][1], 16) for r in records if r["type"] == 2]
replayed = [r for r in records if r["type"] == 3]
# Most batches arrive live (every 500th is dropped and replayed; a subscriber stalled on a loaded
# machine may lose more to its receive queue, which replay then recovers too).
assert live == sorted(set(live)) and len(live) > 2000 and replayed, (len(live), len(replayed))
PYEOF
run "$KVINDEX" replay "$TMP/j.kvcap" --queries "$TMP/q.jsonl"
expect_status 0 "replay of the export answers every query"

# A replica from a snapshot taken while batches arrived.
mid=$(keep_mid_snapshot "$nats" kvindex "$last") || fail "keeping a mid-stream snapshot"
read -r covered keep <<<"$mid"
LOG_LEVEL=info launch_replica rep2 "$http_rep2"
wait_lag0 "$http_rep2" "$last" || fail "second replica lag"
grep -q "loaded journal snapshot $keep: covers seq $covered" "$TMP/rep2.err" || fail "snapshot $keep not loaded"
check_answers "$TMP/q.jsonl" "$http_rep2" || fail "second replica answers: $(http_json "$http_rep2" /healthz)"
finish
