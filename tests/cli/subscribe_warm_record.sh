#!/usr/bin/env bash
# A subscriber warm-started from a capture continues its sources' positions, so it asks their
# publishers for no backfill (even with a replay endpoint). Its own `--record` capture then holds
# no `backfill` note, and `replay` of it applies every live batch as the subscriber did; a backfill
# started there would hold them for an end that never comes. (The warm capture's batches are in
# the first capture, not in the second; the second publisher starts over, so the subscriber's
# index holds only its batches, as the replay's does.)
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}

pub=$(free_ports 2)
SRC="fake-0=vllm@tcp://127.0.0.1:$pub,model=fake-model,replay=tcp://127.0.0.1:$((pub + 1))"
# subscribe_run NAME SEED [ARGS...]: subscribe --record TMP/NAME.kvcap (and ARGS) while
# publish-fake (SEED) sends 50 batches; stops it once they are applied.
subscribe_run() {
  local name=$1 seed=$2
  shift 2
  "$KVINDEX" subscribe --source "$SRC" --record "$TMP/$name.kvcap" --stats-interval 0 \
    --json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local sub=$!
  PIDS+=("$sub")
  run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
    --count 50 --rate 500 --seed "$seed" --wait-subscribers 1 --wait-timeout 20 --linger 0.5
  expect_status 0 "publish-fake ($name)"
  sleep 0.5
  kill -TERM "$sub"
  wait "$sub" || fail "subscribe ($name) exit"
}
subscribe_run a 1
subscribe_run b 2 --warm-from "$TMP/a.kvcap"
grep -q "warmed from 1 file(s)" "$TMP/b.err" || fail "b was not warm-started"
# The notes of each capture, by text: the first backfilled, the second did not.
notes() {
  "$PY" "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$1" | "$PY" -c 'import json, sys
print(" ".join(bytes.fromhex(r["body"]).decode() for r in map(json.loads, sys.stdin) if r["type"] == 8))'
}
[[ " $(notes "$TMP/a.kvcap") " == *" backfill "* ]] || fail "a.kvcap: no backfill note"
[[ " $(notes "$TMP/b.kvcap") " != *" backfill "* ]] || fail "b.kvcap: a backfill note"
run "$KVINDEX" replay "$TMP/b.kvcap" --json "$TMP/r.json"
expect_status 0 "replay of b.kvcap"
"$PY" - "$TMP/b.json" "$TMP/r.json" <<'PYEOF' || fail "replay of the warm-started capture"
import json, sys
live, replayed = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# Every live batch of the second run is applied, and the index is the subscriber's: the second
# publisher started over (a restart), so what the warm capture stored is gone on both.
assert live["sources"][0]["messages"] == 50, live["sources"][0]
assert replayed["sources"][0]["applied"] == 50, replayed["sources"][0]
assert live["sources"][0]["restarts"] == 1, live["sources"][0]
assert (replayed["blocks"], replayed["presences"]) == \
    (live["index"]["blocks"], live["index"]["presences"]), (replayed, live["index"])
PYEOF
finish
