#!/usr/bin/env bash
# `kvindex replay` error paths: usage errors exit 2 with one line, data errors exit 1 with one
# line naming the input and the position (docs/cli.md "Exit codes").
. "$(dirname "$0")/lib.sh"
T=$TMP/ok.jsonl
echo '{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}' >"$T"

expect_usage() {  # $1 = description, $2 = message fragment; the rest = arguments
  local what=$1 msg=$2
  shift 2
  run "$KVINDEX" replay "$@"
  expect_status 2 "$what"
  expect_stderr_contains "$msg"
  expect_stdout_empty
}

# CLI11 checks the list items: its message line, then where to look.
expect_usage "bad policy" "kvindex: --policy: lruu not in {lru,lfu,fifo,prefix-lru}" "$T" --policy lru,lruu
expect_stderr_lines 2
expect_usage "bad capacity" "kvindex: --capacity: 'abc' is not a positive integer" "$T" --capacity abc
expect_stderr_lines 2
expect_usage "zero capacity" "--capacity: '0' is not a positive integer" "$T" --capacity 0
expect_stderr_lines 2
expect_usage "empty list item" "--capacity: '' is not a positive integer" "$T" --capacity ''
expect_stderr_lines 2
expect_usage "bad router" "kvindex: --router: nearest not in {round-robin," "$T" --router nearest
expect_stderr_lines 2
expect_usage "zero instances" "kvindex: --instances: Value 0 not in range 1 to 1024" "$T" --instances 0
expect_stderr_lines 2
expect_usage "too many instances" "--instances: Value 5000 not in range 1 to 1024" "$T" --instances 5000
expect_stderr_lines 2
# Positive and non-negative numbers: a short message, and nan/inf are not numbers here.
for v in 0 -1 nan inf 1e999 x; do
  expect_usage "--window $v" "kvindex: --window: '$v' is not a positive number" "$T" --window "$v"
  expect_stderr_lines 2
done
# Usage errors are found before the input is opened.
expect_usage "usage before input" "x not in {lru," "$TMP/missing.jsonl" --policy x
# CLI11's own errors: its message, then where to look.
expect_usage "no input" "INPUT is required"
expect_usage "bad --block-tokens" "--block-tokens" "$T" --block-tokens 0
expect_usage "bad --threads" "--threads" "$T" --threads zero
expect_usage "bad --seed" "--seed" "$T" --seed -1x
expect_usage "bad --max-requests" "--max-requests" "$T" --max-requests 0
expect_usage "unknown flag" "--no-such-flag" "$T" --no-such-flag

# Data errors: exit 1, one line.
run "$KVINDEX" replay "$TMP/missing.jsonl"
expect_status 1 "missing file"
expect_stderr_contains "kvindex replay: $TMP/missing.jsonl: cannot open"
expect_stderr_lines 1

printf 'PK\003\004binary' >"$TMP/not_a_trace.bin"
run "$KVINDEX" replay "$TMP/not_a_trace.bin"
expect_status 1 "not a trace"
expect_stderr_contains "not_a_trace.bin: not a request trace (JSON Lines of objects) or a capture file"
expect_stderr_lines 1

: >"$TMP/empty.jsonl"
run "$KVINDEX" replay "$TMP/empty.jsonl"
expect_status 1 "empty file"
expect_stderr_contains "empty.jsonl: empty file"
expect_stderr_lines 1

{ cat "$T"; cat "$T"; echo '{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1, "x"]}'; } >"$TMP/bad.jsonl"
run "$KVINDEX" replay "$TMP/bad.jsonl"
expect_status 1 "bad line"
expect_stderr_contains "kvindex replay: $TMP/bad.jsonl: line 3: column 73: hash_ids: expected a non-negative integer"
expect_stderr_lines 1
expect_stdout_empty

printf '{"timestamp": 0}\n' >"$TMP/allbad.jsonl"
run "$KVINDEX" replay "$TMP/allbad.jsonl" --skip-bad
expect_status 1 "nothing left after skipping"
expect_stderr_contains "allbad.jsonl: no requests"

run "$KVINDEX" replay "$T" --json "$TMP/no/such/dir/out.json"
expect_status 1 "unwritable --json"
expect_stderr_contains "out.json: cannot write"

finish
