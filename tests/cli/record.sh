#!/usr/bin/env bash
# `kvindex record`: every flag and error path, against the independent Python publisher.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

# Usage errors (exit 2, one line + the --help hint).
run "$KVINDEX" record --source a=vllm@tcp://127.0.0.1:1
expect_status 2 "no --out"
expect_stderr_contains "--out"
run "$KVINDEX" record --out "$TMP/x.kvcap"
expect_status 2 "no source"
expect_stderr_contains "no source"
expect_stderr_lines 1
run "$KVINDEX" record --source 'a=vllm@tcp://h:1,blok-size=4' --out "$TMP/x.kvcap"
expect_status 2 "bad --source key"
expect_stderr_contains "blok-size"
run "$KVINDEX" record --config "$TMP/missing.json" --out "$TMP/x.kvcap"
expect_status 2 "missing --config"
for flag in --duration --count --rotate-bytes --rotate-seconds --replay-timeout; do
  run "$KVINDEX" record --source a=vllm@tcp://127.0.0.1:1 --out "$TMP/x.kvcap" $flag 0
  expect_status 2 "$flag 0"
done
for flag in --fsync-interval --stats-interval; do
  run "$KVINDEX" record --source a=vllm@tcp://127.0.0.1:1 --out "$TMP/x.kvcap" $flag -1
  expect_status 2 "$flag -1"
done
run "$KVINDEX" record --source a=vllm@nonsense://x --out "$TMP/bad.kvcap" --duration 1
expect_status 2 "endpoint zmq rejects"
expect_stderr_contains "source 'a'"
run "$KVINDEX" record --help
expect_status 0 "--help"
for flag in --source --config --out --force --duration --count --rotate-bytes --rotate-seconds \
            --fsync-interval --replay-timeout --stats-interval --json; do
  expect_stdout_contains "$flag"
done

# Runtime errors (exit 1, one line).
touch "$TMP/exists.kvcap"
run "$KVINDEX" record --source a=vllm@tcp://127.0.0.1:1 --out "$TMP/exists.kvcap" --duration 1
expect_status 1 "existing --out"
expect_stderr_lines 1
"$PY" -c 'import zmq,time,sys; c=zmq.Context(); s=c.socket(zmq.PUB); s.bind("tcp://127.0.0.1:*"); open(sys.argv[1],"w").write(s.getsockopt(zmq.LAST_ENDPOINT).decode()); time.sleep(15)' "$TMP/busy" &
PIDS+=($!)
for i in $(seq 1 100); do [ -s "$TMP/busy" ] && break; sleep 0.05; done
run "$KVINDEX" record --source "a=vllm@$(cat "$TMP/busy"),bind" --out "$TMP/busy.kvcap" --duration 1
expect_status 1 "bind on a busy port"
expect_stderr_contains "cannot bind"
expect_stderr_lines 1

# --count: the capture holds exactly what was sent, byte for byte; --json; --fsync-interval 0.
plan "$TMP/p1.json" 0 20
start_pub p1 "$TMP/p1.json"
run timeout 30 "$KVINDEX" record --source "a=vllm@$PUB_EP" --out "$TMP/c1.kvcap" --count 20 \
  --json "$TMP/c1.json" --fsync-interval 0 --stats-interval 0
expect_status 0 "record --count"
expect_stdout_contains "capture: $TMP/c1.kvcap"
[ "$(same_messages "$TMP/c1.kvcap" "$TMP/p1.log")" = 20 ] || fail "20 messages byte-exact"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["total"]["received"]==20 and j["command"]=="record", j' "$TMP/c1.json" || fail "--json summary"

# --force overwrites.
run timeout 30 "$KVINDEX" record --source "a=vllm@$PUB_EP" --out "$TMP/c1.kvcap" --force --duration 0.3 --stats-interval 0
expect_status 0 "--force"

# SIGTERM flushes and exits 0 with a summary; --stats-interval prints status lines; a replay
# endpoint and --replay-timeout are accepted; --rotate-bytes rotates.
plan "$TMP/p2.json" 0 300 '[{"sleep": 30}]'
start_pub p2 "$TMP/p2.json" --replay 'tcp://127.0.0.1:*'
"$KVINDEX" record --source "a=vllm@$PUB_EP,replay=$REPLAY_EP" --out "$TMP/c2.kvcap" \
  --stats-interval 0.2 --replay-timeout 0.5 --rotate-bytes 4096 --rotate-seconds 60 \
  >"$TMP/c2.out" 2>"$TMP/c2.err" &
rec=$!
wait_records "$TMP/c2.kvcap" 1 || fail "no record appeared"
sleep 0.5
kill -TERM $rec
wait $rec
[ $? -eq 0 ] || fail "record after SIGTERM should exit 0"
grep -q "received" "$TMP/c2.out" || fail "summary on stdout"
grep -q "kvindex record: " "$TMP/c2.err" || fail "status line on stderr"
[ -s "$TMP/c2.1.kvcap" ] || fail "--rotate-bytes made no second file"
files=$(ls "$TMP"/c2*.kvcap | sort -V)
"$PY" "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" $files >/dev/null || fail "rotated files read back"

# --rotate-bytes below a file header: one record per file, and --duration still ends the run
# (a threshold the new file's own header and definitions exceed never rotates it again at once).
plan "$TMP/ptiny.json" 0 20 '[{"sleep": 30}]'
start_pub ptiny "$TMP/ptiny.json"
run timeout 20 "$KVINDEX" record --source "a=vllm@$PUB_EP" --out "$TMP/tiny.kvcap" --rotate-bytes 1 \
  --duration 1.5 --stats-interval 0
expect_status 0 "--rotate-bytes 1 with --duration"
ntiny=$(ls "$TMP"/tiny*.kvcap | wc -l)
[ "$ntiny" -ge 2 ] && [ "$ntiny" -le 100 ] || fail "--rotate-bytes 1 made $ntiny files"
files=$(ls "$TMP"/tiny*.kvcap | sort -V)
"$PY" "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" $files >/dev/null || fail "tiny rotated files read back"

# kill -9 mid-stream: every complete record reads back.
plan "$TMP/p3.json" 0 200 '[{"sleep": 30}]'
start_pub p3 "$TMP/p3.json"
"$KVINDEX" record --source "a=vllm@$PUB_EP" --out "$TMP/c3.kvcap" --stats-interval 0 >/dev/null 2>&1 &
rec=$!
wait_records "$TMP/c3.kvcap" 50 || fail "record did not receive"
kill -9 $rec
wait $rec 2>/dev/null
n=$(same_messages "$TMP/c3.kvcap" "$TMP/p3.log") || fail "capture after kill -9 does not read back"
[ "${n:-0}" -ge 50 ] || fail "kill -9 capture holds $n messages"
# The recorder was idle when killed: its file ends in reserved zero bytes, which replay reports as
# the tail (one line, exit 0) after reading every record.
run "$KVINDEX" replay "$TMP/c3.kvcap" --json "$TMP/c3.json"
expect_status 0 "replay of a killed recorder's capture"
grep -q "c3.kvcap: byte [0-9]*: zero bytes from here to the end of the file" "$stderr_file" ||
  fail "zero tail not reported: $(cat "$stderr_file")"

# --duration ends a quiet recording.
run timeout 30 "$KVINDEX" record --source a=vllm@tcp://127.0.0.1:1 --out "$TMP/c4.kvcap" --duration 0.3
expect_status 0 "--duration"

finish
