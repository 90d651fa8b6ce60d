#!/usr/bin/env bash
# The bundled sample: traces/generate.py reproduces traces/sample.jsonl byte for byte, and the
# demo's sweep (scripts/demo.sh) runs on it.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
SAMPLE=$KVINDEX_SOURCE_DIR/traces/sample.jsonl

"$PY" "$KVINDEX_SOURCE_DIR/traces/generate.py" >"$TMP/sample.jsonl" || fail "generator failed"
cmp -s "$TMP/sample.jsonl" "$SAMPLE" || fail "traces/generate.py no longer reproduces traces/sample.jsonl"
[ "$(wc -c <"$SAMPLE")" -lt 1000000 ] || fail "the sample must stay under 1 MB"

run "$KVINDEX" replay "$SAMPLE" --instances 4 --policy lru,lfu,prefix-lru --capacity 200,1000,inf \
  --router round-robin,cache-aware --json "$TMP/demo.json"
expect_status 0 "demo sweep"
expect_stdout_contains "mooncake format, 3,000 requests, 49,238 blocks (9,972 distinct), 512 tokens per block"
[ "$(wc -l <"$stdout_file")" -eq 20 ] || fail "expected 18 rows plus 2 header lines"
"$PY" -c "
import json, sys
d = json.load(open(sys.argv[1]))['results']
assert len(d) == 18
# An unbounded cache hits the same under every policy; cache-aware beats round-robin there.
inf = {(r['policy'], r['router']): r['prefix_hit_blocks'] for r in d if r['capacity'] is None}
assert len(set(v for (p, rt), v in inf.items() if rt == 'round-robin')) == 1
assert inf[('lru', 'cache-aware')] > inf[('lru', 'round-robin')]
# With a fixed routing (round-robin), more capacity never lowers lru's hits: lru is a stack
# algorithm, a smaller cache's contents are always a subset of a larger one's.
hits = [r['prefix_hit_blocks'] for r in d if r['policy'] == 'lru' and r['router'] == 'round-robin']
assert hits == sorted(hits), hits
" "$TMP/demo.json" || fail "demo sweep results are implausible"
finish
