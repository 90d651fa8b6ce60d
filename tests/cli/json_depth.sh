#!/usr/bin/env bash
# Every JSON input refuses a text nested deeper than 64 levels with one line naming the file, the
# line and the byte (docs/cli.md "Conventions"), instead of exhausting the stack: replay --queries,
# subscribe --config and publish-fake --batches.
. "$(dirname "$0")/lib.sh"

deep() {  # deep N PREFIX SUFFIX: PREFIX, N '[' then N ']', SUFFIX
  /usr/bin/python3 -c 'import sys; n = int(sys.argv[1]); print(sys.argv[2] + "[" * n + "]" * n + sys.argv[3])' "$@"
}

run "$KVINDEX" publish-fake --format vllm --count 3 --out "$TMP/c.kvcap"
expect_status 0 "a capture to query"

deep 100000 '{"id": "a", "query": {"model": "m", "token_ids": [1]}, "expect": ' '}' >"$TMP/q.jsonl"
run "$KVINDEX" replay "$TMP/c.kvcap" --queries "$TMP/q.jsonl"
expect_status 2 "deep --queries line"
expect_stderr_contains "q.jsonl: line 1: byte 128: nested deeper than 64 levels"
expect_stderr_lines 1

# 63 levels inside the top-level object are still read (the line then fails for its own reason).
deep 63 '{"id": "a", "query": {"model": "m", "token_ids": [1]}, "expect": ' '}' >"$TMP/q63.jsonl"
run "$KVINDEX" replay "$TMP/c.kvcap" --queries "$TMP/q63.jsonl"
if grep -q "nested deeper" "$stderr_file"; then fail "63 levels refused"; fi

deep 100000 '{"kvevent_instance": ' '}' >"$TMP/config.json"
run "$KVINDEX" subscribe --config "$TMP/config.json"
expect_status 1 "deep --config"
expect_stderr_contains "config.json: byte 84: nested deeper than 64 levels"

deep 100000 '{"events": ' '}' >"$TMP/b.jsonl"
run "$KVINDEX" publish-fake --batches "$TMP/b.jsonl" --out "$TMP/b.kvcap"
expect_status 1 "deep --batches line"
expect_stderr_contains "b.jsonl: line 1: byte 74: nested deeper than 64 levels"

finish
