#!/usr/bin/env bash
# POST /register is all or nothing: a source whose socket cannot be opened — DP rank 1 of a
# dp_size=2 `bind` registration whose port is taken, or an endpoint ZeroMQ rejects
# ("tcp://127.0.0.1:") — answers 400 with the reason, and leaves no trace: /instances,
# /global_view and /metrics (apart from the HTTP request counter and the silence gauge) are
# unchanged, rank 0's port is free again. The same body succeeds once the port is free, listing both ranks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_lib.bash"

base=$(free_ports 3)
http=$((base + 2))
"$KVINDEX" subscribe --source "a=vllm@tcp://127.0.0.1:1,model=m,block-size=4" --http "127.0.0.1:$http" \
  --stats-interval 0 >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$http" "$base" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "register atomicity checks failed (see above)"
import json, socket, sys
sys.path.insert(0, sys.argv[3])
from http_client import Server, wait_for
server = Server(sys.argv[1])
call = server.call
port = int(sys.argv[2])
wait_for(lambda: call("/healthz")[0] == 200, "the server")
def snapshot():
    # (the HTTP counters and the silence gauge, a time since, change on their own)
    metrics = [l for l in call("/metrics")[1].splitlines()
               if "kvindex_http_" not in l and "kvindex_source_seconds_since_last_message" not in l]
    return call("/instances")[1], call("/global_view")[1], metrics
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
before = snapshot()
# Rank 1's port is taken: the registration of both ranks fails and rank 0's socket is closed.
busy = socket.socket()
busy.bind(("127.0.0.1", port + 1))
busy.listen()
body = {"instance_id": "r", "endpoint": "tcp://127.0.0.1:%d" % port, "type": "vLLM",
        "modelname": "m", "block_size": 4, "bind": True, "dp_size": 2}
code, text = call("/register", body)
assert code == 400, (code, text)
err = json.loads(text)["error"]
assert "cannot bind 'tcp://127.0.0.1:%d'" % (port + 1) in err and "in use" in err, err
assert snapshot() == before, "a failed /register left a trace"
wait_for(lambda: free(port), "rank 0's port to be free after the failed /register", timeout=5)
# An endpoint that passes the config parser but ZeroMQ rejects.
code, text = call("/register", {"instance_id": "z", "endpoint": "tcp://127.0.0.1:", "type": "vLLM",
                                "modelname": "m", "block_size": 4})
assert code == 400 and "cannot connect to 'tcp://127.0.0.1:'" in json.loads(text)["error"], (code, text)
assert snapshot() == before, "a failed /register left a trace"
assert 'kvindex_http_requests_total{endpoint="/register",code="400"} 2' in call("/metrics")[1]
# Once the port is free the same body registers both ranks.
busy.close()
code, text = call("/register", body)
assert code == 200 and json.loads(text) == {"instance_id": "r", "status": "registered successfully"}, (code, text)
names = [s["name"] for s in json.loads(call("/instances")[1])["sources"]]
assert names == ["a", "r/dp0", "r/dp1"], names
contexts = [(c["instance_id"], c["dp_rank"]) for c in json.loads(call("/global_view")[1])["model_contexts"]]
assert contexts == [("a", None), ("r", 0), ("r", 1)], contexts
assert not free(port) and not free(port + 1), "the registered ranks do not hold their ports"
PYEOF
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"
finish
