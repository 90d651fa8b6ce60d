#!/usr/bin/env bash
# `kvindex replay CAPTURE --to-trace FILE`: captures made offline by publish-fake (`--out`) from
# KNOWN traces give back those traces' structure, checked by the independent
# tests/data/trace_structure.py; the derived trace replays to the same hit counts as the original;
# a hand-listed capture covers every skip rule; usage and data errors.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
SRC=${KVINDEX_SOURCE_DIR:-$(dirname "$0")/../..}
CHECK="$PY $SRC/tests/data/trace_structure.py"

# Every replay flag (docs/cli.md) is in --help.
run "$KVINDEX" replay --help
expect_status 0 "--help"
for flag in --dump --queries --max-blocks --block-tokens --max-requests --skip-bad --capacity \
    --policy --router --instances --seed --threads --json --cpu-capacity --disk-capacity --mode \
    --window --csv --plot --to-trace; do
  expect_stdout_contains "$flag"
done

# --- the bundled sample (3,000 requests, prefix-consistent ids, no request fully cached): one
# instance with room for everything, so every request publishes its missing suffix ---------------
SAMPLE=$SRC/traces/sample.jsonl
run "$KVINDEX" publish-fake --format vllm --trace "$SAMPLE" --count 0 --block-size 4 \
  --capacity 20000 --out "$TMP/s.kvcap"
expect_status 0 "publish-fake --trace sample"
run "$KVINDEX" replay "$TMP/s.kvcap" --to-trace "$TMP/s.jsonl" --json "$TMP/s.summary.json"
expect_status 0 "--to-trace sample"
expect_stdout_empty
expect_stderr_contains "3,000 requests, 49,238 blocks, 9,972 distinct ids; skipped stored events: 0 tokenless, 0 orphans, 0 rejected, 0 copies"
$CHECK expect "$SAMPLE" 1 >"$TMP/s.expected"
$CHECK ordered "$TMP/s.expected" "$TMP/s.jsonl" 4 >"$TMP/check" || fail "sample structure: $(head -5 "$TMP/check")"
"$PY" -c "
import json, sys
t = json.load(open(sys.argv[1]))['to_trace']
assert (t['requests'], t['blocks'], t['distinct_ids']) == (3000, 49238, 9972), t
assert t['skipped'] == {'tokenless': 0, 'orphans': 0, 'rejected': 0, 'copies': 0}, t
" "$TMP/s.summary.json" || fail "--json to_trace stats"

# Same structure, same hits: every router (cache-aware ranks by tokens, so the derived trace is
# replayed with its own block size), two policies, two capacities, 1 and 3 instances.
GRID=(--policy lru,prefix-lru --capacity 300,3000 --router round-robin,least-loaded,cache-aware
      --instances 1,3)
run "$KVINDEX" replay "$SAMPLE" "${GRID[@]}" --json "$TMP/orig.json"
expect_status 0 "replay original"
run "$KVINDEX" replay "$TMP/s.jsonl" "${GRID[@]}" --block-tokens 4 --json "$TMP/derived.json"
expect_status 0 "replay derived"
$CHECK hits "$TMP/orig.json" "$TMP/derived.json" >"$TMP/check" || fail "hit counts differ: $(head -5 "$TMP/check")"

# --to-trace - writes the trace on stdout, nothing else.
run "$KVINDEX" replay "$TMP/s.kvcap" --to-trace -
expect_status 0 "--to-trace -"
cmp -s "$stdout_file" "$TMP/s.jsonl" || fail "--to-trace - differs from --to-trace FILE"

# --- two instances: request i went to fake-(i mod 2); a prefix first stored by one instance and
# later by the other gets the same ids; a request its instance fully holds publishes nothing ------
cat >"$TMP/two.jsonl" <<'JSONL'
{"timestamp": 0, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2, "input_length": 1000, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 3, "input_length": 1000, "output_length": 1, "hash_ids": [5, 6]}
{"timestamp": 4, "input_length": 2000, "output_length": 1, "hash_ids": [1, 2, 3, 7]}
{"timestamp": 5, "input_length": 1000, "output_length": 1, "hash_ids": [5, 8]}
{"timestamp": 6, "input_length": 500, "output_length": 1, "hash_ids": [1]}
JSONL
run "$KVINDEX" publish-fake --format vllm --instances 2 --trace "$TMP/two.jsonl" --count 0 \
  --block-size 4 --out "$TMP/two.kvcap"
expect_status 0 "publish-fake two instances"
run "$KVINDEX" replay "$TMP/two.kvcap" --to-trace "$TMP/two.derived"
expect_status 0 "--to-trace two instances"
# By hand: fake-0 serves requests 0, 2, 4, 6: [1,2] and [1] are held there already; fake-1 serves
# 1, 3, 5, all new. 5 requests, 3+3+4+2+2 = 14 blocks, ids for 1,2,3,4,5,6,7,8.
expect_stderr_contains "5 requests, 14 blocks, 8 distinct ids"
$CHECK expect "$TMP/two.jsonl" 2 >"$TMP/two.expected"
[ "$(wc -l <"$TMP/two.expected")" -eq 5 ] || fail "oracle: $(cat "$TMP/two.expected")"
$CHECK unordered "$TMP/two.expected" "$TMP/two.derived" 4 >"$TMP/check" || fail "two instances: $(cat "$TMP/check")"

# --- a publisher restart empties the source: a prompt stored again afterwards is a request ------
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}' \
  '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [3]}' \
  '{"timestamp": 2, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}' >"$TMP/r.jsonl"
run "$KVINDEX" publish-fake --format vllm --trace "$TMP/r.jsonl" --count 0 --block-size 4 \
  --restart-after 2 --out "$TMP/r.kvcap"
expect_status 0 "publish-fake --restart-after"
run "$KVINDEX" replay "$TMP/r.kvcap" --to-trace "$TMP/r.derived" --json "$TMP/r.summary.json"
expect_status 0 "--to-trace restart"
$CHECK expect "$TMP/r.jsonl" 1 2 >"$TMP/r.expected"
$CHECK ordered "$TMP/r.expected" "$TMP/r.derived" 4 >"$TMP/check" || fail "restart: $(cat "$TMP/check")"
"$PY" -c "
import json, sys
t = json.load(open(sys.argv[1]))['to_trace']
assert (t['requests'], t['restarts']) == (3, 1), t
" "$TMP/r.summary.json" || fail "restart counts"

# --- every skip rule, on listed batches (block size 2); expected by hand ------------------------
cat >"$TMP/hand.batches" <<'JSONL'
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [10, 11], "parent_block_hash": null, "token_ids": [1, 2, 3, 4], "block_size": 2, "medium": "GPU"}]}
{"ts": 2, "events": [{"type": "BlockStored", "block_hashes": [12], "parent_block_hash": 11, "token_ids": [5, 6], "block_size": 2, "medium": "GPU"}]}
{"ts": 3, "events": [{"type": "BlockStored", "block_hashes": [10, 11], "parent_block_hash": null, "token_ids": [1, 2, 3, 4], "block_size": 2, "medium": "CPU"}]}
{"ts": 4, "events": [{"type": "BlockStored", "block_hashes": [20], "parent_block_hash": 99, "token_ids": [7, 8], "block_size": 2, "medium": "GPU"}]}
{"ts": 5, "events": [{"type": "BlockStored", "block_hashes": [30], "parent_block_hash": null, "token_ids": [], "block_size": 2, "medium": "GPU"}]}
{"ts": 6, "events": [{"type": "BlockStored", "block_hashes": [40], "parent_block_hash": 30, "token_ids": [9, 9], "block_size": 2, "medium": "GPU"}]}
{"ts": 7, "events": [{"type": "BlockStored", "block_hashes": [50, 51], "parent_block_hash": null, "token_ids": [1, 2, 3], "block_size": 2, "medium": "GPU"}]}
{"ts": 8, "events": [{"type": "BlockRemoved", "block_hashes": [12], "medium": "GPU"}, {"type": "BlockStored", "block_hashes": [12], "parent_block_hash": 11, "token_ids": [5, 6], "block_size": 2, "medium": "GPU"}]}
{"ts": 9, "events": [{"type": "BlockRemoved", "block_hashes": [10, 11], "medium": "GPU"}, {"type": "BlockStored", "block_hashes": [13], "parent_block_hash": 11, "token_ids": [7, 7], "block_size": 2, "medium": "GPU"}]}
{"ts": 10, "events": [{"type": "BlockStored", "block_hashes": [60], "parent_block_hash": null, "token_ids": [1, 2], "block_size": 2, "medium": "GPU"}]}
{"ts": 11, "events": [{"type": "BlockStored", "block_hashes": [70], "parent_block_hash": null, "token_ids": [1, 2], "block_size": 2, "medium": "GPU", "lora_name": "x", "lora_id": 3}]}
{"ts": 12, "events": [{"type": "AllBlocksCleared"}, {"type": "BlockStored", "block_hashes": [14], "parent_block_hash": 11, "token_ids": [8, 8], "block_size": 2, "medium": "GPU"}]}
JSONL
run "$KVINDEX" publish-fake --format vllm --batches "$TMP/hand.batches" --out "$TMP/hand.kvcap"
expect_status 0 "publish-fake --batches"
run "$KVINDEX" replay "$TMP/hand.kvcap" --to-trace "$TMP/hand.derived"
expect_status 0 "--to-trace listed"
# 1: [0,1], grown by 2 (its parent is the last block of the request just before) to one request
# [0,1,2] at 1's time; 3: a CPU copy of held blocks; 4: parent 99 unknown (orphan); 5: no
# tokens (tokenless); 6: parent 30 has no chain (orphan); 7: 3 tokens for 2 blocks (rejected);
# 8: 12 removed then stored again: [0,1,2]; 9: 10 and 11 stay held in CPU, 13 under 11: [0,1,3];
# 10: another engine hash, the same tokens from the root: [0]; 11: the same under a LoRA: a new
# scope, [4]; 12: after AllBlocksCleared the parent 11 is gone (orphan).
expect_stderr_contains "5 requests, 11 blocks, 5 distinct ids; skipped stored events: 1 tokenless, 3 orphans, 1 rejected, 1 copies"
"$PY" - "$TMP/hand.derived" >"$TMP/check" 2>&1 <<'PYEOF' || fail "listed: $(cat "$TMP/check")"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [([0, 1, 2], 6), ([0, 1, 2], 6), ([0, 1, 3], 6), ([0], 2), ([4], 2)]
assert [(r["hash_ids"], r["input_length"]) for r in got] == want, got
assert all(r["output_length"] == 0 for r in got)
ts = [r["timestamp"] for r in got]
assert ts[0] == 0 and ts == sorted(ts) and len(set(ts)) == len(ts), ts
PYEOF
run "$KVINDEX" replay "$TMP/hand.derived" --capacity inf --block-tokens 2 --json "$TMP/hand.json"
expect_status 0 "replay the listed derived trace"
"$PY" -c "
import json, sys
r = json.load(open(sys.argv[1]))['results'][0]
# By hand: 11 blocks; [0,1,2] hits 0, again 3, [0,1,3] 2, [0] 1, [4] 0.
assert (r['blocks'], r['prefix_hit_blocks']) == (11, 6), r
" "$TMP/hand.json" || fail "derived trace replay"

# --- a chain stored one block at a time (a decode): one request that grows, so the output is
# linear in the chain's length: 4,000 blocks give about twice the bytes of 2,000, not four times -
chain() {  # chain N N-with-thousands-separators
  "$PY" -c "
import json, sys
n = int(sys.argv[1])
for i in range(n):
    parent = None if i == 0 else 1000 + i - 1
    print(json.dumps({'ts': i, 'events': [{'type': 'BlockStored', 'block_hashes': [1000 + i],
        'parent_block_hash': parent, 'token_ids': [i, i], 'block_size': 2, 'medium': 'GPU'}]}))
" "$1" >"$TMP/chain$1.batches"
  run "$KVINDEX" publish-fake --format vllm --batches "$TMP/chain$1.batches" --count 0 \
    --out "$TMP/chain$1.kvcap"
  expect_status 0 "publish-fake chain $1"
  run "$KVINDEX" replay "$TMP/chain$1.kvcap" --to-trace "$TMP/chain$1.jsonl"
  expect_status 0 "--to-trace chain $1"
  expect_stderr_contains "1 requests, $2 blocks, $2 distinct ids"
  "$PY" -c "
import json, sys
lines = open(sys.argv[1]).read().splitlines()
n = int(sys.argv[2])
assert len(lines) == 1, len(lines)
r = json.loads(lines[0])
assert r['hash_ids'] == list(range(n)) and r['input_length'] == 2 * n, r['input_length']
" "$TMP/chain$1.jsonl" "$1" || fail "chain $1: not one request of the whole chain"
}
chain 2000 2,000
chain 4000 4,000
small=$(wc -c <"$TMP/chain2000.jsonl")
large=$(wc -c <"$TMP/chain4000.jsonl")
# Ids grow from 4 to 5 digits, so a little over 2x; quadratic output would be over 4x.
[ $((large * 10)) -le $((small * 23)) ] || fail "chain output not linear: $small vs $large bytes"

# --- errors -------------------------------------------------------------------------------------
run "$KVINDEX" replay "$SAMPLE" --to-trace "$TMP/x.jsonl"
expect_status 2 "--to-trace on a trace"
expect_stderr_contains "already a request trace"
[ ! -e "$TMP/x.jsonl" ] || fail "a usage error must not create the output"
run "$KVINDEX" replay "$TMP/s.kvcap" --to-trace "$TMP/x.jsonl" --dump
expect_status 2 "--to-trace with --dump"
run "$KVINDEX" replay "$TMP/s.kvcap" --to-trace - --json -
expect_status 2 "--to-trace - with --json -"
run "$KVINDEX" replay "$TMP/missing.kvcap" --to-trace "$TMP/x.jsonl"
expect_status 1 "missing capture"
expect_stderr_contains "missing.kvcap"
run "$KVINDEX" replay "$TMP/s.kvcap" --to-trace "$TMP/no/such/dir/x.jsonl"
expect_status 1 "unwritable output"
expect_stderr_contains "no/such/dir/x.jsonl"

# --- both public traces (118 and 213 of their requests are fully cached by then and publish
# nothing): the derived trace is the oracle's expectation, and replays to its hit counts ----------
[ "$failures" -eq 0 ] || finish
for t in conversation synthetic; do
  ORIG=$SRC/traces/mooncake/${t}_trace.jsonl
  run "$KVINDEX" publish-fake --format vllm --trace "$ORIG" --count 0 --block-size 4 \
    --capacity 200000 --out "$TMP/$t.kvcap"
  expect_status 0 "publish-fake --trace $t"
  run "$KVINDEX" replay "$TMP/$t.kvcap" --to-trace "$TMP/$t.derived"
  expect_status 0 "--to-trace $t"
  $CHECK expect "$ORIG" 1 >"$TMP/$t.expected"
  $CHECK ordered "$TMP/$t.expected" "$TMP/$t.derived" 4 >"$TMP/check" || fail "$t structure: $(head -5 "$TMP/check")"
  run "$KVINDEX" replay "$TMP/$t.expected" "${GRID[@]}" --json "$TMP/$t.e.json"
  expect_status 0 "replay $t expected"
  run "$KVINDEX" replay "$TMP/$t.derived" "${GRID[@]}" --block-tokens 4 --json "$TMP/$t.d.json"
  expect_status 0 "replay $t derived"
  $CHECK hits "$TMP/$t.e.json" "$TMP/$t.d.json" >"$TMP/check" || fail "$t hit counts: $(head -5 "$TMP/check")"
done
[ "$(wc -l <"$TMP/conversation.derived")" -eq 11913 ] || fail "conversation: 12,031 - 118 requests expected"
[ "$(wc -l <"$TMP/synthetic.derived")" -eq 3780 ] || fail "synthetic: 3,993 - 213 requests expected"

finish
