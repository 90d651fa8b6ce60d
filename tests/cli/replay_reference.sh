#!/usr/bin/env bash
# Differential test: every count of `kvindex replay --json` equals the independent, naive Python
# simulator tests/data/sim_reference.py, on seeded random traces (both formats, every policy and
# router) and on the head of both public traces (tests/data/sim_compare.py). About 20 s.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
DATA=$KVINDEX_SOURCE_DIR/tests/data

run "$PY" "$DATA/sim_compare.py" "$KVINDEX" "$TMP" "$KVINDEX_SOURCE_DIR/traces/mooncake"
expect_status 0 "random and public traces agree with the reference"
expect_stdout_contains "agree with the reference simulator"
finish
