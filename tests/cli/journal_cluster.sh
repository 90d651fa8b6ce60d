#!/usr/bin/env bash
# A 3-node JetStream cluster (three nats-server processes with routes) and a stream of 3
# replicas: the ingester and a replica are given the server list; the node they are connected to
# is killed with SIGKILL mid-stream; both move to another node, and the journal ends with every
# live batch exactly once, nothing lost, and the replica exact.
. "$(dirname "$0")/journal_lib.bash"

base=$(free_ports 10)
pub=$base http_ing=$((base + 2)) http_rep=$((base + 3))
client=($((base + 4)) $((base + 5)) $((base + 6)))
route=($((base + 7)) $((base + 8)) $((base + 9)))
nodes=()
for i in 0 1 2; do
  routes=""
  for j in 0 1 2; do
    [ "$j" -ne "$i" ] && routes="${routes:+$routes,}nats://127.0.0.1:${route[$j]}"
  done
  start_nats "${client[$i]}" --server_name "n$i" --cluster_name kvc \
    --cluster "nats://127.0.0.1:${route[$i]}" --routes "$routes"
  nodes+=("$NATS_PID")
done
J="nats://127.0.0.1:${client[0]},127.0.0.1:${client[1]},127.0.0.1:${client[2]}"
SRC=$(fake_source "$pub")
launch_ingester ing "$http_ing" --journal-replicas 3 --json "$TMP/ing.json"
ing=$ING_PID
launch_replica rep "$http_rep"
# The stream exists (the cluster elected its leaders) before the engine starts.
"$PY" - "$http_ing" <<'PYEOF' || fail "journal stream not ready"
import json, sys, time, urllib.request
deadline = time.time() + 12
while time.time() < deadline:
    j = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1], timeout=5).read())["journal"]
    if j["connected"] and j["last_acked_seq"] >= 1:
        sys.exit(0)
    time.sleep(0.1)
sys.exit("journal: %s" % j)
PYEOF
timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --count 200 --rate 400 \
  --wait-subscribers 1 --wait-timeout 20 --linger 1 --emit-queries "$TMP/q.jsonl" \
  >"$TMP/pub.out" 2>"$TMP/pub.err" &
pubpid=$!
sleep 0.5
kill -9 "${nodes[0]}"  # the first server of the list: both clients are connected to it
wait "$pubpid" || fail "publish-fake: $(cat "$TMP/pub.err")"
# The two remaining nodes elect new leaders and the client reconnects before the pending records
# are resent: seconds, more on a loaded machine.
wait_acked "$http_ing" none 40 || fail "ingester after losing a node"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_rep" "$last" || fail "replica lag"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers"
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal from the remaining nodes"
[ "$status" -eq 0 ] || cat "$TMP/nats-${client[1]}.log" >&2
"$PY" - "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$TMP/j.kvcap" <<'PYEOF' || fail "every batch once"
import json, subprocess, sys
out = subprocess.run([sys.executable, sys.argv[1], sys.argv[2]], capture_output=True, text=True, check=True).stdout
seqs = [int(r["frames"][1], 16) for r in map(json.loads, out.splitlines()) if r["type"] == 2]
assert sorted(seqs) == sorted(set(seqs)) and len(seqs) == 200, (len(seqs), len(set(seqs)))
# In the ingester's order, also where the stream holds a resent batch after later ones.
assert seqs == sorted(seqs), seqs
PYEOF
finish
