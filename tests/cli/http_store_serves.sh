#!/usr/bin/env bash
# End to end with a Mooncake store source that serves an instance (`serves=`; docs/index-rules.md
# "Mooncake store sources"): four publish-fake processes (--batches: hand-built events) stream into
# two `subscribe --http` at once, one with `serves=eng`, one with `serves=*`; /query and
# /query_by_hash answer exactly the hand-computed answers below. publish-fake's own `--emit-queries`
# model cannot check this (`serves` is a subscriber-side setting it never sees), so the expectations
# are worked out by hand from docs/index-rules.md "Worked example" — the upstream design document's
# example, plus an instance the store does not serve:
#   block size 2, prompt [101,15,100,55,89,63] = H1 H2 H3;
#   eng  (dp-size=2): DP rank 0 stores H1,H2 in GPU; DP rank 1 stores H1 in GPU;
#   other:            stores H1 in GPU;
#   store (mooncake): H1,H2 in CPU; H1 in DISK; H3 (after H2) in DISK.
# serves=eng: eng matches H1 H2 H3 (H3 only through the store): longest 6, GPU 4 (H1,H2), CPU 4
#   (H1,H2), DISK 4 (H1,H3), DP {0: 4, 1: 2} (store blocks carry no rank); other stops after H1:
#   2, GPU 2; store is its own instance: 6, CPU 4, DISK 4, GPU 0, DP {0: 6}.
# serves=*: other now also continues through the store: 6, GPU 2, CPU 4, DISK 4, DP {0: 2}.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_lib.bash"

base=$(free_ports 6)
h1=$((base + 4))
h2=$((base + 5))
cat >"$TMP/eng0.jsonl" <<'EOF2'
{"ts": 1.0, "dp_rank": 0, "events": [{"type": "BlockStored", "block_hashes": [11, 12], "token_ids": [101, 15, 100, 55], "block_size": 2, "medium": "GPU"}]}
EOF2
cat >"$TMP/eng1.jsonl" <<'EOF2'
{"ts": 1.0, "dp_rank": 1, "events": [{"type": "BlockStored", "block_hashes": [21], "token_ids": [101, 15], "block_size": 2, "medium": "GPU"}]}
EOF2
cat >"$TMP/other.jsonl" <<'EOF2'
{"ts": 1.0, "dp_rank": 0, "events": [{"type": "BlockStored", "block_hashes": [31], "token_ids": [101, 15], "block_size": 2, "medium": "GPU"}]}
EOF2
cat >"$TMP/store.jsonl" <<'EOF2'
{"ts": 1.0, "dp_rank": 0, "events": [{"type": "BlockStored", "block_hashes": [1001, 1002], "token_ids": [101, 15, 100, 55], "block_size": 2, "medium": "CPU"}, {"type": "BlockStored", "block_hashes": [1001], "token_ids": [101, 15], "block_size": 2, "medium": "DISK"}, {"type": "BlockStored", "block_hashes": [1003], "parent_block_hash": 1002, "token_ids": [89, 63], "block_size": 2, "medium": "DISK"}]}
EOF2

subs=()
for pair in "eng:$h1" "*:$h2"; do
  serves=${pair%%:*}
  port=${pair#*:}
  "$KVINDEX" subscribe \
    --source "eng=vllm@tcp://127.0.0.1:$base,model=m,block-size=2,dp-size=2" \
    --source "other=vllm@tcp://127.0.0.1:$((base + 2)),model=m,block-size=2" \
    --source "store=mooncake@tcp://127.0.0.1:$((base + 3)),block-size=2,serves=$serves" \
    --http "127.0.0.1:$port" --stats-interval 0 >"$TMP/sub$port.out" 2>"$TMP/sub$port.err" &
  subs+=($!)
  PIDS+=($!)
done
pubs=()
k=0
for spec in vllm:eng0 vllm:eng1 vllm:other mooncake:store; do
  timeout 30 "$KVINDEX" publish-fake --format "${spec%%:*}" --batches "$TMP/${spec#*:}.jsonl" \
    --model m --block-size 2 --port $((base + k)) --wait-subscribers 2 --wait-timeout 20 \
    >"$TMP/pub$k.out" 2>&1 &
  pubs+=($!)
  k=$((k + 1))
done
for k in 0 1 2 3; do
  wait "${pubs[$k]}" || fail "publish-fake $k: $(cat "$TMP/pub$k.out")"
done

"$PY" - "$h1" "$h2" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "HTTP answers differ from the hand-computed ones"
import sys
sys.path.insert(0, sys.argv[3])
from http_client import Server, wait_for
from prefix_hash_vectors import chain  # the independent oracle of the prefix hash chain
PROMPT = [101, 15, 100, 55, 89, 63]
# Every source streams without loss: each instance is "exact" (docs/http-api.md "Trust states").
eng = {"longest_matched": 6, "GPU": 4, "CPU": 4, "DISK": 4, "DP": {"0": 4, "1": 2}, "state": "exact"}
store = {"longest_matched": 6, "GPU": 0, "CPU": 4, "DISK": 4, "DP": {"0": 6}, "state": "exact"}
want = {
    sys.argv[1]: {"eng": eng, "store": store,
                  "other": {"longest_matched": 2, "GPU": 2, "CPU": 0, "DISK": 0, "DP": {"0": 2},
                            "state": "exact"}},
    sys.argv[2]: {"eng": eng, "store": store,
                  "other": {"longest_matched": 6, "GPU": 2, "CPU": 4, "DISK": 4, "DP": {"0": 2},
                            "state": "exact"}},
}
def post(port, path, body):
    return Server(port).json(path, body)
for port, expect in want.items():
    query = lambda: post(port, "/query", {"model": "m", "token_ids": PROMPT})["data"].get("default", {})
    try:  # the ingest threads may still be applying the last batches
        wait_for(lambda: query() == expect, "the expected answer", timeout=20)
    except SystemExit:
        pass
    got = query()
    assert got == expect, (port, got, expect)
    seq, _ = chain(PROMPT, 2, 1337)
    by_hash = post(port, "/query_by_hash", {"model": "m", "seq_hashes": seq})["data"]["default"]
    assert by_hash == expect, (port, by_hash, expect)
    # A prompt that diverges after H1: every instance holding H1 stops there.
    got = post(port, "/query", {"model": "m", "token_ids": [101, 15, 7, 7, 89, 63]})["data"]["default"]
    assert {n: v["longest_matched"] for n, v in got.items()} == {"eng": 2, "other": 2, "store": 2}, got
PYEOF
for s in "${subs[@]}"; do
  kill -TERM "$s"
  wait "$s" || fail "subscribe exit after SIGTERM"
done
finish
