#!/usr/bin/env bash
# SGLang's data-parallel layouts (docs/wire-formats.md "Endpoint discovery"): every rank r
# publishes on its own socket at the base port + r, the rank in each batch. Discovered from the
# structured `kv_events` descriptor of /server_info: (1) a wildcard host (SGLang binds, kvindex
# connects to the engine's host), with a replay endpoint; (2) a concrete host (SGLang connects,
# kvindex binds port + r). publish-fake -> subscribe auto@ -> replay --queries, every answer exact.
# (3) An ipc endpoint with dp-size (rank r > 0 on PATH_dp<r>), from the independent Python
# publisher.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/auto_lib.bash"

# descriptor FILE HOST BASE DP [REPLAY]: an SGLang /server_info body with the kv_events descriptor
# (and the raw kv_events_config string naming the replay endpoint, when given).
descriptor() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, host, base, dp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
replay = sys.argv[5] if len(sys.argv) > 5 else None
config = {"publisher": "zmq", "endpoint": "tcp://%s:%d" % (host, base), "replay_endpoint": replay,
          "topic": ""}
info = {"model_path": "org/fake-model-weights", "served_model_name": "fake-model", "page_size": 16,
        "dp_size": dp, "enable_dp_attention": True, "kv_events_config": json.dumps(config),
        "kv_events": {"publisher": "zmq", "endpoint_host": host, "endpoint_port_base": base,
                      "topic": "", "block_size": 16, "dp_size": dp}}
json.dump(info, open(path, "w"))
PYEOF
}

# layout NAME FLAGS...: subscribe auto@ the engine, publish-fake sglang on 2 ranks with FLAGS,
# then every emitted query exact against the recording. Only the final queries: the ranks are two
# sockets, so the recording's interleaving is the network's and a mid-stream `after` answer is not
# determined (docs/cli.md "Expected answers").
layout() {
  local name=$1
  shift
  "$KVINDEX" subscribe --source "fake-0=auto@$ENGINE_URL" --record "$TMP/$name.kvcap" \
    --json "$TMP/$name.json" --stats-interval 0 >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local sub=$!
  PIDS+=("$sub")
  run timeout 30 "$KVINDEX" publish-fake --format sglang --dp-ranks 2 --count 40 --rate 2000 \
    --wait-subscribers 1 --wait-timeout 20 --linger 2 --emit-queries "$TMP/$name.q" "$@"
  expect_status 0 "publish-fake ($name)"
  kill -TERM "$sub"
  wait "$sub" || { cat "$TMP/$name.err" >&2; fail "$name: subscribe exit"; }
  "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["sources"]) == 2, s["sources"]
assert s["total"]["applied"] == 80 and s["total"]["lost"] == 0, s["total"]
assert s["total"]["dp_rank_mismatches"] == 0, s["total"]
' "$TMP/$name.json" || fail "$name: counters"
  run "$KVINDEX" replay "$TMP/$name.kvcap" --queries "$TMP/$name.q"
  expect_status 0 "$name: replay --queries"
  expect_stderr_contains " 0 differ"
}

# 1. Wildcard host: ranks bound on port + r, replay port + r; a dropped batch is replayed.
port=$(free_ports 4)
descriptor "$TMP/wild.json" "*" "$port" 2 "tcp://*:$((port + 2))"
start_engine wild --route "/server_info=$TMP/wild.json"
layout wild --port "$port" --replay-port "$((port + 2))" --drop-every 7
grep -qF "source 'fake-0': sglang engine at $ENGINE_URL: tcp://127.0.0.1:$port and 1 more rank(s), model fake-model, block size 16" \
  "$TMP/wild.err" || fail "wildcard discovery line: $(cat "$TMP/wild.err")"

# 2. Concrete host: SGLang's ranks connect to port + r, kvindex binds there.
port=$(free_ports 2)
descriptor "$TMP/conn.json" "127.0.0.1" "$port" 2
start_engine conn --route "/server_info=$TMP/conn.json"
layout conn --port "$port" --connect 127.0.0.1
grep -qF "tcp://127.0.0.1:$port and 1 more rank(s) (bound: the engine connects)" "$TMP/conn.err" \
  || fail "connect discovery line: $(cat "$TMP/conn.err")"

# 3. ipc with dp-size: rank 0 on PATH, rank 1 on PATH_dp1, each batch carrying its rank.
"$PY" - "$TMP" <<'PYEOF'
import json, sys
for rank in (0, 1):
    steps = [{"wait_sub": True}]
    for s in range(3):
        h = 10000 * (rank + 1) + s
        steps.append({"seq": s, "blocks": [[h, None if s == 0 else h - 1, [4 * s + j for j in range(4)]]]})
    json.dump({"steps": steps}, open("%s/ipc%d.plan" % (sys.argv[1], rank), "w"))
PYEOF
for rank in 0 1; do
  suffix=$([ "$rank" = 0 ] && echo "" || echo "_dp$rank")
  "$PY" "$PUBLISHER" --pub "ipc://$TMP/kv$suffix" --plan "$TMP/ipc$rank.plan" \
    --ready "$TMP/ipc$rank.ready" --serve 20 >/dev/null 2>&1 &
  PIDS+=($!)
done
for i in $(seq 1 200); do
  [ -s "$TMP/ipc0.ready" ] && [ -s "$TMP/ipc1.ready" ] && break
  sleep 0.05
done
"$KVINDEX" subscribe --source "ipc=sglang@ipc://$TMP/kv,dp-size=2,model=m,block-size=4" \
  --record "$TMP/ipc.kvcap" --json "$TMP/ipc.json" --stats-interval 0 >"$TMP/ipc.out" \
  2>"$TMP/ipc.err" &
sub=$!
PIDS+=("$sub")
wait_records "$TMP/ipc.kvcap" 6 || fail "ipc: fewer than 6 messages recorded"
kill -TERM "$sub"
wait "$sub" || fail "ipc: subscribe exit: $(cat "$TMP/ipc.err")"
"$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))
eps = sorted(x["endpoint"] for x in s["sources"])
assert eps == ["ipc://%s/kv" % sys.argv[2], "ipc://%s/kv_dp1" % sys.argv[2]], eps
assert s["total"]["applied"] == 6, s["total"]
' "$TMP/ipc.json" "$TMP" || fail "ipc: $(cat "$TMP/ipc.json" 2>/dev/null | head -c 600)"
finish
