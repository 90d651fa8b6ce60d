#!/usr/bin/env bash
# `subscribe --journal --snapshot-to-journal`: an ingester (publish-fake with dropped batches,
# recovered by replay) writes snapshots of its index into the journal's snapshot stream; with all
# but one mid-stream snapshot removed, and a newer corrupt one, a newer incomplete one and a
# manifest that is not one put in beside it (over the NATS protocol itself), a replica skips the
# bad three (logged), loads the mid-stream snapshot, applies the journal after the sequence it
# covers and answers every final query publish-fake expects exactly, and never reports itself
# connected with lag 0 before it has applied the last record; killed with SIGKILL and started
# again, it does the same. Uses a real nats-server.
. "$(dirname "$0")/journal_lib.bash"

journal_start 5
http_ing=$((base + 3)) http_rep=$((base + 4))
SRC=$(fake_source "$pub" replay)
LOG_LEVEL=info launch_ingester ing "$http_ing" --journal-stream kvsnap --snapshot-to-journal 0.5 \
  --snapshot-keep 20 --json "$TMP/ing.json"
ing=$ING_PID
# 300 batches over 3 s: several snapshots are written while they arrive.
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 300 --rate 100 --drop-every 11 --wait-subscribers 1 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl" --query-every 30
expect_status 0 "publish-fake"
wait_acked "$http_ing" none || fail "ingester journal state"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
[ "$last" -gt 300 ] || fail "journal holds $last records"
wait_log "$TMP/ing.err" "covers seq $last," || fail "no snapshot covers seq $last: $(grep snapshot "$TMP/ing.err")"
http_json "$http_ing" /healthz | "$PY" -c 'import json, sys
j = json.load(sys.stdin)["journal"]
assert j["snapshot_seq"] == int(sys.argv[1]) and j["snapshots_written"] >= 3, j' "$last" \
  || fail "ingester /healthz snapshots"
http_json "$http_ing" /metrics | grep -q "^kvindex_journal_snapshot_seq $last\$" || fail "ingester metrics"
kill -TERM "$ing"
wait "$ing" || fail "ingester exit after SIGTERM"
"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["journal"]["snapshots"]; assert s["written"] >= 3 and s["last_covered_seq"] == int(sys.argv[2]), s' \
  "$TMP/ing.json" "$last" || fail "ingester snapshot summary"

# Keep only the newest snapshot that covers less than the whole journal; add three bad newer ones.
mid=$(keep_mid_snapshot "$nats" kvsnap "$last") || fail "keeping a mid-stream snapshot"
read -r covered keep <<<"$mid"
"$PY" -c "$JS_PY"$'\n''
import json, sys, xxhash
port, last, keep = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
S = "kvsnap_SNAP"
body = b"these bytes are not a snapshot"
ack = json.loads(request(port, "%s.%d.c" % (S, keep + 1), body))
h = xxhash.xxh3_64_hexdigest(body)
def manifest(i, chunk):
    return "kvindex-journal-snapshot 1\nid %d\ncovered_seq %d\nbytes %d\nxxh3 %s\n%s\nsource 0000000000000001\nend\n" % (
        i, last, len(body), h, chunk)
json.loads(request(port, "%s.%d.m" % (S, keep + 1), manifest(keep + 1, "chunk %d %d %s" % (ack["seq"], len(body), h))))
json.loads(request(port, "%s.%d.m" % (S, keep + 2), manifest(keep + 2, "chunk 999999 %d %s" % (len(body), h))))
json.loads(request(port, "%s.%d.m" % (S, keep + 3), "not a manifest"))' "$nats" "$last" "$keep" \
  || fail "adding bad snapshots"
[ "$covered" -lt "$last" ] || fail "the snapshot kept covers everything"
# Its manifest names each source's last batch record up to the sequence it covers (link id and
# chained link id), as computed here from the journal's messages with python3-xxhash.
"$PY" -c "$JS_PY"$'\n''
import base64, sys
port, covered, keep = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = api(port, "STREAM.MSG.GET.kvsnap_SNAP", {"last_by_subj": "kvsnap_SNAP.%d.m" % keep})
lines = base64.b64decode(m["message"]["data"]).decode().splitlines()
keys = [l.split()[1] for l in lines if l.startswith("source ")]
named = {int(l.split()[1]): tuple(int(x, 16) for x in l.split()[2:]) for l in lines if l.startswith("last ")}
last = {}
for n, hdrs, subject, first, prev, link, rtype, body in journal_links(port, "kvsnap", covered):
    if link is not None:
        last[subject] = link
want = {i: last["kvsnap.src." + k] for i, k in enumerate(keys) if "kvsnap.src." + k in last}
assert want and named == want, (named, want)
' "$nats" "$covered" "$keep" || fail "the snapshot's last links"

start_replica() {
  LOG_LEVEL=info launch_replica rep "$http_rep" --journal-stream kvsnap --json "$TMP/rep.json"
  rep=$REP_PID
}
check_replica() {  # check_replica WHAT
  # From its first answer on, the replica never says it is connected with lag 0 before it has
  # applied the journal's last record (it starts from a snapshot that covers less).
  "$PY" - "$http_rep" "$last" <<'PYEOF' || fail "$1: replica claimed to be caught up early"
import json, sys, time, urllib.request
port, last = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 15
while time.time() < deadline:
    j = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % port, timeout=2).read())["journal"]
    if j["connected"] and j["lag"] == 0:
        sys.exit(0 if j["applied_seq"] >= last else "caught up at seq %d of %d: %s" % (j["applied_seq"], last, j))
    time.sleep(0.005)
sys.exit("never caught up: %s" % j)
PYEOF
  wait_lag0 "$http_rep" "$last" || fail "$1: replica lag"
  http_json "$http_rep" /healthz | "$PY" -c 'import json, sys
j = json.load(sys.stdin)["journal"]
assert j["started_from"] == "snapshot" and j["snapshot_seq"] == int(sys.argv[1]) and j["skipped_seqs"] == 0, j' \
    "$covered" || fail "$1: replica start"
  check_answers "$TMP/q.jsonl" "$http_rep" || fail "$1: replica answers"
  http_json "$http_rep" /metrics | grep -q "^kvindex_journal_snapshot_seq $covered\$" || fail "$1: metrics"
}
start_replica
check_replica "first start"
for id in $((keep + 1)) $((keep + 2)); do
  grep -q "skipping journal snapshot $id (covers seq $last)" "$TMP/rep.err" || fail "snapshot $id not skipped"
done
grep -q "skipping journal snapshot: kvsnap_SNAP.$((keep + 3)).m: snapshot manifest: line 1" "$TMP/rep.err" \
  || fail "bad manifest not reported"
grep -q "loaded journal snapshot $keep: covers seq $covered" "$TMP/rep.err" || fail "snapshot $keep not loaded"

kill -9 "$rep"
wait "$rep" 2>/dev/null
start_replica
check_replica "after SIGKILL"
kill -TERM "$rep"
wait "$rep" || fail "replica exit"
# The replica applied only the journal after the snapshot.
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; assert j["entries"] == int(sys.argv[2]) - int(sys.argv[3]) and j["started_from"] == "snapshot", j' \
  "$TMP/rep.json" "$last" "$covered" || fail "replica summary"
finish
