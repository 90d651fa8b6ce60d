#!/usr/bin/env bash
# --source NAME=auto@http://HOST:PORT: the engine's HTTP server (a stand-in answering as SGLang's
# /server_info, or as vLLM's /kv_event_sources and /v1/models) names the event endpoints, topic,
# block size, DP size and model; subscribe and record then receive publish-fake's events there and
# answer every query publish-fake expects (docs/cli.md "Engine discovery").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/auto_lib.bash"

# 1. SGLang, two DP ranks on port + r, a replay endpoint, wildcard bind hosts: subscribe.
port=$(free_ports 4)
sglang_info "$TMP/info.json" \
  "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:$port\", \"replay_endpoint\": \"tcp://*:$((port + 2))\", \"topic\": \"\"}" \
  '{"dp_size": 2}'
start_engine sg --route "/server_info=$TMP/info.json"
"$KVINDEX" subscribe --source "fake-0=auto@$ENGINE_URL" --record "$TMP/sg.kvcap" \
  --json "$TMP/sg.json" --stats-interval 0 >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub=$!
PIDS+=("$sub")
run timeout 30 "$KVINDEX" publish-fake --format sglang --dp-ranks 2 --port "$port" \
  --replay-port "$((port + 2))" --count 60 --rate 2000 --drop-every 9 \
  --wait-subscribers 1 --wait-timeout 20 --linger 2 --emit-queries "$TMP/sg.q.jsonl"
expect_status 0 "publish-fake sglang"
kill -TERM "$sub"
wait "$sub"
[ $? -eq 0 ] || { cat "$TMP/sub.err" >&2; fail "subscribe auto@ (sglang) exit"; }
grep -qF "source 'fake-0': sglang engine at $ENGINE_URL: tcp://127.0.0.1:$port and 1 more rank(s), model fake-model, block size 16" \
  "$TMP/sub.err" || { cat "$TMP/sub.err" >&2; fail "sglang discovery line"; }
"$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))
t = s["total"]
assert t["applied"] == 120 and t["lost"] == 0 and t["recovered"] >= 12, t
' "$TMP/sg.json" || fail "sglang counters"
run "$KVINDEX" replay "$TMP/sg.kvcap" --queries "$TMP/sg.q.jsonl"
expect_status 0 "replay --queries of the sglang recording"
expect_stderr_contains " 0 differ"

# 2. vLLM: one rank with its bound endpoint (a 0.0.0.0 host), a topic, the model from
#    /v1/models, no /server_info: record.
port=$(free_ports 1)
echo "[{\"data_parallel_rank\": 0, \"endpoint\": \"tcp://0.0.0.0:$port\", \"replay_endpoint\": null, \"topic\": \"kv-events\"}]" >"$TMP/sources.json"
echo '{"object": "list", "data": [{"id": "fake-model", "object": "model", "max_model_len": 4096}]}' >"$TMP/models.json"
start_engine vl --route "/kv_event_sources=$TMP/sources.json" --route "/v1/models=$TMP/models.json"
"$KVINDEX" record --source "fake-0=auto@$ENGINE_URL" --out "$TMP/vl.kvcap" --json "$TMP/vl.json" \
  --stats-interval 0 >"$TMP/rec.out" 2>"$TMP/rec.err" &
rec=$!
PIDS+=("$rec")
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$port" --topic kv-events --count 40 \
  --rate 2000 --wait-subscribers 1 --wait-timeout 20 --linger 1 --emit-queries "$TMP/vl.q.jsonl" \
  --query-every 10
expect_status 0 "publish-fake vllm"
kill -TERM "$rec"
wait "$rec"
[ $? -eq 0 ] || { cat "$TMP/rec.err" >&2; fail "record auto@ (vllm) exit"; }
grep -qF "source 'fake-0': vllm engine at $ENGINE_URL: tcp://127.0.0.1:$port, model fake-model, block size from the events" \
  "$TMP/rec.err" || { cat "$TMP/rec.err" >&2; fail "vllm discovery line"; }
run "$KVINDEX" replay "$TMP/vl.kvcap" --queries "$TMP/vl.q.jsonl"
expect_status 0 "replay --queries of the vllm recording"
expect_stderr_contains " 0 differ"

# 3. Explicit keys win over the report (model, block size, dp-size, topic); subscribe runs briefly.
run "$KVINDEX" subscribe --source "e=auto@$ENGINE_URL,model=other,block-size=32,topic=t" \
  --duration 0.2 --stats-interval 0
expect_status 0 "explicit keys over vllm report"
expect_stderr_contains "source 'e': vllm engine at $ENGINE_URL: tcp://127.0.0.1:$port, model other, block size 32"
sglang_info "$TMP/info4.json" '{"publisher": "zmq", "endpoint": "tcp://*:6001"}' '{"dp_size": 4}'
start_engine sg4 --route "/server_info=$TMP/info4.json"
run "$KVINDEX" subscribe --source "e=auto@$ENGINE_URL,dp-size=1,model=m2" --duration 0.2 \
  --stats-interval 0 --json "$TMP/e.json"
expect_status 0 "dp-size=1 over dp_size 4"
expect_stderr_contains "source 'e': sglang engine at $ENGINE_URL: tcp://127.0.0.1:6001, model m2, block size 16"
"$PY" -c '
import json, sys
srcs = json.load(open(sys.argv[1]))["sources"]
assert len(srcs) == 1, srcs
' "$TMP/e.json" || fail "dp-size=1 gives one source"
run "$KVINDEX" subscribe --source "e=auto@$ENGINE_URL" --duration 0.2 --stats-interval 0 \
  --json "$TMP/e4.json"
expect_status 0 "dp_size 4 reported"
expect_stderr_contains "tcp://127.0.0.1:6001 and 3 more rank(s), model fake-model"

# 4. The engine comes up after subscribe starts: --auto-timeout keeps asking.
hport=$(free_ports 1)
"$KVINDEX" subscribe --source "late=auto@http://127.0.0.1:$hport" --auto-timeout 15 \
  --duration 0.2 --stats-interval 0 >"$TMP/late.out" 2>"$TMP/late.err" &
late=$!
PIDS+=("$late")
sleep 1
start_engine late --port "$hport" --route "/server_info=$TMP/info4.json"
wait "$late"
[ $? -eq 0 ] || { cat "$TMP/late.err" >&2; fail "subscribe waiting for a late engine"; }
grep -qF "source 'late': sglang engine" "$TMP/late.err" || fail "late engine discovery line"
finish
