#!/usr/bin/env bash
# publish-fake (faults: drops, duplicates, corrupt copies) -> subscribe --record: every dropped or
# corrupt batch is recovered from the replay ring, duplicates are ignored, nothing is lost.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
port=$(free_ports 2)
"$KVINDEX" subscribe --source "fake-0=vllm@tcp://127.0.0.1:$port,model=fake-model,replay=tcp://127.0.0.1:$((port + 1))" \
  --record "$TMP/f.kvcap" --json "$TMP/f.json" --stats-interval 0 >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub=$!
PIDS+=("$sub")
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$port" --replay-port "$((port + 1))" \
  --count 200 --rate 2000 --drop-every 10 --duplicate-every 7 --corrupt-every 13 \
  --wait-subscribers 1 --wait-timeout 20 --linger 2 --emit-queries "$TMP/q.jsonl" --query-every 25
expect_status 0 "publish-fake"
kill -TERM "$sub"
wait "$sub"
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"
"$PY" -c '
import json,re,sys
t=json.load(open(sys.argv[1]))["total"]
d,u,c=map(int,re.search(r"(\d+) dropped, (\d+) duplicated, (\d+) corrupted",open(sys.argv[2]).read()).groups())
assert t["applied"]==200 and t["lost"]==0, t
# Each drop and corrupt copy is replayed; a slow start can add a batch recovered by the replay of
# an earlier hole before its live copy arrived (timing, not loss), so "at least".
assert t["recovered"]>=d+c and t["malformed"]==c, (t, d, c)
assert t["duplicates"]>=u, (t, u)
' "$TMP/f.json" "$stderr_file" || fail "recovery counters"
# The recording, replayed offline, answers every query the fake emitted exactly as its own model
# says (publish-fake -> record -> replay --queries; docs/cli.md "Expected answers"), at every
# `after` position.
run "$KVINDEX" replay "$TMP/f.kvcap" --queries "$TMP/q.jsonl"
expect_status 0 "replay --queries of the recording"
expect_stderr_contains " 0 differ"
[ "$(wc -l <"$TMP/q.jsonl")" -ge 5 ] || fail "too few emitted queries"
finish
