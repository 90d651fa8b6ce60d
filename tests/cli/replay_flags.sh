#!/usr/bin/env bash
# `kvindex replay TRACE`: every flag on the worked example of docs/simulation.md (capacity 3, one
# instance, requests [1,2,3], [1,2,4], [5], [1,2,3]: lru 2/3/5, lfu 4/4/3, fifo 2/3/5).
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
T=$TMP/worked.jsonl
cat >"$T" <<'JSONL'
{"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2, "input_length": 512, "output_length": 1, "hash_ids": [5]}
{"timestamp": 3, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
JSONL

# jq-like checks with python: $1 = JSON file, $2 = a python expression over `d` that must be True.
check_json() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
    || fail "JSON check failed: $2"
}

run "$KVINDEX" replay --help
expect_status 0 "--help"
for flag in --block-tokens --max-requests --skip-bad --capacity --policy --router --instances \
            --seed --threads --json; do
  expect_stdout_contains "$flag"
done

# The default grid: lru, inf, round-robin, 1 instance; a header line and an aligned table.
run "$KVINDEX" replay "$T"
expect_status 0 "defaults"
expect_stdout_contains "mooncake format, 4 requests, 10 blocks (5 distinct), 512 tokens per block"
expect_stdout_contains "policy"
expect_stdout_contains "prefix_token"
[ "$(wc -l <"$stdout_file")" -eq 3 ] || fail "expected header + table header + 1 row"

# The worked example through the CLI, as JSON on stdout.
run "$KVINDEX" replay "$T" --capacity 3 --policy lru,lfu,fifo --json -
expect_status 0 "worked example"
cp "$stdout_file" "$TMP/we.json"
check_json "$TMP/we.json" "[(r['policy'], r['prefix_hit_blocks'], r['any_hit_blocks'], r['evictions']) for r in d['results']] == [('lru',2,3,5),('lfu',4,4,3),('fifo',2,3,5)]"
check_json "$TMP/we.json" "all(r['blocks'] == 10 and r['requests'] == 4 and r['capacity'] == 3 for r in d['results'])"
check_json "$TMP/we.json" "abs(d['results'][0]['prefix_block'] - 0.2) < 1e-12 and abs(d['results'][0]['any_block'] - 0.3) < 1e-12"
# prefix_token: lru hits 2 blocks on request 2 (input 1500): min(1024, 1500) / (1536+1500+512+1536).
check_json "$TMP/we.json" "abs(d['results'][0]['prefix_token'] - 1024/5084) < 1e-12"

# --json FILE: the table still goes to stdout; the row shape is complete.
run "$KVINDEX" replay "$T" --capacity 3,inf --router round-robin,least-loaded --instances 1,2 \
  --json "$TMP/grid.json"
expect_status 0 "grid"
expect_stdout_contains "least-loaded"
check_json "$TMP/grid.json" "len(d['results']) == 8"
check_json "$TMP/grid.json" "[r['capacity'] for r in d['results']][:4] == [3,3,3,3] and d['results'][4]['capacity'] is None"
check_json "$TMP/grid.json" "all(set(['policy','capacity','router','instances','requests','blocks','prefix_hit_blocks','any_hit_blocks','evictions','prefix_block','any_block','prefix_token','per_instance']) <= set(r) for r in d['results'])"
check_json "$TMP/grid.json" "all(len(r['per_instance']) == r['instances'] for r in d['results'])"
check_json "$TMP/grid.json" "all(sum(p['blocks'] for p in r['per_instance']) == r['blocks'] == 10 for r in d['results'])"
check_json "$TMP/grid.json" "d['format'] == 'mooncake' and d['block_tokens'] == 512"

# --block-tokens changes only the token conversion: 16 tokens per block -> 2*16 / 5084.
run "$KVINDEX" replay "$T" --capacity 3 --block-tokens 16 --json -
expect_status 0 "--block-tokens"
cp "$stdout_file" "$TMP/bt.json"
check_json "$TMP/bt.json" "d['block_tokens'] == 16 and abs(d['results'][0]['prefix_token'] - 32/5084) < 1e-12 and d['results'][0]['prefix_hit_blocks'] == 2"

# --max-requests: the first 2 requests only.
run "$KVINDEX" replay "$T" --max-requests 2 --json -
expect_status 0 "--max-requests"
cp "$stdout_file" "$TMP/mr.json"
check_json "$TMP/mr.json" "d['results'][0]['requests'] == 2 and d['results'][0]['blocks'] == 6"

# --router random --seed: reproducible, and the seed is reported.
run "$KVINDEX" replay "$T" --router random --instances 3 --seed 42 --json "$TMP/r1.json"
expect_status 0 "--seed"
run "$KVINDEX" replay "$T" --router random --instances 3 --seed 42 --json "$TMP/r2.json"
cmp -s "$TMP/r1.json" "$TMP/r2.json" || fail "the same seed gave different results"
check_json "$TMP/r1.json" "d['results'][0]['seed'] == 42"

# --threads: 1 and 2 threads give identical output.
run "$KVINDEX" replay "$T" --policy lru,lfu,fifo,prefix-lru --capacity 2,3,inf --threads 1 --json "$TMP/t1.json"
expect_status 0 "--threads 1"
run "$KVINDEX" replay "$T" --policy lru,lfu,fifo,prefix-lru --capacity 2,3,inf --threads 2 --json "$TMP/t2.json"
expect_status 0 "--threads 2"
cmp -s "$TMP/t1.json" "$TMP/t2.json" || fail "--threads changed the results"

# --skip-bad: bad lines are skipped and counted on stderr; without it, the first is an error.
{ cat "$T"; echo 'not json'; echo '{"timestamp": 9}'; } >"$TMP/bad.jsonl"
run "$KVINDEX" replay "$TMP/bad.jsonl" --skip-bad --json -
expect_status 0 "--skip-bad"
expect_stderr_contains "skipped 2 bad line(s); first: "
expect_stderr_contains "bad.jsonl: line 5: "
cp "$stdout_file" "$TMP/sb.json"
check_json "$TMP/sb.json" "d['skipped_lines'] == 2 and d['results'][0]['requests'] == 4"

# Bailian traces are detected: 16 tokens per block by default, session routing by chat.
cat >"$TMP/bailian.jsonl" <<'JSONL'
{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 3, "type": "text", "turn": 1, "hash_ids": [10, 11, 12]}
{"chat_id": 2, "parent_chat_id": -1, "timestamp": 0.7, "input_length": 20, "output_length": 3, "type": "text", "turn": 1, "hash_ids": [20, 21]}
{"chat_id": 3, "parent_chat_id": 1, "timestamp": 1.5, "input_length": 60, "output_length": 3, "type": "text", "turn": 2, "hash_ids": [10, 11, 12, 13]}
JSONL
run "$KVINDEX" replay "$TMP/bailian.jsonl" --router session --instances 2 --json -
expect_status 0 "bailian"
cp "$stdout_file" "$TMP/bl.json"
check_json "$TMP/bl.json" "d['format'] == 'bailian' and d['block_tokens'] == 16"
# chat 1 -> instance 0, chat 2 -> instance 1 (least loaded), chat 3 follows chat 1: 3 blocks hit.
check_json "$TMP/bl.json" "d['results'][0]['prefix_hit_blocks'] == 3 and d['results'][0]['per_instance'][0]['requests'] == 2"
check_json "$TMP/bl.json" "d['results'][0]['prefix_hit_tokens'] == 48"

finish
