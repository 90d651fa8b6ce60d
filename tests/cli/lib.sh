# Helpers for tests/cli/*.sh. Each test sources this file; $KVINDEX is the binary under test.
# A test runs commands with `run`, then asserts on $status, $stdout_file and $stderr_file.
set -u
: "${KVINDEX:?KVINDEX must name the kvindex binary}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
stdout_file=$TMP/stdout
stderr_file=$TMP/stderr
status=0

run() {
  "$@" >"$stdout_file" 2>"$stderr_file"
  status=$?
}

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout:" >&2; head -c 2000 "$stdout_file" >&2
  echo "--- stderr:" >&2; head -c 2000 "$stderr_file" >&2
  failures=$((failures + 1))
}

expect_status() { [ "$status" -eq "$1" ] || fail "expected exit $1, got $status (${2:-})"; }
expect_stdout_contains() { grep -qF -- "$1" "$stdout_file" || fail "stdout lacks '$1'"; }
expect_stderr_contains() { grep -qF -- "$1" "$stderr_file" || fail "stderr lacks '$1'"; }
expect_stdout_empty() { [ ! -s "$stdout_file" ] || fail "stdout should be empty"; }
expect_stderr_lines() {
  local n
  n=$(wc -l <"$stderr_file")
  [ "$n" -eq "$1" ] || fail "expected $1 stderr line(s), got $n"
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}
