#!/usr/bin/env bash
# Two ingesters (`subscribe --journal`) on the same publisher, one journal: JetStream's duplicate
# window keeps each live batch once (message ids = source identity + sequence + bytes), the
# ingesters count the copies the other had already stored as duplicates, and a replica of the
# journal answers every final query publish-fake expects.
. "$(dirname "$0")/journal_lib.bash"

journal_start 6
http_rep=$((base + 3)) http_1=$((base + 4)) http_2=$((base + 5))
SRC=$(fake_source "$pub" replay)
ingesters=()
for k in 1 2; do
  http=$((base + 3 + k))
  launch_ingester "ing$k" "$http" --json "$TMP/ing$k.json"
  ingesters+=("$ING_PID")
done
launch_replica rep "$http_rep"
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 300 --rate 3000 --wait-subscribers 2 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl"
expect_status 0 "publish-fake"
for k in 1 2; do
  kill -TERM "${ingesters[$((k - 1))]}"
  wait "${ingesters[$((k - 1))]}" || fail "ingester $k exit"
done

run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
# Each live batch is in the stream exactly once (independent capture reader).
"$PY" - "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$TMP/j.kvcap" "$TMP/ing1.json" "$TMP/ing2.json" <<'PYEOF' || fail "each batch once"
import json, subprocess, sys
out = subprocess.run([sys.executable, sys.argv[1], sys.argv[2]], capture_output=True, text=True,
                     check=True).stdout
records = [json.loads(l) for l in out.splitlines()]
seqs = [int(r["frames"][1], 16) for r in records if r["type"] == 2]
assert len(seqs) == 300 and sorted(seqs) == sorted(set(seqs)), (len(seqs), len(set(seqs)))
assert sum(1 for r in records if r["type"] == 1) == 1, "one source definition"
ing = [json.load(open(p)) for p in sys.argv[3:]]
for t in ing:
    assert t["total"]["applied"] == 300 and t["journal"]["lost_records"] == 0, t
    assert t["journal"]["records_pending"] == 0, t["journal"]
dups = sum(t["journal"]["duplicates"] for t in ing)
assert dups >= 300, dups
print(len(seqs), "batches once;", dups, "duplicates dropped by the stream")
PYEOF
last=$("$PY" -c 'import json,sys; print(max(json.load(open(p))["journal"]["last_acked_seq"] for p in sys.argv[1:]))' "$TMP/ing1.json" "$TMP/ing2.json")
wait_lag0 "$http_rep" "$last" || fail "replica lag"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers"
finish
