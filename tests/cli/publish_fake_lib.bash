# Helpers for the publish-fake CLI tests (sourced after lib.sh; not a test itself).
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
SUB="$PY ${KVINDEX_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/fake_subscriber.py"

# Tests here run most commands in the background, not through `run`: give fail() its files.
: >"$stdout_file"
: >"$stderr_file"
