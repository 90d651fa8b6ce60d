#!/usr/bin/env bash
# `/unregister` on an ingester reaches its journal and its capture: publish-fake runs two instances,
# the ingester (`--record`, snapshots into the journal) has fake-0 from `--source` and fake-1 from
# `/register`, then unregisters fake-1. The replica, and a replica started afterwards from the
# stream's start, list the same instances with the same presences as the ingester (fake-1 gone,
# fake-0 kept; /instances says fake-1 is unregistered). Then fake-1 is registered again with the
# same body (the same journal key, within JetStream's duplicate window) and publishes twice more
# (a publisher restart between): the replica, and one started between the two from a journal
# snapshot, equal the ingester again. Last, fake-2 is registered with a replay endpoint that never
# answers, so it waits for its backfill, and is unregistered while it waits: snapshots are written
# again (none is while a source waits) and the replica still equals the ingester. `replay` of the
# ingester's capture and of `record --from-journal`'s export end with the ingester's index too.
# Uses a real nats-server.
. "$(dirname "$0")/journal_lib.bash"

journal_start 9
http_ing=$((base + 3)) http_rep=$((base + 4)) http_rep2=$((base + 5)) http_rep3=$((base + 6))
pub2=$((base + 7)) silent=$((base + 8))
SRC=$(fake_source "$pub")
launch_ingester ing "$http_ing" --record "$TMP/ing.kvcap" --snapshot-to-journal 0.2 \
  --snapshot-keep 100 --replay-timeout 120
ing=$ING_PID
launch_replica rep "$http_rep"
wait_port "$http_ing" || fail "ingester HTTP"
# post PORT PATH JSON: POSTs JSON, prints the answer's body (fails on an error status).
post() {
  "$PY" - "$@" <<'PYEOF'
import sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]),
                            data=sys.argv[3].encode())
with urllib.request.urlopen(req, timeout=10) as r:
    print(r.read().decode())
PYEOF
}
REG='{"endpoint": "tcp://127.0.0.1:'$((pub + 1))'", "type": "vLLM", "modelname": "fake-model",
      "instance_id": "fake-1"}'
post "$http_ing" /register "$REG" >/dev/null || fail "/register"
run timeout 30 "$KVINDEX" publish-fake --format vllm --instances 2 --port "$pub" --count 200 \
  --rate 1000 --wait-subscribers 1 --wait-timeout 20 --linger 1
expect_status 0 "publish-fake"
wait_acked "$http_ing" none || fail "ingester journal state"
journal_last() {
  http_json "$http_ing" /healthz |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])'
}
before=$(journal_last)
wait_lag0 "$http_rep" "$before" || fail "replica lag"

# view PORT: the instances and presences of /global_view, as one JSON line.
view() {
  http_json "$1" /global_view | "$PY" -c 'import json, sys
j = json.load(sys.stdin)
print(json.dumps({"presences": j["presences"], "instances": j["instances"]}, sort_keys=True))'
}
"$PY" - "$(view "$http_rep")" <<'PYEOF' || fail "both instances indexed"
import json, sys
v = json.loads(sys.argv[1])
assert sorted(v["instances"]) == ["fake-0", "fake-1"] and v["presences"] > 0, v
PYEOF

"$PY" -c 'import json, sys
body = json.loads(sys.argv[1])
assert body["removed_instances"] == ["fake-1"] and body["removed_presences"] > 0, body' \
  "$(post "$http_ing" /unregister '{"instance_id": "fake-1"}')" || fail "/unregister"
wait_acked "$http_ing" none || fail "ingester journal state after /unregister"
after=$(journal_last)
[ "$after" -gt "$before" ] || fail "the unregister note is not in the journal ($before -> $after)"
want=$(view "$http_ing")
"$PY" - "$want" <<'PYEOF' || fail "ingester after /unregister"
import json, sys
v = json.loads(sys.argv[1])
assert sorted(v["instances"]) == ["fake-0"] and v["presences"] > 0, v
PYEOF
wait_lag0 "$http_rep" "$after" || fail "replica lag after /unregister"
[ "$(view "$http_rep")" = "$want" ] || fail "replica: $(view "$http_rep"), ingester: $want"
# /instances says so on the replica as on the ingester.
states() {
  http_json "$1" /instances | "$PY" -c 'import json, sys
print(" ".join("%s=%s" % (s["instance"], s["state"]) for s in json.load(sys.stdin)["sources"]))'
}
[ "$(states "$http_ing")" = "fake-0=live fake-1=unregistered" ] ||
  fail "ingester /instances: $(states "$http_ing")"
[ "$(states "$http_rep")" = "fake-0=replica fake-1=unregistered" ] ||
  fail "replica /instances: $(states "$http_rep")"
launch_replica rep2 "$http_rep2"
wait_lag0 "$http_rep2" "$after" || fail "second replica lag"
[ "$(view "$http_rep2")" = "$want" ] || fail "second replica: $(view "$http_rep2"), ingester: $want"

# Registered again: same body, same key, within the duplicate window; two publisher runs.
post "$http_ing" /register "$REG" >/dev/null || fail "/register again"
# publish_fake1 SEED: 50 batches from a publisher of its own on fake-1's port.
publish_fake1() {
  run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$((pub + 1))" --count 50 \
    --rate 1000 --seed "$1" --wait-subscribers 1 --wait-timeout 20 --linger 1
  expect_status 0 "publish-fake on fake-1's port (seed $1)"
  wait_acked "$http_ing" none || fail "ingester journal state (seed $1)"
}
publish_fake1 5
mid=$(journal_last)
"$PY" - "$http_ing" "$mid" <<'PYEOF' || fail "no snapshot covers seq $mid"
import json, sys, time, urllib.request
deadline = time.time() + 15
while json.load(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1],
                                       timeout=5))["journal"]["snapshot_seq"] < int(sys.argv[2]):
    assert time.time() < deadline
    time.sleep(0.1)
PYEOF
# A replica that starts now loads a snapshot covering everything so far (so no later one can be
# loaded instead); the second run follows its cut.
LOG_LEVEL=info launch_replica rep3 "$http_rep3"
wait_lag0 "$http_rep3" "$mid" || fail "replica from a snapshot: lag"
grep -q "loaded journal snapshot [0-9]*: covers seq $mid," "$TMP/rep3.err" ||
  fail "replica from a snapshot: $(grep snapshot "$TMP/rep3.err")"
publish_fake1 6
final=$(journal_last)
want=$(view "$http_ing")
"$PY" - "$want" <<'PYEOF' || fail "ingester after registering again"
import json, sys
v = json.loads(sys.argv[1])
assert sorted(v["instances"]) == ["fake-0", "fake-1"], v
PYEOF
wait_lag0 "$http_rep" "$final" || fail "replica lag after registering again"
[ "$(view "$http_rep")" = "$want" ] || fail "replica again: $(view "$http_rep"), ingester: $want"
wait_lag0 "$http_rep3" "$final" || fail "replica from a snapshot: lag"
[ "$(view "$http_rep3")" = "$want" ] ||
  fail "replica from a snapshot: $(view "$http_rep3"), ingester: $want"

# A source waiting for a replay that never comes, unregistered while it waits.
snapshots() {
  http_json "$http_ing" /healthz |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["snapshots_written"])'
}
post "$http_ing" /register '{"endpoint": "tcp://127.0.0.1:'"$pub2"'", "type": "vLLM",
  "modelname": "fake-model", "instance_id": "fake-2",
  "replay_endpoint": "tcp://127.0.0.1:'"$silent"'"}' >/dev/null || fail "/register fake-2"
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub2" --count 20 --rate 1000 \
  --seed 9 --wait-subscribers 1 --wait-timeout 20 --linger 1
expect_status 0 "publish-fake on fake-2's port"
wait_acked "$http_ing" none || fail "ingester journal state (fake-2)"
"$PY" -c 'import json, sys
s = [s for s in json.loads(sys.argv[1])["sources"] if s["instance"] == "fake-2"]
assert s and s[0]["counters"]["applied"] == 0, s' "$(http_json "$http_ing" /instances)" ||
  fail "fake-2 should hold its batches while its backfill waits"
post "$http_ing" /unregister '{"instance_id": "fake-2"}' >/dev/null || fail "/unregister fake-2"
written=$(snapshots)
"$PY" - "$http_ing" "$written" <<'PYEOF' || fail "no journal snapshot after unregistering fake-2"
import json, sys, time, urllib.request
deadline = time.time() + 15
while json.load(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1],
                                       timeout=5))["journal"]["snapshots_written"] < int(sys.argv[2]) + 2:
    assert time.time() < deadline
    time.sleep(0.1)
PYEOF
wait_acked "$http_ing" none || fail "ingester journal state after unregistering fake-2"
final=$(journal_last)
want=$(view "$http_ing")
wait_lag0 "$http_rep" "$final" || fail "replica lag after unregistering fake-2"
[ "$(view "$http_rep")" = "$want" ] || fail "replica at the end: $(view "$http_rep"), ingester: $want"

kill -TERM "$ing"
wait "$ing" || fail "ingester exit"
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
for capture in ing j; do
  run "$KVINDEX" replay "$TMP/$capture.kvcap" --json "$TMP/$capture.json"
  expect_status 0 "replay of $capture.kvcap"
  "$PY" - "$TMP/$capture.json" "$want" <<'PYEOF' || fail "replay of $capture.kvcap"
import json, sys
j, want = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
# Resident presences per instance and tier (the report also lists the instance purged, at 0).
got = {}
for t in j["tiers"]:
    if t["resident"]:
        got.setdefault(t["instance"], {})[t["tier"]] = t["resident"]
assert j["presences"] == want["presences"], (j["presences"], want)
assert got == {i: v["tiers"] for i, v in want["instances"].items()}, (got, want)
PYEOF
done
finish
