#!/usr/bin/env bash
# publish-fake without sockets: `--out` writes the stream as a correct subscriber would have
# recorded it (read back by the independent tests/data/capture_check.py), `--emit-queries`
# answers checked against a hand computation, the --trace / --capture / --batches workloads, and
# usage errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.sh"
CHECK="$PY ${KVINDEX_SOURCE_DIR}/tests/data/capture_check.py"

# --- --emit-queries on a tiny case, by hand ---------------------------------------------------
# One instance, two DP ranks, 2 batches each, one event per batch. Every prompt is the single
# shared prefix block (2 tokens) plus one unique block: each request stores its 2 blocks on the
# rank that served it (capacity 10: nothing is evicted). Queries after every batch probe, in order:
# that request's prompt, the shared prefix alone, an unseen prompt; then the same at the end.
run "$KVINDEX" publish-fake --format vllm --count 2 --dp-ranks 2 --prefixes 1 --prefix-blocks 1 \
  --prompt-blocks 2 --block-size 2 --capacity 10 --out "$TMP/hand.kvcap" \
  --emit-queries "$TMP/hand.q" --query-every 1
expect_status 0 "--emit-queries"
"$PY" - "$TMP/hand.q" >"$TMP/check" 2>&1 <<'PYEOF' || fail "emit-queries: $(cat "$TMP/check")"
import json, sys
qs = [json.loads(l) for l in open(sys.argv[1])]
def a(l, dp0, dp1):
    return {"fake-0": {"longest_matched": l, "GPU": l, "CPU": 0, "DISK": 0, "DP": {"0": dp0, "1": dp1}}}
# (after, [recent prompt, shared prefix, unseen]) worked out by hand: the serving rank holds its
# prompt (4 tokens); the other rank holds the prefix (2 tokens) once it has served a request.
table = [
    ({"source": "fake-0/dp0", "seq": 0}, [a(4, 4, 0), a(2, 2, 0), a(0, 0, 0)]),
    ({"source": "fake-0/dp1", "seq": 0}, [a(4, 2, 4), a(2, 2, 2), a(0, 0, 0)]),
    ({"source": "fake-0/dp0", "seq": 1}, [a(4, 4, 2), a(2, 2, 2), a(0, 0, 0)]),
    ({"source": "fake-0/dp1", "seq": 1}, [a(4, 2, 4), a(2, 2, 2), a(0, 0, 0)]),
    (None, [a(4, 4, 2), a(2, 2, 2), a(0, 0, 0)]),
    (None, [a(4, 2, 4), a(2, 2, 2), a(0, 0, 0)]),
]
want = [(after, e) for after, es in table for e in es]
errors = []
if len(qs) != len(want):
    errors.append("%d queries, want %d" % (len(qs), len(want)))
for q, (after, expect) in zip(qs, want):
    if q.get("after") != after or q["expect"] != expect:
        errors.append("%s: after %r expect %r; want %r %r" % (q["id"], q.get("after"), q["expect"], after, expect))
    if q["query"]["model"] != "fake-model":
        errors.append("%s: model" % q["id"])
prefix = qs[1]["query"]["token_ids"]
if len(prefix) != 2 or qs[0]["query"]["token_ids"][:2] != prefix or len(qs[0]["query"]["token_ids"]) != 4:
    errors.append("prompts: %r %r" % (qs[0]["query"]["token_ids"], prefix))
if errors:
    print("\n".join(errors)); sys.exit(1)
PYEOF

# --- --out: the capture a correct subscriber would have written --------------------------------
run "$KVINDEX" publish-fake --format vllm --count 10 --drop-every 4 --corrupt-every 5 \
  --duplicate-every 3 --restart-after 7 --replay-port 7000 --ring 4 --topic t \
  --out "$TMP/f.kvcap" --json "$TMP/f.json"
expect_status 0 "--out"
$CHECK "$TMP/f.kvcap" >"$TMP/f.records" || fail "capture_check rejected the --out capture"
"$PY" - "$TMP/f.records" >"$TMP/check" 2>&1 <<'PYEOF' || fail "--out records: $(cat "$TMP/check")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
kinds = {1: "source", 2: "msg", 3: "rep", 4: "gap", 6: "restart", 7: "malformed", 9: "timeout"}
out = []
for r in recs:
    k = kinds.get(r["type"], str(r["type"]))
    if k == "msg":
        f = [bytes.fromhex(x) for x in r["frames"]]
        out.append("m%d%s" % (int.from_bytes(f[1], "big"), "!" if f[2][:1] == b"\xc1" else ""))
    elif k == "rep":
        f = [bytes.fromhex(x) for x in r["frames"]]
        out.append("rEND" if f[1] == b"\xff" * 8 else "r%d" % int.from_bytes(f[1], "big"))
    else:
        out.append(k)
# By hand: batch k (1-based) is dropped when k%4==0, else corrupt when k%5==0, else duplicated
# when k%3==0; never the last batch dropped, never the first after the restart dropped or
# corrupted. The restart comes before the 8th batch (sequence back to 0). Replies (vllm layout)
# come from a ring of 4, from the hole on: seq 3 dropped + seq 4 corrupt = one hole 3..4.
want = ["source", "m0", "m1", "m2", "m2",
        "m4!", "malformed", "r3", "r4", "rEND",
        "m5", "m5", "m6",
        "restart", "m0", "m1", "m1",
        "m2!", "malformed", "r2", "rEND"]
if out != want:
    print("records:\n got  %s\n want %s" % (" ".join(out), " ".join(want)))
    sys.exit(1)
PYEOF

finish
