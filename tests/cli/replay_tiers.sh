#!/usr/bin/env bash
# `kvindex replay TRACE`: the flags of trace replay part 2 — --cpu-capacity, --disk-capacity,
# --mode storage-benchmark, --window, --csv — on hand-computed cases.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
check_json() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
    || fail "JSON check failed: $2"
}

run "$KVINDEX" replay --help
expect_status 0 "--help"
for flag in --cpu-capacity --disk-capacity --mode --window --csv; do
  expect_stdout_contains "$flag"
done

# The cascade of tests/sim_test.cpp: GPU 1, CPU 1, disk 1; [1] [2] [3] [1] [2,3] at 0..4 s.
# Hand computation there: prefix 3 = gpu 0 + cpu 1 + disk 2; evictions 5, cpu 4, disk 3.
T=$TMP/cascade.jsonl
cat >"$T" <<'JSONL'
{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 1000, "input_length": 512, "output_length": 1, "hash_ids": [2]}
{"timestamp": 2000, "input_length": 512, "output_length": 1, "hash_ids": [3]}
{"timestamp": 3000, "input_length": 512, "output_length": 1, "hash_ids": [1]}
{"timestamp": 4000, "input_length": 1024, "output_length": 1, "hash_ids": [2, 3]}
JSONL
run "$KVINDEX" replay "$T" --capacity 1 --cpu-capacity 1 --disk-capacity 1 --tier-write victim \
  --json "$TMP/c.json"
expect_status 0 "tiers"
expect_stdout_contains "cpu_hits"
[ ! -s "$stderr_file" ] || fail "stderr is not a terminal: no progress bar expected"
check_json "$TMP/c.json" "d['results'][0]['tiers']['cpu']['prefix_hit_blocks'] == 1 and d['results'][0]['tiers']['disk']['prefix_hit_blocks'] == 2"
check_json "$TMP/c.json" "d['results'][0]['prefix_hit_blocks'] == 3 and d['results'][0]['evictions'] == 5 and d['results'][0]['cpu_evictions'] == 4 and d['results'][0]['disk_evictions'] == 3"
check_json "$TMP/c.json" "d['results'][0]['cpu_capacity'] == 1 and d['results'][0]['disk_capacity'] == 1"

# Without tier flags: no shared-tier hits, GPU counts as before.
run "$KVINDEX" replay "$T" --capacity 1 --json -
expect_status 0 "no tiers"
cp "$stdout_file" "$TMP/n.json"
check_json "$TMP/n.json" "d['results'][0]['prefix_hit_blocks'] == 0 and d['results'][0]['tiers']['gpu']['any_hit_blocks'] == 0 and d['results'][0]['cpu_capacity'] == 0"

# 'inf' pool: every evicted block stays reachable; [1] and [2,3] are CPU hits.
run "$KVINDEX" replay "$T" --capacity 1 --cpu-capacity inf --tier-write victim --json -
expect_status 0 "inf pool"
cp "$stdout_file" "$TMP/i.json"
check_json "$TMP/i.json" "d['results'][0]['tiers']['cpu']['prefix_hit_blocks'] == 3 and d['results'][0]['cpu_capacity'] is None"

# Tier lists are grid axes (innermost: CPU, then disk; 'none' = no such tier). By hand: with only
# a 1-block CPU pool, or only a 1-block disk, each GPU victim pushes out the previous one, so [1]
# and [2] are gone when asked for again: prefix 0 (the CPU-only run still has 3 in the pool: any
# 1). Both tiers: the cascade above, prefix 3.
run "$KVINDEX" replay "$T" --capacity 1 --cpu-capacity none,1 --disk-capacity none,1 \
  --tier-write victim --json -
expect_status 0 "tier lists"
cp "$stdout_file" "$TMP/l.json"
check_json "$TMP/l.json" "[(r['cpu_capacity'], r['disk_capacity'], r['prefix_hit_blocks']) for r in d['results']] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 3)]"
check_json "$TMP/l.json" "[r['any_hit_blocks'] for r in d['results']][2] == 1"
run "$KVINDEX" replay "$T" --capacity 1 --cpu-capacity none,1
expect_status 0 "tier list table"
grep -qE '^lru +1 +none +none ' "$stdout_file" || fail "table row without tiers"
grep -qE '^lru +1 +1 +none ' "$stdout_file" || fail "table row with a CPU pool"

# Bad tier capacities are usage errors.
run "$KVINDEX" replay "$T" --cpu-capacity 0
expect_status 2 "cpu 0"
expect_stderr_contains "--cpu-capacity"
run "$KVINDEX" replay "$T" --disk-capacity lots
expect_status 2 "disk text"
expect_stderr_contains "--disk-capacity"
run "$KVINDEX" replay "$T" --cpu-capacity none,0
expect_status 2 "cpu list with 0"
expect_stderr_contains "'0' is not a positive integer"

# --window 2 (seconds): windows [0,2) [2,4) [4,6): blocks 2, 2, 2; prefix hits 0, 1 (disk),
# 2 (cpu 1 + disk 1).
run "$KVINDEX" replay "$T" --capacity 1 --cpu-capacity 1 --disk-capacity 1 --tier-write victim \
  --window 2 --json -
expect_status 0 "window"
cp "$stdout_file" "$TMP/w.json"
check_json "$TMP/w.json" "[w['blocks'] for w in d['results'][0]['windows']] == [2, 2, 2]"
check_json "$TMP/w.json" "[w['prefix_hit_blocks'] for w in d['results'][0]['windows']] == [0, 1, 2]"
check_json "$TMP/w.json" "[w['start_ms'] for w in d['results'][0]['windows']] == [0, 2000, 4000] and d['results'][0]['window_ms'] == 2000"
check_json "$TMP/w.json" "d['results'][0]['windows'][2]['per_instance'][0]['tiers']['disk']['prefix_hit_blocks'] == 1 and d['results'][0]['windows'][2]['tiers']['cpu']['prefix_hit_blocks'] == 1"
run "$KVINDEX" replay "$T" --window 0
expect_status 2 "window 0"

# --csv: one line per configuration; with --window one per window and instance (+ 'all').
run "$KVINDEX" replay "$T" --capacity 1,2 --csv "$TMP/c.csv"
expect_status 0 "csv"
[ "$(wc -l <"$TMP/c.csv")" -eq 3 ] || fail "csv: expected header + 2 rows"
grep -q '^policy,capacity,cpu_capacity,disk_capacity,router,instances,requests,' "$TMP/c.csv" || fail "csv header"
grep -q '^lru,2,none,none,round-robin,1,5,6,' "$TMP/c.csv" || fail "csv row"
run "$KVINDEX" replay "$T" --instances 2 --window 2 --csv -
expect_status 0 "csv windows"
[ "$(grep -c '^lru,inf,none,none,round-robin,2,' "$stdout_file")" -eq 9 ] || fail "csv windows: expected 3 windows x (all + 2 instances)"
expect_stdout_contains "window_start_ms,instance,"

# --mode storage-benchmark: [1,2] [2,3,3] [9,1] -> reads 3, writes 4 (hand count in sim_test).
S=$TMP/sb.jsonl
cat >"$S" <<'JSONL'
{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [2, 3, 3]}
{"timestamp": 2, "input_length": 1024, "output_length": 1, "hash_ids": [9, 1]}
JSONL
run "$KVINDEX" replay "$S" --mode storage-benchmark --json -
expect_status 0 "storage-benchmark"
cp "$stdout_file" "$TMP/sb.json"
check_json "$TMP/sb.json" "[(r['requests'], r['total_blocks'], r['read_blocks'], r['write_blocks'], r['prefix_hits']) for r in d['results']] == [(3, 7, 3, 4, 3)]"
check_json "$TMP/sb.json" "abs(d['results'][0]['hit_rate'] - 3/7) < 1e-12"
run "$KVINDEX" replay "$S" --mode storage-benchmark
expect_status 0 "storage-benchmark table"
expect_stdout_contains "42.86%"
run "$KVINDEX" replay "$S" --mode storage-benchmark --csv -
expect_status 0 "storage-benchmark csv"
expect_stdout_contains "3,7,3,4,3,0.428571"
run "$KVINDEX" replay "$S" --mode nope
expect_status 2 "bad mode"
expect_stderr_contains "--mode"

# The public traces' reference numbers through the CLI (docs/simulation.md
# "Storage-benchmark mode").
[ "$failures" -eq 0 ] || finish
run "$KVINDEX" replay "$KVINDEX_SOURCE_DIR/traces/mooncake/conversation_trace.jsonl" --mode storage-benchmark --json -
expect_status 0 "conversation"
cp "$stdout_file" "$TMP/conv.json"
check_json "$TMP/conv.json" "[(r['requests'], r['total_blocks'], r['read_blocks'], r['write_blocks']) for r in d['results']] == [(12031, 288500, 105710, 182790)]"
finish
