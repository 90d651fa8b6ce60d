#!/usr/bin/env bash
# `replay CAPTURE` (summary, --dump, --queries, --json, --max-blocks) and `query --capture` on the
# design document's example, built as a capture by an independent Python writer
# (tests/data/design_capture.py) with hand-computed expectations.
. "$(dirname "$0")/lib.sh"
data=$KVINDEX_SOURCE_DIR/tests/data
py=${KVINDEX_PYTHON:-/usr/bin/python3}
"$py" "$data/design_capture.py" "$TMP/d.kvcap" "$TMP/q.jsonl" "$TMP/dump.jsonl" || { echo "generator failed"; exit 1; }

# Summary: per instance and tier, then per source.
run "$KVINDEX" replay "$TMP/d.kvcap"
expect_status 0 "summary"
expect_stdout_contains "vllm-0/dp1"
expect_stdout_contains "resident"
grep -qE '^store +DISK +2 +0 +2' "$stdout_file" || fail "store DISK row"

# --dump: every applied event, exactly as the independent writer expects.
run "$KVINDEX" replay "$TMP/d.kvcap" --dump
expect_status 0 "--dump"
cp "$stdout_file" "$TMP/got.jsonl"
"$py" - "$TMP/got.jsonl" "$TMP/dump.jsonl" <<'PY' || fail "--dump differs from the expected lines"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [json.loads(l) for l in open(sys.argv[2])]
for i, (g, w) in enumerate(zip(got, want)):
    if g != w:
        print("line", i + 1, "got", g, "want", w, file=sys.stderr)
sys.exit(0 if got == want else 1)
PY

# --queries with expect: the design-doc answer (and a position inside the capture).
run "$KVINDEX" replay "$TMP/d.kvcap" --queries "$TMP/q.jsonl" --json "$TMP/summary.json"
expect_status 0 "--queries"
expect_stdout_contains '"id":"design-doc"'
expect_stderr_contains "4 queries, 3 checked, 0 differ"
"$py" -c "
import json, sys
s = json.load(open('$TMP/summary.json'))
assert s['queries']['mismatches'] == 0 and s['queries']['answered'] == 4, s['queries']
assert {r['source'] for r in s['sources']} == {'vllm-0/dp0', 'vllm-0/dp1', 'store'}
" || fail "--json summary"

# A wrong expectation: exit 1, the difference listed on stderr.
sed 's/"DISK": 4/"DISK": 6/' "$TMP/q.jsonl" >"$TMP/wrong.jsonl"
run "$KVINDEX" replay "$TMP/d.kvcap" --queries "$TMP/wrong.jsonl"
expect_status 1 "wrong expect"
expect_stderr_contains 'instance vllm-0: expected'
expect_stderr_contains "1 queries differ"

# --max-blocks 1 keeps one block. By hand, least recently touched first: dp0 stores H1,H2 (evict
# H1), dp1 stores H1 (evict H2), the store's H1,H2 (evict H1), its H1 (evict H2); H3's parent H2 is
# gone, so H3 is an orphan: 4 evictions, 1 orphan, 1 block left.
run "$KVINDEX" replay "$TMP/d.kvcap" --max-blocks 1 --json -
expect_status 0 "--max-blocks"
"$py" -c "
import json
s = json.load(open('$stdout_file'))
assert (s['evictions'], s['orphans'], s['blocks']) == (4, 1, 1), (s['evictions'], s['orphans'], s['blocks'])
" || fail "--max-blocks counts"

# query --capture: table and --json.
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m --tokens 101,15,100,55,89,63
expect_status 0 "query table"
# The capture lost nothing: every instance is exact (docs/http-api.md "Trust states").
grep -qE '^vllm-0 +2 +6 +4 +4 +4 +- +0:4 1:2 +exact$' "$stdout_file" || fail "query table row"
printf '[101, 15, 100, 55]' >"$TMP/tokens.json"
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m --tokens-file "$TMP/tokens.json" --instance vllm-0 --json -
expect_status 0 "query --json"
"$py" -c "
import json, sys
d = json.load(open('$stdout_file'))
assert d == {'data': {'default': {'vllm-0': {'longest_matched': 4, 'GPU': 4, 'CPU': 4, 'DISK': 2, 'DP': {'0': 4, '1': 2},
                                             'state': 'exact'}}}}, d
" || fail "query --json answer"
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m --hashes 11,12
expect_status 0 "query --hashes"
grep -qE '^vllm-0 +2 +4 ' "$stdout_file" || fail "engine-hash query"
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model other --tokens 1,2
expect_status 0 "unknown model"
expect_stdout_contains "no instance holds model 'other'"

# Errors: one line, exit 1 for data, 2 for usage.
run "$KVINDEX" replay "$TMP/missing.kvcap"
expect_status 1 "missing capture"
expect_stderr_lines 1
head -c 100 "$TMP/d.kvcap" >"$TMP/torn.kvcap"
run "$KVINDEX" replay "$TMP/torn.kvcap" --dump
expect_status 0 "torn capture"
expect_stderr_contains "byte "
printf '{"id": 1}\n' >"$TMP/badq.jsonl"
run "$KVINDEX" replay "$TMP/d.kvcap" --queries "$TMP/badq.jsonl"
expect_status 2 "bad queries line"
expect_stderr_contains "badq.jsonl: line 1"
run "$KVINDEX" replay "$KVINDEX_SOURCE_DIR/traces/sample.jsonl" --dump
expect_status 2 "--dump on a trace"
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m
expect_status 2 "no tokens"
expect_stderr_contains "exactly one of"
run "$KVINDEX" query --capture "$TMP/d.kvcap" --model m --tokens 1,x
expect_status 2 "bad token"
run "$KVINDEX" query --model m --tokens 1
expect_status 2 "no capture"
finish
