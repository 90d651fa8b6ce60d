#!/usr/bin/env bash
# The global flags and the exit-code convention of docs/cli.md "Exit codes" (0 ok, 2 usage error).
. "$(dirname "$0")/lib.sh"

run "$KVINDEX" --version
expect_status 0 "--version"
expect_stdout_contains "kvindex 0."

run "$KVINDEX" --help
expect_status 0 "--help"
expect_stdout_contains "--log-level"
expect_stdout_contains "--version"

# No subcommand is a usage error: one line saying what, one saying where to look.
run "$KVINDEX"
expect_status 2 "no subcommand"
expect_stderr_contains "kvindex: "
expect_stderr_contains "--help"

run "$KVINDEX" --no-such-flag
expect_status 2 "unknown flag"
expect_stderr_lines 2

run "$KVINDEX" --log-level loud
expect_status 2 "bad log level"
expect_stderr_contains "unknown log level 'loud'"
expect_stderr_lines 2

# Results that cannot reach stdout (a full device) are a runtime error, not a silent exit 0.
for args in "replay $KVINDEX_SOURCE_DIR/traces/sample.jsonl --capacity 100" \
            "replay $KVINDEX_SOURCE_DIR/traces/sample.jsonl --capacity 100 --json -"; do
  # shellcheck disable=SC2086
  "$KVINDEX" $args >/dev/full 2>"$TMP/full.err"
  status=$?
  [ "$status" -eq 1 ] || fail "$args > /dev/full: expected exit 1, got $status"
  grep -q "kvindex replay: stdout: write failed" "$TMP/full.err" || fail "$args > /dev/full: no message"
  [ "$(wc -l <"$TMP/full.err")" -eq 1 ] || fail "$args > /dev/full: expected one stderr line"
done

finish
