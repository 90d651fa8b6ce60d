#!/usr/bin/env bash
# `kvindex replay TRACE --reuse` (docs/simulation.md "Reuse"): request classes, block shares and
# nearest-rank reuse-distance percentiles on hand-computed traces; usage errors.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
check_json() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); c={x['class']: x for x in d['reuse']['classes']}; sys.exit(0 if ($2) else 1)" "$1" \
    || fail "JSON check failed: $2"
}

# Bailian (timestamps in seconds). Stack depths at lookup (1 = most recent) and ages:
#   chat 1 [10,11,12] t=0   fresh (nothing seen)
#   chat 2 [10,20]    t=1   shared-prefix (10 seen): 10 depth 3, 1 s
#   chat 3 [10,11,12,13] t=3, parent 1: continuation; stack 20 10 12 11:
#                           10 depth 2 (2 s), 11 depth 4 (3 s), 12 depth 3 (3 s)
#   chat 4 [30]       t=4, parent 99 (not in the trace): fresh
#   chat 5 [10,20,21] t=6, parent 2: continuation; stack 30 13 12 11 10 20:
#                           10 depth 5 (3 s), 20 depth 6 (5 s)
# continuation: 2 requests, 7 blocks, 5 reused; depths 2 3 4 5 6 -> p50 4, p90 6, p99 6;
#   seconds 2 3 3 3 5 -> p50 3, p90 5. shared-prefix: 1, 2 blocks, 1 reused, depth 3, 1 s.
# fresh: 2 requests, 4 blocks, none reused. all: 13 blocks, 6 reused; depths 2 3 3 4 5 6 ->
#   p50 3 (rank 3 of 6), p90 6 (rank 6); seconds 1 2 3 3 3 5 -> p50 3, p90 5.
B=$TMP/b.jsonl
cat >"$B" <<'JSONL'
{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 48, "output_length": 3, "type": "text", "turn": 1, "hash_ids": [10, 11, 12]}
{"chat_id": 2, "parent_chat_id": -1, "timestamp": 1, "input_length": 32, "output_length": 3, "type": "text", "turn": 1, "hash_ids": [10, 20]}
{"chat_id": 3, "parent_chat_id": 1, "timestamp": 3, "input_length": 64, "output_length": 3, "type": "text", "turn": 2, "hash_ids": [10, 11, 12, 13]}
{"chat_id": 4, "parent_chat_id": 99, "timestamp": 4, "input_length": 16, "output_length": 3, "type": "text", "turn": 2, "hash_ids": [30]}
{"chat_id": 5, "parent_chat_id": 2, "timestamp": 6, "input_length": 48, "output_length": 3, "type": "text", "turn": 2, "hash_ids": [10, 20, 21]}
JSONL
run "$KVINDEX" replay "$B" --reuse --json "$TMP/r.json"
expect_status 0 "reuse"
expect_stdout_contains "continuation"
grep -qE '^continuation +2 +7 +53.85% +5 +71.43% +4 +6 +6 +3.000 +5.000 +5.000$' "$stdout_file" \
  || fail "table row continuation"
check_json "$TMP/r.json" "[x['class'] for x in d['reuse']['classes']] == ['continuation', 'shared-prefix', 'fresh', 'all']"
check_json "$TMP/r.json" "(c['continuation']['requests'], c['continuation']['blocks'], c['continuation']['reused_blocks']) == (2, 7, 5)"
check_json "$TMP/r.json" "c['continuation']['distance_blocks'] == {'p50': 4, 'p90': 6, 'p99': 6} and c['continuation']['distance_seconds'] == {'p50': 3.0, 'p90': 5.0, 'p99': 5.0}"
check_json "$TMP/r.json" "(c['shared-prefix']['requests'], c['shared-prefix']['blocks'], c['shared-prefix']['reused_blocks'], c['shared-prefix']['distance_blocks']['p50'], c['shared-prefix']['distance_seconds']['p99']) == (1, 2, 1, 3, 1.0)"
check_json "$TMP/r.json" "(c['fresh']['requests'], c['fresh']['blocks'], c['fresh']['reused_blocks'], c['fresh']['distance_blocks']['p99']) == (2, 4, 0, 0)"
check_json "$TMP/r.json" "(c['all']['blocks'], c['all']['reused_blocks'], c['all']['distance_blocks'], c['all']['distance_seconds']['p50']) == (13, 6, {'p50': 3, 'p90': 6, 'p99': 6}, 3.0)"
check_json "$TMP/r.json" "abs(c['continuation']['block_share'] - 7 / 13) < 1e-12 and abs(c['all']['reused_share'] - 6 / 13) < 1e-12"

# Mooncake (no chat ids; timestamps in ms): the worked example [1,2,3] [1,2,4] [5] [1,2,3] at
# 0..3 ms. [1,2,4] and the last [1,2,3] start with a seen block: shared-prefix, 6 blocks, 5
# reused, depths 3 2 | 4 3 5 -> p50 3, p90 5; ages 1 1 | 2 2 3 ms -> p50 0.002 s.
M=$TMP/m.jsonl
cat >"$M" <<'JSONL'
{"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2, "input_length": 512, "output_length": 1, "hash_ids": [5]}
{"timestamp": 3, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
JSONL
run "$KVINDEX" replay "$M" --reuse --json -
expect_status 0 "reuse mooncake"
cp "$stdout_file" "$TMP/m.json"
check_json "$TMP/m.json" "(c['shared-prefix']['blocks'], c['shared-prefix']['reused_blocks'], c['shared-prefix']['distance_blocks']['p50'], c['shared-prefix']['distance_blocks']['p90']) == (6, 5, 3, 5)"
check_json "$TMP/m.json" "abs(c['shared-prefix']['distance_seconds']['p50'] - 0.002) < 1e-12 and c['continuation']['requests'] == 0 and c['fresh']['requests'] == 2"

# Usage errors (exit 2).
run "$KVINDEX" replay "$M" --reuse --curve
expect_status 2 "reuse with curve"
run "$KVINDEX" replay "$M" --reuse --window 1
expect_status 2 "reuse with window"
run "$KVINDEX" replay "$M" --reuse --csv "$TMP/x.csv"
expect_status 2 "reuse with csv"
expect_stderr_contains "--reuse"
finish
