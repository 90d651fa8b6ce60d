#!/usr/bin/env bash
# `kvindex replay TRACE --curve [--curve-points N]`: the exact LRU curve on hand-computed traces
# (docs/simulation.md "Hit-rate curves"), its table, JSON, CSV and plot, and its usage errors.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
check_json() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
    || fail "JSON check failed: $2"
}

run "$KVINDEX" replay --help
expect_status 0 "--help"
for flag in --curve --curve-points --tier-write --reuse; do expect_stdout_contains "$flag"; done
grep -q "not with the" "$stdout_file" && grep -q "cache-aware router" "$stdout_file" \
  || fail "--help says the curve does not apply to cache-aware routing"

# The worked example of docs/simulation.md: [1,2,3] [1,2,4] [5] [1,2,3], one instance.
# Stack depths at lookup (1 = most recent, - = never seen):
#   [1,2,4]: 3, 2, -   running max 3, 3      -> prefix 2 from C=3; any: 1 from C=2, 2 from C=3
#   [1,2,3]: 4, 3, 5   running max 4, 4, 5   -> prefix 2 from C=4, 3 from C=5; any from 3, 4, 5
# Curve (capacity: prefix, any): 1: 0,0  2: 0,1  3: 2,3  4: 4,4  5: 5,5 (working set 5).
T=$TMP/we.jsonl
cat >"$T" <<'JSONL'
{"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2, "input_length": 512, "output_length": 1, "hash_ids": [5]}
{"timestamp": 3, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
JSONL
run "$KVINDEX" replay "$T" --curve --json "$TMP/c.json"
expect_status 0 "curve"
check_json "$TMP/c.json" "[(r['capacity'], r['prefix_hit_blocks'], r['any_hit_blocks']) for r in d['curve']] == [(1, 0, 0), (2, 0, 1), (3, 2, 3), (4, 4, 4), (5, 5, 5)]"
check_json "$TMP/c.json" "all(r['policy'] == 'lru' and r['instances'] == 1 and r['router'] == 'round-robin' and r['blocks'] == 10 for r in d['curve'])"
# Reach: prefix 50% of 5 -> 2.5 -> C=4 (4 hits); any 50% -> C=3 (3 hits); 80% -> 4 and 4; 90% -> 5.
check_json "$TMP/c.json" "[(t['share'], t['prefix_capacity'], t['any_capacity']) for t in d['reach'][0]['targets']] == [(0.5, 4, 3), (0.8, 4, 4), (0.9, 5, 5), (0.95, 5, 5), (0.99, 5, 5)]"
check_json "$TMP/c.json" "d['reach'][0]['working_set'] == 5"
# The table: the log-spaced capacities 1..5 (16 points collapse to 1 2 3 4 5), then the reach.
expect_stdout_contains "working set 5 blocks per instance"
grep -qE '^ +3 +2 +3 +20.00% +30.00%$' "$stdout_file" || fail "table row at capacity 3"
grep -qE '^ +50% +4 +3$' "$stdout_file" || fail "reach row 50%"
run "$KVINDEX" replay "$T" --curve --curve-points 2
expect_status 0 "curve points 2"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+% +[0-9.]+%$' "$stdout_file")" -eq 2 ] \
  || fail "--curve-points 2: expected rows at capacities 1 and 5"
grep -qE '^ +5 +5 +5 ' "$stdout_file" || fail "--curve-points 2: row at the working set"

# A plain simulation agrees at each capacity (the oracle above is the hand computation).
run "$KVINDEX" replay "$T" --capacity 1,2,3,4,5 --json -
cp "$stdout_file" "$TMP/s.json"
check_json "$TMP/s.json" "[(r['prefix_hit_blocks'], r['any_hit_blocks']) for r in d['results']] == [(0, 0), (0, 1), (2, 3), (4, 4), (5, 5)]"

# A block repeated within a request sees the stack its first access left: [1,2] then [2,2,1].
# Lookup of [2,2,1]: depths 1, 1, 2 -> prefix 2 and any 2 from C=1, 3 from C=2. At C=1 the
# plain simulation agrees: the cache holds {2}; 2 and 2 hit at lookup, 1 does not.
R=$TMP/rep.jsonl
printf '%s\n' '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}' \
  '{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [2, 2, 1]}' >"$R"
run "$KVINDEX" replay "$R" --curve --json -
cp "$stdout_file" "$TMP/r.json"
check_json "$TMP/r.json" "[(r['capacity'], r['prefix_hit_blocks'], r['any_hit_blocks']) for r in d['curve']] == [(1, 2, 2), (2, 3, 3)]"

# Two instances, round-robin: [1,2,3] and [5] to 0, [1,2,4] and [1,2,3] to 1. Instance 0 never
# hits; instance 1: [1,2,3] after [1,2,4] has depths 3, 2, - -> any 1 from C=2, prefix 2 and
# any 2 from C=3.
# Several --instances values: one curve each, in grid order.
run "$KVINDEX" replay "$T" --curve --instances 1,2 --json -
cp "$stdout_file" "$TMP/i.json"
check_json "$TMP/i.json" "[(r['capacity'], r['prefix_hit_blocks'], r['any_hit_blocks']) for r in d['curve'] if r['instances'] == 2] == [(1, 0, 0), (2, 0, 1), (3, 2, 2)]"
check_json "$TMP/i.json" "[x['instances'] for x in d['reach']] == [1, 2] and d['reach'][1]['working_set'] == 4"

# --csv: the same rows.
run "$KVINDEX" replay "$T" --curve --csv "$TMP/c.csv"
expect_status 0 "curve csv"
[ "$(head -1 "$TMP/c.csv")" = "policy,instances,router,capacity,blocks,prefix_hit_blocks,any_hit_blocks" ] \
  || fail "csv header"
grep -qx 'lru,1,round-robin,3,10,2,3' "$TMP/c.csv" || fail "csv row at capacity 3"
[ "$(wc -l <"$TMP/c.csv")" -eq 6 ] || fail "csv: header + 5 rows"

# --plot: an SVG with one series per curve (no finite --capacity needed).
run "$KVINDEX" replay "$T" --curve --instances 1,2 --plot "$TMP/c.svg"
expect_status 0 "curve plot"
[ "$(grep -c '<polyline' "$TMP/c.svg")" -eq 2 ] || fail "plot: 2 series"
grep -q "lru round-robin x2" "$TMP/c.svg" || fail "plot: series label"

# Usage errors (exit 2), before the trace is read.
run "$KVINDEX" replay "$T" --curve --router cache-aware
expect_status 2 "curve cache-aware"
expect_stderr_contains "does not apply to router cache-aware"
run "$KVINDEX" replay "$T" --curve --router round-robin,cache-aware
expect_status 2 "curve router list with cache-aware"
run "$KVINDEX" replay "$T" --curve --curve-points 0
expect_status 2 "curve points 0"
expect_stderr_contains "--curve-points"
run "$KVINDEX" replay "$T" --curve-points 8
expect_status 2 "curve points without curve"
expect_stderr_contains "--curve-points: needs --curve"
for policy in lfu fifo prefix-lru; do
  run "$KVINDEX" replay "$T" --curve --policy "$policy"
  expect_status 2 "curve policy $policy"
  expect_stderr_contains "only lru"
done
run "$KVINDEX" replay "$T" --curve --cpu-capacity 10
expect_status 2 "curve with a CPU pool"
expect_stderr_contains "--cpu-capacity"
run "$KVINDEX" replay "$T" --curve --disk-capacity 10
expect_status 2 "curve with a disk"
run "$KVINDEX" replay "$T" --curve --capacity 10
expect_status 2 "curve with capacity"
expect_stderr_contains "drop --capacity"
run "$KVINDEX" replay "$T" --curve --window 1
expect_status 2 "curve with window"
run "$KVINDEX" replay "$T" --curve --mode storage-benchmark
expect_status 2 "curve with storage-benchmark"
run "$KVINDEX" replay /nonexistent.jsonl --curve --router cache-aware
expect_status 2 "usage error before the trace is opened"
# A capture is not a request trace.
run "$KVINDEX" replay "$KVINDEX_SOURCE_DIR/tests/fuzz/corpus/capture/one_message.kvcap" --curve
expect_status 2 "curve on a capture"
expect_stderr_contains "apply to request traces"
finish
