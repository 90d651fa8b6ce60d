#!/usr/bin/env bash
# `kvindex subscribe --http/--compat/--http-threads`: the HTTP API over a live index fed by the
# independent Python publisher. Expected answers by hand: the plan publishes 20 chained one-block
# batches of 4 tokens (batch s holds tokens 4s..4s+3), so a prompt of tokens 0..N-1 matches
# 4*min(N/4, 20) tokens on GPU, DP rank 0. /register during ingest adds a second publisher's
# source (5 blocks: 20 tokens) at run time.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

# Usage errors (exit 2).
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:http
expect_status 2 "--http bad port"
expect_stderr_contains "--http"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:1 --compat x
expect_status 2 "--compat x"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --compat conductor
expect_status 2 "--compat without --http"
run "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http 127.0.0.1:1 --http-threads 0
expect_status 2 "--http-threads 0"
run "$KVINDEX" subscribe --help
for flag in --http --compat --http-threads; do expect_stdout_contains "$flag"; done

PORT=$(free_ports 1)
# A port already in use: exit 1.
"$PY" -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(5)' "$PORT" &
PIDS+=($!)
sleep 0.3
run timeout 20 "$KVINDEX" subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --http "127.0.0.1:$PORT" --duration 1
expect_status 1 "--http on a port in use"
expect_stderr_contains "bind"

PORT=$(free_ports 1)
plan "$TMP/p.json" 0 20 '[{"sleep": 30}]'
start_pub p "$TMP/p.json"
P1_EP=$PUB_EP
# A second publisher (5 blocks, the same tokens 0..19) that only /register makes known.
plan "$TMP/p2.json" 0 5 '[{"sleep": 30}]'
start_pub p2 "$TMP/p2.json"
P2_EP=$PUB_EP
"$KVINDEX" subscribe --source "vllm-0=vllm@$P1_EP,model=m,block-size=4" --http "127.0.0.1:$PORT" \
  --http-threads 2 --stats-interval 0 >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$PORT" "$P2_EP" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "HTTP checks failed (see above)"
import json, sys, time, urllib.error
sys.path.insert(0, sys.argv[3])
from http_client import Server
call = Server(sys.argv[1]).call
deadline = time.time() + 20
while True:
    try:
        code, text = call("/query", {"model": "m", "token_ids": list(range(80))})
        if code == 200 and json.loads(text)["data"].get("default", {}).get("vllm-0", {}).get("longest_matched") == 80:
            break
    except (urllib.error.URLError, ConnectionError):
        pass
    if time.time() > deadline:
        sys.exit("the index never held the 20 published blocks")
    time.sleep(0.1)
code, text = call("/query", {"model": "m", "token_ids": list(range(42))})
want = {"data": {"default": {"vllm-0": {"longest_matched": 40, "GPU": 40, "CPU": 0, "DISK": 0, "DP": {"0": 40},
                                       "state": "exact"}}}}
assert code == 200 and json.loads(text) == want, (code, text)
code, text = call("/cache", {"instances": ["127.0.0.1", "vllm-0"], "token_ids": list(range(12)), "model_name": "m", "lora_id": -1})
assert code == 200 and json.loads(text) == {"HitStatus": {"127.0.0.1": 12, "vllm-0": 12},
                                          "InstanceState": {"127.0.0.1": {"state": "exact"}, "vllm-0": {"state": "exact"}}}, (code, text)
# Counters are a snapshot the ingest thread refreshes every 100 ms: poll until it shows all 20.
while True:
    code, text = call("/metrics")
    assert code == 200, code
    line = [l for l in text.splitlines() if l.startswith('kvindex_source_applied_total{') and 'instance="vllm-0"' in l]
    if line and int(line[0].split()[-1]) == 20:
        break
    if time.time() > deadline:
        sys.exit("metrics never showed 20 applied batches: %s" % line)
    time.sleep(0.05)
assert 'kvindex_resident_blocks{instance="vllm-0",tier="GPU"} 20' in text, text
code, text = call("/instances")
assert code == 200 and json.loads(text)["sources"][0]["counters"]["applied"] == 20, text
code, text = call("/query", b"{bad")
assert code == 400 and "error" in json.loads(text), (code, text)
code, text = call("/query", method="GET")
assert code == 405 and "error" in json.loads(text), (code, text)
# /register during ingest: the subscriber connects to the second publisher, which then publishes.
reg = {"endpoint": sys.argv[2], "type": "vLLM", "modelname": "m", "instance_id": "vllm-r",
       "block_size": 4, "dp_rank": 0, "tenant_id": "default"}
code, text = call("/register", reg)
assert code == 200 and json.loads(text) == {"instance_id": "vllm-r", "status": "registered successfully"}, (code, text)
code, text = call("/register", reg)
assert code == 400 and "already registered" in json.loads(text)["error"], (code, text)
code, text = call("/register", {"type": "vLLM", "modelname": "m", "instance_id": "y"})
assert code == 400 and "error" in json.loads(text), (code, text)
want_r = {"longest_matched": 20, "GPU": 20, "CPU": 0, "DISK": 0, "DP": {"0": 20}, "state": "exact"}
while True:
    code, text = call("/query", {"model": "m", "token_ids": list(range(40)), "instance_id": "vllm-r"})
    got = json.loads(text)["data"].get("default", {}).get("vllm-r")
    if got == want_r:
        break
    if time.time() > deadline + 10:
        sys.exit("the registered source never delivered its 5 blocks: %s" % text)
    time.sleep(0.05)
code, text = call("/instances")
assert [s["instance"] for s in json.loads(text)["sources"]] == ["vllm-0", "vllm-r"], text
code, text = call("/unregister", {"instance_id": "vllm-0", "tenant_id": "default", "dp_rank": 0})
assert code == 200 and json.loads(text)["removed_instances"] == ["vllm-0"], (code, text)
code, text = call("/query", {"model": "m", "token_ids": list(range(80))})
assert code == 200 and "vllm-0" not in json.loads(text)["data"].get("default", {}), text
code, text = call("/unregister", {"instance_id": "vllm-0"})
assert code == 404, (code, text)
PYEOF
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe --http after SIGTERM should exit 0"
grep -q "serving HTTP on 127.0.0.1:$PORT" "$TMP/s.err" || fail "serving line"

# --compat conductor, and http_server_port from --config.
PORT=$(free_ports 1)
cat >"$TMP/conf.json" <<JSON
{"http_server_port": $PORT, "kvevent_instance": {"vllm-0": {"endpoint": "tcp://127.0.0.1:1", "type": "vLLM", "modelname": "m", "block_size": 4}}}
JSON
"$KVINDEX" subscribe --config "$TMP/conf.json" --compat conductor --stats-interval 0 >"$TMP/c.out" 2>"$TMP/c.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$PORT" <<'PYEOF' || fail "--compat conductor / http_server_port checks failed"
import json, sys, time, urllib.request
base = "http://127.0.0.1:%s" % sys.argv[1]
deadline = time.time() + 20
while True:
    try:
        req = urllib.request.Request(base + "/query", data=json.dumps({"model": "m", "token_ids": [1, 2, 3, 4]}).encode())
        with urllib.request.urlopen(req, timeout=5) as r:
            body = json.loads(r.read())
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("no server on http_server_port")
        time.sleep(0.1)
want = {"default": {"vllm-0": {"longest_matched": 0, "GPU": 0, "CPU": 0, "DISK": 0, "DP": {"0": 0},
                               "state": "exact"}}}
assert body == want, body
PYEOF
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe --config http_server_port after SIGTERM should exit 0"
finish
