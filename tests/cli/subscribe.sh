#!/usr/bin/env bash
# `kvindex subscribe`: every flag and error path, against the independent Python publisher.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.sh"

# Usage errors (exit 2).
run "$KVINDEX" subscribe
expect_status 2 "no source"
expect_stderr_contains "no source"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1
expect_status 2 "vLLM without model"
expect_stderr_contains "source 'a'"
expect_stderr_contains "model"
expect_stderr_lines 1
run "$KVINDEX" subscribe --source a=sglang@tcp://127.0.0.1:1,dp-size=2
expect_status 2 "SGLang without model"
expect_stderr_contains "source 'a/dp"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --warm-from "$TMP/none.kvcap"
expect_status 2 "missing --warm-from"
for flag in --duration --replay-timeout; do
  run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m $flag 0
  expect_status 2 "$flag 0"
done
for flag in --stats-interval --fsync-interval; do
  run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m $flag -1
  expect_status 2 "$flag -1"
done
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --max-blocks x
expect_status 2 "--max-blocks x"
run "$KVINDEX" subscribe --help
expect_status 0 "--help"
for flag in --source --config --record --force --fsync-interval --warm-from --max-blocks \
            --stats-interval --replay-timeout --duration --strict --json; do
  expect_stdout_contains "$flag"
done

# A --config file: the conductor's JSON.
cat >"$TMP/conf.json" <<JSON
{"kvevent_instance": {"vllm-0": {"endpoint": "tcp://127.0.0.1:1", "type": "vLLM", "modelname": "m", "block_size": 4}}}
JSON
run timeout 30 "$KVINDEX" subscribe --config "$TMP/conf.json" --duration 0.3 --stats-interval 0
expect_status 0 "--config"
expect_stdout_contains "vllm-0"

# A live run: --record, --json, --max-blocks, --stats-interval, --duration.
plan "$TMP/p1.json" 0 20 '[{"sleep": 30}]'
start_pub p1 "$TMP/p1.json" --replay 'tcp://127.0.0.1:*'
"$KVINDEX" subscribe --source "a=vllm@$PUB_EP,model=m,replay=$REPLAY_EP" --record "$TMP/s1.kvcap" \
  --json "$TMP/s1.json" --max-blocks 1000 --stats-interval 0.2 --replay-timeout 1 \
  --fsync-interval 0 >"$TMP/s1.out" 2>"$TMP/s1.err" &
sub=$!
wait_records "$TMP/s1.kvcap" 20 || fail "subscribe --record received nothing"
sleep 0.5
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe after SIGTERM should exit 0"
grep -q "resident blocks" "$TMP/s1.out" || fail "summary with resident blocks"
grep -q "kvindex subscribe: " "$TMP/s1.err" || fail "status line"
"$PY" -c '
import json,sys
j=json.load(open(sys.argv[1]))
assert j["total"]["applied"]==20 and j["total"]["lost"]==0, j["total"]
assert j["index"]["blocks"]==20, j["index"]
' "$TMP/s1.json" || fail "--json: 20 applied, 20 blocks"
[ "$(same_messages "$TMP/s1.kvcap" "$TMP/p1.log")" = 20 ] || fail "--record byte-exact"

# --warm-from: the recorded capture rebuilds the index before going live.
run timeout 30 "$KVINDEX" subscribe --source "b=vllm@tcp://127.0.0.1:1,model=m" --warm-from "$TMP/s1.kvcap" \
  --duration 0.3 --stats-interval 0 --json "$TMP/s2.json"
expect_status 0 "--warm-from"
expect_stderr_contains "warmed from 1 file(s): 20 resident blocks"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["index"]["blocks"]==20, j["index"]' "$TMP/s2.json" || fail "warm index"

# --strict: a bad frame count is fatal (exit 1, one line).
plan "$TMP/p3.json" 0 0 '[{"frames": ["00"]}, {"sleep": 30}]'
start_pub p3 "$TMP/p3.json"
run timeout 30 "$KVINDEX" subscribe --source "a=vllm@$PUB_EP,model=m" --strict --stats-interval 0 --duration 20
expect_status 1 "--strict"
expect_stderr_contains "--strict"
# Without --strict the same message is counted and skipped.
start_pub p4 "$TMP/p3.json"
run timeout 30 "$KVINDEX" subscribe --source "a=vllm@$PUB_EP,model=m" --stats-interval 0 --duration 2 --json -
expect_status 0 "bad frames counted"
expect_stdout_contains '"frame_errors": 1'

finish
