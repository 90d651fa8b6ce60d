#!/usr/bin/env bash
# `kvindex replay --curve` is exact on the head of both public Mooncake traces (3,000 requests
# each): at 24 capacities per curve its counts equal a plain `--capacity C` simulation and an
# independent plain-LRU simulator (tests/data/lru_curve_check.py); 1 and 4 instances, round-robin.
# About 15 s.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
CHECK=$KVINDEX_SOURCE_DIR/tests/data/lru_curve_check.py
for t in conversation synthetic; do
  TRACE=$KVINDEX_SOURCE_DIR/traces/mooncake/${t}_trace.jsonl
  for n in 1 4; do
    run "$PY" "$CHECK" "$KVINDEX" "$TRACE" --instances "$n" --max-requests 3000
    expect_status 0 "$t x$n"
    expect_stdout_contains "24 capacities agree (and the reference)"
  done
done
finish
