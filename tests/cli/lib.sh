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

# free_ports N: the first of N consecutive free TCP ports. Each CLI test owns a block of ports of
# its own (KVINDEX_TEST_PORT_BASE, KVINDEX_TEST_PORT_SPAN: set per test by tests/CMakeLists.txt),
# so tests running side by side never race for a port; a test run by hand takes a random block.
# All blocks lie below the kernel's ephemeral range (32768+), where outgoing connections never
# take a port. Successive calls move on through the block (a cursor in $TMP), and every candidate
# is checked by binding it on all addresses, as the servers under test do.
free_ports() {
  "${KVINDEX_PYTHON:-/usr/bin/python3}" - "$1" "$TMP/.port_cursor" <<'PYEOF'
import os, random, socket, sys
n, cursor_file = int(sys.argv[1]), sys.argv[2]
span = int(os.environ.get("KVINDEX_TEST_PORT_SPAN", "160"))
base = int(os.environ.get("KVINDEX_TEST_PORT_BASE", "0")) or random.randrange(20000, 32000 - span)
try:
    cursor = int(open(cursor_file).read())
except (OSError, ValueError):
    cursor = 0
def free(p):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
for step in range(span):
    first = (cursor + step) % span
    if first + n > span:
        continue
    if all(free(base + first + i) for i in range(n)):
        open(cursor_file, "w").write(str((first + n) % span))
        print(base + first)
        sys.exit(0)
sys.exit("free_ports: no %d consecutive free ports in %d..%d" % (n, base, base + span - 1))
PYEOF
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}
