#!/usr/bin/env bash
# End to end over HTTP: three publish-fake processes in three wire formats (vllm, sglang, mooncake;
# 2 instances x 2 DP ranks each, one model per format) stream into ONE `subscribe --http`; every
# final query each of them emitted (--emit-queries: publish-fake's own model, which never links the
# index) is answered exactly by POST /query, by POST /query_by_hash with the prompt's prefix hashes
# (seq_hashes, computed by the independent Python oracle tests/data/prefix_hash_vectors.py), and by
# POST /cache with the upstream proxy's exact body ({"instances", "token_ids", "model_name",
# "lora_id": -1} -> {"HitStatus": ...}).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_lib.bash"

base=$(free_ports 13)
http=$((base + 12))
formats=(vllm sglang mooncake)
sources=()
for k in 0 1 2; do
  p=$((base + 4 * k))
  for i in 0 1; do
    sources+=(--source "fake-$i=${formats[$k]}@tcp://127.0.0.1:$((p + 2 * i)),model=model-${formats[$k]},block-size=16,dp-size=2")
  done
done
"$KVINDEX" subscribe "${sources[@]}" --http "127.0.0.1:$http" --stats-interval 0 \
  >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub=$!
PIDS+=("$sub")
pubs=()
for k in 0 1 2; do
  timeout 30 "$KVINDEX" publish-fake --format "${formats[$k]}" --model "model-${formats[$k]}" \
    --instances 2 --dp-ranks 2 --port $((base + 4 * k)) --count 60 --rate 3000 --seed $((k + 1)) \
    --wait-subscribers 1 --wait-timeout 20 --linger 1 --emit-queries "$TMP/q$k.jsonl" \
    >"$TMP/pub$k.out" 2>"$TMP/pub$k.err" &
  pubs+=($!)
done
for k in 0 1 2; do
  wait "${pubs[$k]}" || fail "publish-fake ${formats[$k]}: $(cat "$TMP/pub$k.err")"
done

"$PY" - "$http" "$TMP" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "HTTP answers differ from publish-fake's expected answers"
import json, sys, time, urllib.request
base = "http://127.0.0.1:%s" % sys.argv[1]
tmp = sys.argv[2]
sys.path.insert(0, sys.argv[3])
from prefix_hash_vectors import chain  # the independent oracle of the prefix hash chain
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())
checked = 0
for k in range(3):
    final = [json.loads(l) for l in open("%s/q%d.jsonl" % (tmp, k))]
    final = [q for q in final if "after" not in q]
    assert len(final) >= 3, "format %d: too few final queries" % k
    for q in final:
        # publish-fake's answers, plus the trust state: every stream here is lossless ("exact").
        q["expect"] = {n: dict(v, state="exact") for n, v in q["expect"].items()}
        # The ingest thread may still be applying the last batches: retry for a few seconds.
        deadline = time.time() + 10
        while True:
            got = post("/query", q["query"])["data"].get("default", {})
            if got == q["expect"] or time.time() > deadline:
                break
            time.sleep(0.1)
        assert got == q["expect"], (k, q["id"], got, q["expect"])
        seq, _ = chain(q["query"]["token_ids"], 16, 1337)
        by_hash = post("/query_by_hash", {"model": q["query"]["model"], "seq_hashes": seq})
        assert by_hash["data"].get("default", {}) == q["expect"], (k, q["id"], by_hash, q["expect"])
        names = sorted(q["expect"])
        hits = post("/cache", {"instances": names, "token_ids": q["query"]["token_ids"],
                               "model_name": q["query"]["model"], "lora_id": -1})
        assert hits == {"HitStatus": {n: q["expect"][n]["longest_matched"] for n in names},
                        "InstanceState": {n: {"state": "exact"} for n in names}}, hits
        checked += 1
print(checked, "queries checked")
PYEOF
kill -TERM "$sub"
wait "$sub"
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"
finish
