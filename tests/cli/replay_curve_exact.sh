#!/usr/bin/env bash
# `kvindex replay --curve` is exact on the bundled sample: at 24 capacities per curve its counts
# equal a plain `--capacity C` simulation, and with round-robin an independent plain-LRU
# simulator (tests/data/lru_curve_check.py); 1 and 4 instances, and every router the curve
# applies to. About 10 s.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
CHECK=$KVINDEX_SOURCE_DIR/tests/data/lru_curve_check.py
SAMPLE=$KVINDEX_SOURCE_DIR/traces/sample.jsonl

for n in 1 4; do
  run "$PY" "$CHECK" "$KVINDEX" "$SAMPLE" --instances "$n"
  expect_status 0 "sample x$n round-robin"
  expect_stdout_contains "(and the reference)"
done
for router in random least-loaded session; do
  run "$PY" "$CHECK" "$KVINDEX" "$SAMPLE" --instances 4 --router "$router"
  expect_status 0 "sample x4 $router"
done
# A random Qwen-Bailian trace (tests/data/sim_compare.py's generator), where session routing
# follows chat ids: 3 instances, session and round-robin (the latter also against the reference).
"$PY" -c "import random, sys; sys.path.insert(0, sys.argv[1]); import sim_compare; sim_compare.random_bailian(random.Random(5), sys.argv[2], 600)" \
  "$KVINDEX_SOURCE_DIR/tests/data" "$TMP/bailian.jsonl" || fail "generator"
for router in session round-robin; do
  run "$PY" "$CHECK" "$KVINDEX" "$TMP/bailian.jsonl" --instances 3 --router "$router"
  expect_status 0 "bailian x3 $router"
done
finish
