#!/usr/bin/env bash
# --source NAME=auto@http://HOST:PORT against engines that answer badly: each is one clear line
# naming what the engine did not report, exit 1 (exit 2 for a bad spec, before any engine is
# asked); never a crash or a hang (docs/cli.md "Engine discovery").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/auto_lib.bash"

# expect_auto_error LINE_PART [ARGS...]: subscribe with ARGS fails with exit 1 and one stderr line.
expect_auto_error() {
  local part=$1
  shift
  run timeout 20 "$KVINDEX" subscribe --duration 1 --stats-interval 0 "$@"
  expect_status 1 "$part"
  expect_stderr_contains "$part"
  expect_stderr_lines 1
}

# Usage errors: the spec is refused before anything is asked.
for spec in "a=auto@http://127.0.0.1" "a=auto@http://127.0.0.1:8000,bind" \
            "a=auto@http://127.0.0.1:8000,serves=*" "a=auto@http://127.0.0.1:8000/v1" \
            "a=auto@http://127.0.0.1:8000,dp-size=0" "a=auto@http://:8000"; do
  run "$KVINDEX" subscribe --source "$spec" --duration 1
  expect_status 2 "$spec"
  expect_stderr_contains "--source '$spec'"
done

# SGLang without events configured, with the "null" publisher, with another publisher, with
# an endpoint kvindex cannot connect to, without any model name; kv_events_config not JSON.
sglang_info "$TMP/none.json" "" '{"kv_events_config": null}'
start_engine none --route "/server_info=$TMP/none.json"
expect_auto_error "reports no kv_events_config (start it with --kv-events-config)" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/null.json" '{"endpoint": "tcp://*:5557"}'
start_engine null --route "/server_info=$TMP/null.json"
expect_auto_error "publisher is 'null'" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/kafka.json" '{"publisher": "kafka"}'
start_engine kafka --route "/server_info=$TMP/kafka.json"
expect_auto_error "publisher 'kafka'" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/ipc.json" '{"publisher": "zmq", "endpoint": "ipc:///tmp/kv.sock"}'
start_engine ipc --route "/server_info=$TMP/ipc.json"
expect_auto_error "endpoint 'ipc:///tmp/kv.sock' is not tcp://HOST:PORT" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/nomodel.json" '{"publisher": "zmq"}' '{"served_model_name": null, "model_path": null}'
start_engine nomodel --route "/server_info=$TMP/nomodel.json"
expect_auto_error "the engine reports no model; give model=M" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/kvbad.json" '{"publisher": "zmq", "endpoint": ' 
start_engine kvbad --route "/server_info=$TMP/kvbad.json"
expect_auto_error "kv_events_config: answer is not JSON" --source "a=auto@$ENGINE_URL"
sglang_info "$TMP/types.json" '{"publisher": "zmq"}' '{"dp_size": "two"}'
start_engine types --route "/server_info=$TMP/types.json"
expect_auto_error "'dp_size' is not an integer from 1 to 4096" --source "a=auto@$ENGINE_URL"

# Garbage, a JSON array where an object belongs, 404 everywhere, a vLLM list without sources.
printf 'Internal \x01 garbage' >"$TMP/garbage"
start_engine garbage --route "/server_info=$TMP/garbage"
expect_auto_error "GET /server_info: answer is not JSON" --source "a=auto@$ENGINE_URL"
echo '[1, 2]' >"$TMP/array.json"
start_engine array --route "/server_info=$TMP/array.json"
expect_auto_error "GET /server_info: answer is not a JSON object" --source "a=auto@$ENGINE_URL"
start_engine nothing
expect_auto_error "the engine reports no event endpoint (GET /server_info: HTTP 404, GET /kv_event_sources: HTTP 404)" \
  --source "a=auto@$ENGINE_URL"
echo '[]' >"$TMP/empty.json"
start_engine empty --route "/kv_event_sources=$TMP/empty.json"
expect_auto_error "GET /kv_event_sources: the engine reports no event source" --source "a=auto@$ENGINE_URL"
echo '[{"endpoint": "tcp://*:0"}]' >"$TMP/port0.json"
start_engine port0 --route "/kv_event_sources=$TMP/port0.json"
expect_auto_error "has port 0 (not bound yet)" --source "a=auto@$ENGINE_URL,model=m"
echo '[{"endpoint": "tcp://*:7000"}]' >"$TMP/one.json"
start_engine dpmismatch --route "/kv_event_sources=$TMP/one.json"
expect_auto_error "dp-size=2 but the engine reports 1 rank(s)" --source "a=auto@$ENGINE_URL,model=m,dp-size=2"

# An engine that accepts and never answers; one that is not there (asked for a second).
start_engine slow --slow
expect_auto_error "the engine is not reachable: GET /server_info: no answer in time" --source "a=auto@$ENGINE_URL"
port=$(free_ports 1)
expect_auto_error "the engine is not reachable: GET /server_info: cannot connect (waited 1 s" \
  --source "a=auto@http://127.0.0.1:$port" --auto-timeout 1
finish
