#!/usr/bin/env bash
# Journal retention (`--journal-max-bytes`): two ingesters of the same publish-fake journal to two
# streams that keep at most 40,000 bytes, one of them with `--snapshot-to-journal`. JetStream drops
# the oldest records (the source definitions first); a replica that joins afterwards starts from
# the snapshot and answers every final query publish-fake expects exactly; a replica of the stream
# without snapshots says what it could not apply (skipped sequences in /healthz, /metrics and its
# log) instead of serving as if complete. Last, an ingester given other limits updates the existing
# stream's. Uses a real nats-server.
. "$(dirname "$0")/journal_lib.bash"

journal_start 7
http_a=$((base + 3)) http_b=$((base + 4)) http_ra=$((base + 5)) http_rb=$((base + 6))
SRC=$(fake_source "$pub" replay)
LOG_LEVEL=info  # every kvindex started below logs at info
launch_ingester a "$http_a" --journal-stream kvret --journal-max-bytes 40000 \
  --snapshot-to-journal 0.5
ing_a=$ING_PID
launch_ingester b "$http_b" --journal-stream kvret2 --journal-max-bytes 40000 \
  --journal-max-age 3600
ing_b=$ING_PID
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 300 --rate 300 --drop-every 11 --wait-subscribers 2 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl" --query-every 30
expect_status 0 "publish-fake"
wait_acked "$http_a" none || fail "ingester a journal state"
wait_acked "$http_b" none || fail "ingester b journal state"
last_seq() { http_json "$1" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])'; }
last_a=$(last_seq "$http_a")
last_b=$(last_seq "$http_b")
wait_log "$TMP/a.err" "covers seq $last_a," || fail "no snapshot covers seq $last_a"
kill -TERM "$ing_a" "$ing_b"
wait "$ing_a" || fail "ingester a exit"
wait "$ing_b" || fail "ingester b exit"

# The streams as JetStream reports them: limits set, the oldest records (seq 1, the definition) gone.
first_seq() {
  "$PY" -c "$JS_PY"$'\n''
import sys
info = api(sys.argv[1], "STREAM.INFO." + sys.argv[2])
assert info["config"]["max_bytes"] == 40000, info["config"]
assert sys.argv[2] != "kvret2" or info["config"]["max_age"] == 3600 * 10**9, info["config"]
assert info["state"]["bytes"] <= 40000 and info["state"]["first_seq"] > 1, info["state"]
assert info["state"]["last_seq"] == int(sys.argv[3]), info["state"]
print(info["state"]["first_seq"])' "$nats" "$@"
}
first_a=$(first_seq kvret "$last_a") || fail "stream kvret"
first_b=$(first_seq kvret2 "$last_b") || fail "stream kvret2"

start_replica() {  # start_replica STREAM PORT
  launch_replica "rep-$1" "$2" --journal-stream "$1"
}
start_replica kvret "$http_ra"
start_replica kvret2 "$http_rb"
wait_lag0 "$http_ra" "$last_a" || fail "replica a lag"
wait_lag0 "$http_rb" "$last_b" || fail "replica b lag"
check_answers "$TMP/q.jsonl" "$http_ra" || fail "replica from the snapshot"
http_json "$http_ra" /healthz | "$PY" -c 'import json, sys
j = json.load(sys.stdin)["journal"]
assert j["started_from"] == "snapshot" and j["snapshot_seq"] == int(sys.argv[1]) and j["skipped_seqs"] == 0, j' \
  "$last_a" || fail "replica a start"
# Without a snapshot: every sequence before the stream's first is counted skipped and logged; the
# source's definition was among them, so nothing could be applied.
http_json "$http_rb" /healthz | "$PY" -c 'import json, sys
h = json.load(sys.stdin)
j = h["journal"]
assert j["started_from"] == "stream" and j["skipped_seqs"] == int(sys.argv[1]) - 1, j
assert h["blocks"] == 0, h' "$first_b" || fail "replica b says what it lacks"
http_json "$http_rb" /metrics | grep -q "^kvindex_journal_skipped_seqs $((first_b - 1))\$" || fail "replica b metrics"
grep -q "the journal no longer holds seq 1\.\.$((first_b - 1)) ($((first_b - 1)) records dropped" "$TMP/rep-kvret2.err" \
  || fail "replica b log"

# An ingester given other limits on an existing stream changes them (said in its log); one given
# none leaves them.
http_c=$(free_ports 1)
launch_ingester c "$http_c" --journal-stream kvret2 --journal-max-bytes 80000 \
  --journal-max-age 7200
ing_c=$ING_PID
wait_log "$TMP/c.err" "journal stream 'kvret2': retention changed from max age 3600 s, max bytes 40000 to max age 7200 s, max bytes 80000" \
  || fail "ingester c did not change the retention: $(cat "$TMP/c.err")"
kill -TERM "$ing_c"
wait "$ing_c" || fail "ingester c exit"
launch_ingester d "$http_c" --journal-stream kvret2
ing_d=$ING_PID
wait_port "$http_c" || fail "ingester d did not serve"
wait_acked "$http_c" none || fail "ingester d journal state"
kill -TERM "$ing_d"
wait "$ing_d" || fail "ingester d exit"
grep -q "retention changed" "$TMP/d.err" && fail "ingester d changed the retention"
"$PY" -c "$JS_PY"$'\n''
import sys
config = api(sys.argv[1], "STREAM.INFO.kvret2")["config"]
assert config["max_bytes"] == 80000 and config["max_age"] == 7200 * 10**9, config' "$nats" \
  || fail "stream kvret2 limits after the update"
finish
