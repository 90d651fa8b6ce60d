#!/usr/bin/env bash
# publish-fake pacing and delivery flags: --blast, --rate, --hwm, --wait-subscribers /
# --wait-timeout (a missing subscriber is a runtime error, never a hang), --json -.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

# --blast: everything pre-encoded and sent at once; a connected subscriber still gets every batch.
port=$(free_ports 1) || fail "no free port"
$SUB sub --endpoint tcp://127.0.0.1:$port --count 2000 --timeout 20 --idle 5 --no-decode >"$TMP/blast.sub" &
sub_pid=$!
run timeout 30 "$KVINDEX" publish-fake --blast --count 2000 --events-per-batch 5 --port "$port" \
  --wait-subscribers 1 --wait-timeout 15 --json "$TMP/blast.json"
expect_status 0 "--blast"
wait $sub_pid
"$PY" -c "
import json
m = json.load(open('$TMP/blast.sub'))['messages']
assert [x['seq'] for x in m] == list(range(2000)), len(m)
s = json.load(open('$TMP/blast.json'))
assert s['batches_per_second'] > 0 and s['blocks_per_second'] > 0" || fail "--blast delivery"

# --rate and --hwm: paced publishing still delivers every batch in order.
port=$(free_ports 1)
$SUB sub --endpoint tcp://127.0.0.1:$port --count 5 --timeout 20 --idle 5 >"$TMP/rate.sub" &
sub_pid=$!
run timeout 30 "$KVINDEX" publish-fake --rate 200 --hwm 1000 --count 5 --port "$port" \
  --wait-subscribers 1 --wait-timeout 15 --json -
expect_status 0 "--rate"
expect_stdout_contains '"live_messages": 5'
wait $sub_pid
"$PY" -c "
import json
m = json.load(open('$TMP/rate.sub'))['messages']
assert [x['seq'] for x in m] == [0, 1, 2, 3, 4], m" || fail "--rate delivery"

# Nobody subscribes: --wait-timeout expires, exit 1 with one line saying so.
port=$(free_ports 1)
run timeout 30 "$KVINDEX" publish-fake --count 5 --port "$port" --wait-subscribers 1 --wait-timeout 0.3
expect_status 1 "--wait-timeout"
expect_stderr_contains "--wait-subscribers"
expect_stderr_contains "0 of 1 subscriber"

# Pacing numbers are checked before anything is bound: short messages, nan and inf refused.
for args in "--speed 0" "--speed nan" "--rate -1" "--rate inf" "--zipf -1" "--zipf nan"; do
  flag=${args%% *} value=${args#* }
  run timeout 10 "$KVINDEX" publish-fake --count 1 --port "$(free_ports 1)" "$flag" "$value"
  expect_status 2 "$args"
  expect_stderr_contains "kvindex: $flag: '$value' is not a"
  expect_stderr_lines 2
done

finish
