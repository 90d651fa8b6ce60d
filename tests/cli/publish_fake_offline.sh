#!/usr/bin/env bash
# publish-fake without sockets: `--out` writes the stream as a correct subscriber would have
# recorded it (read back by the independent tests/data/capture_check.py), `--emit-queries`
# answers checked against a hand computation, the --trace / --capture / --batches workloads, and
# usage errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"
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

# --- --trace: a hand-made Mooncake trace; hash id h is the block [h*4 .. h*4+3] ----------------
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}' \
  '{"timestamp": 1, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 3]}' >"$TMP/t.jsonl"
run "$KVINDEX" publish-fake --format vllm --trace "$TMP/t.jsonl" --count 0 --block-size 4 \
  --out "$TMP/t.kvcap" --json "$TMP/t.json"
expect_status 0 "--trace"
$CHECK "$TMP/t.kvcap" >"$TMP/t.records" || fail "capture_check rejected the --trace capture"
"$PY" - "$TMP/t.records" "$TMP/t.json" >"$TMP/check" 2>&1 <<'PYEOF' || fail "--trace: $(cat "$TMP/check")"
import json, sys, msgpack
recs = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["type"] == 2]
events = []
for r in recs:
    batch = msgpack.unpackb(bytes.fromhex(r["frames"][2]), raw=False)
    events += batch[1]
# Request 1 stores blocks 1,2 from the root; request 2 hits them and stores block 3 under block 2.
assert len(events) == 2, events
assert events[0][3] == [4, 5, 6, 7, 8, 9, 10, 11] and events[0][2] is None, events[0]
assert events[1][3] == [12, 13, 14, 15] and events[1][2] == events[0][1][1], events[1]
summary = json.load(open(sys.argv[2]))
assert summary["blocks_stored"] == 3
assert summary["sources"][0]["model_blocks"] == 3, summary["sources"][0]
PYEOF
# The model's blocks after evictions: what was stored less what was removed.
run "$KVINDEX" publish-fake --format vllm --count 40 --capacity 8 --out "$TMP/e.kvcap" \
  --json "$TMP/e.json"
expect_status 0 "--capacity 8"
"$PY" - "$TMP/e.json" >"$TMP/check" 2>&1 <<'PYEOF' || fail "model_blocks: $(cat "$TMP/check")"
import json, sys
s = json.load(open(sys.argv[1]))["sources"][0]
assert s["blocks_removed"] > 0, s
assert s["model_blocks"] == s["blocks_stored"] - s["blocks_removed"] <= 8, s
PYEOF
run "$KVINDEX" publish-fake --trace "$TMP/missing.jsonl" --out "$TMP/x.kvcap"
expect_status 1 "--trace missing file"
expect_stderr_contains "missing.jsonl"
printf '{"hash_ids": "x"}\n' >"$TMP/bad.jsonl"
run "$KVINDEX" publish-fake --trace "$TMP/bad.jsonl" --out "$TMP/x.kvcap"
expect_status 1 "--trace bad line"
expect_stderr_contains "bad.jsonl: line 1: hash_ids"

# --- --capture: re-publish the --trace capture's live messages (no sockets: --out again) -------
run "$KVINDEX" publish-fake --capture "$TMP/t.kvcap" --speed 100 --out "$TMP/c.kvcap" \
  --json "$TMP/c.json" --emit-queries "$TMP/c.q"
expect_status 0 "--capture"
$CHECK "$TMP/c.kvcap" >"$TMP/c.records" || fail "capture_check rejected the --capture output"
"$PY" - "$TMP/t.records" "$TMP/c.records" "$TMP/c.q" >"$TMP/check" 2>&1 <<'PYEOF' || fail "--capture: $(cat "$TMP/check")"
import json, sys
a = [json.loads(l)["frames"] for l in open(sys.argv[1]) if json.loads(l)["type"] == 2]
b = [json.loads(l)["frames"] for l in open(sys.argv[2]) if json.loads(l)["type"] == 2]
assert a == b, "re-published messages differ"
qs = [json.loads(l) for l in open(sys.argv[3])]
assert qs and all(q["expect"]["fake-0"]["longest_matched"] in (0, 12) for q in qs), qs
PYEOF

# --- usage errors: exit 2, one line naming the flag --------------------------------------------
run "$KVINDEX" publish-fake --format vllm-v9 --out "$TMP/x.kvcap"
expect_status 2 "bad --format"
run "$KVINDEX" publish-fake --replay-style topic --out "$TMP/x.kvcap"
expect_status 2 "bad --replay-style"
run "$KVINDEX" publish-fake --drop-every 1 --out "$TMP/x.kvcap"
expect_status 2 "--drop-every 1"
expect_stderr_contains "--drop-every"
run "$KVINDEX" publish-fake --restart-after 1 --out "$TMP/x.kvcap"
expect_status 2 "--restart-after 1"
run "$KVINDEX" publish-fake --capacity 2 --prompt-blocks 8 --out "$TMP/x.kvcap"
expect_status 2 "--capacity below a prompt"
expect_stderr_contains "--capacity 2"
run "$KVINDEX" publish-fake --prefix-blocks 9 --prompt-blocks 8 --out "$TMP/x.kvcap"
expect_status 2 "--prefix-blocks above --prompt-blocks"
run "$KVINDEX" publish-fake --synthetic --trace "$TMP/t.jsonl" --out "$TMP/x.kvcap"
expect_status 2 "two workloads"
run "$KVINDEX" publish-fake --bind --connect 127.0.0.1 --out "$TMP/x.kvcap"
expect_status 2 "--bind with --connect"
run "$KVINDEX" publish-fake --instances 2 --batches "$TMP/t.jsonl" --out "$TMP/x.kvcap"
expect_status 2 "--batches with 2 instances"
run "$KVINDEX" publish-fake --port 65535 --instances 2 --out "$TMP/x.kvcap"
expect_status 2 "ports beyond 65535"
run "$KVINDEX" publish-fake --events-per-batch 0 --out "$TMP/x.kvcap"
expect_status 2 "--events-per-batch 0"
run "$KVINDEX" publish-fake --speed 0 --out "$TMP/x.kvcap"
expect_status 2 "--speed 0"
run "$KVINDEX" publish-fake --zipf -1 --out "$TMP/x.kvcap"
expect_status 2 "--zipf -1"

# --- every flag is in --help ---------------------------------------------------------------------
run "$KVINDEX" publish-fake --help
expect_status 0 "--help"
for flag in --format --replay-style --synthetic --trace --capture --batches --speed --instances \
    --dp-ranks --port --replay-port --bind --connect --topic --model --count --events-per-batch \
    --rate --seed --blast --drop-every --duplicate-every --corrupt-every --restart-after --ring \
    --linger --wait-subscribers --wait-timeout --hwm --emit-queries --query-every --out --json \
    --block-size --prompt-blocks --prefix-blocks --prefixes --zipf --capacity; do
  expect_stdout_contains "$flag"
done

# --- --seed, --zipf, --prefixes, --model: deterministic and visible -----------------------------
run "$KVINDEX" publish-fake --seed 5 --zipf 2 --prefixes 3 --model m1 --count 5 \
  --out "$TMP/s1.kvcap" --emit-queries "$TMP/s1.q"
expect_status 0 "--seed 5"
run "$KVINDEX" publish-fake --seed 5 --zipf 2 --prefixes 3 --model m1 --count 5 \
  --out "$TMP/s2.kvcap" --emit-queries "$TMP/s2.q"
cmp -s "$TMP/s1.q" "$TMP/s2.q" || fail "the same --seed must give the same queries"
grep -q '"model":"m1"' "$TMP/s1.q" || fail "--model not in the queries"
run "$KVINDEX" publish-fake --seed 6 --zipf 2 --prefixes 3 --model m1 --count 5 \
  --out "$TMP/s3.kvcap" --emit-queries "$TMP/s3.q"
cmp -s "$TMP/s1.q" "$TMP/s3.q" && fail "another --seed must give other prompts"

# --- --trace: hash ids are unsigned 64-bit, 2^63 and 2^64 - 1 included -------------------------
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [9223372036854775808, 18446744073709551615]}' >"$TMP/big.jsonl"
run "$KVINDEX" publish-fake --format vllm --trace "$TMP/big.jsonl" --count 0 --block-size 4 \
  --out "$TMP/big.kvcap"
expect_status 0 "--trace with hash ids of 2^63 and above"
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [-1]}' >"$TMP/neg.jsonl"
run "$KVINDEX" publish-fake --format vllm --trace "$TMP/neg.jsonl" --count 0 --out "$TMP/neg.kvcap"
expect_status 1 "--trace with a negative hash id"

finish
