#!/usr/bin/env bash
# The journal flags: usage errors (exit 2, one line), an unreachable or missing journal (exit 1
# for an export; a replica or an ingester keeps running and says so), and a journal on a server
# list. Uses a real nats-server.
. "$(dirname "$0")/journal_lib.bash"

base=$(free_ports 4)
nats=$base closed=$((base + 1)) pub=$((base + 2))
SRC="a=vllm@tcp://127.0.0.1:$pub,model=m"

run "$KVINDEX" subscribe --help
for flag in --journal --journal-stream --journal-buffer --journal-batch --journal-replicas --from-journal \
  --journal-max-age --journal-max-bytes --snapshot-to-journal; do expect_stdout_contains "$flag"; done
run "$KVINDEX" record --help
for flag in --journal-stream --from-journal; do expect_stdout_contains "$flag"; done

usage() {  # usage WHAT ARGS...: exit 2 with one error line naming WHAT
  local what=$1
  shift
  run "$KVINDEX" "$@"
  expect_status 2 "$*"
  expect_stderr_contains "$what"
  [ "$(grep -vc "^Run 'kvindex .*--help' for usage\.$" "$stderr_file")" -eq 1 ] || fail "$*: not one error line"
}
usage --journal subscribe --source "$SRC" --journal tcp://127.0.0.1:1 --duration 0.1
usage --journal subscribe --source "$SRC" --journal 127.0.0.1:4222 --duration 0.1
usage --journal subscribe --source "$SRC" --journal nats://127.0.0.1:4222/x --duration 0.1
usage --journal subscribe --source "$SRC" --journal nats://127.0.0.1:4222, --duration 0.1
usage --journal-stream subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-stream a.b --duration 0.1
usage --journal-stream subscribe --source "$SRC" --journal-stream s --duration 0.1
usage --journal-buffer subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-buffer 0
usage --journal-replicas subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-replicas 7
usage --journal-batch subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-batch 0
usage --journal-batch subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-batch 1025
usage "need --journal" subscribe --source "$SRC" --journal-batch 4 --duration 0.1
usage "belong to the ingester" subscribe --from-journal nats://127.0.0.1:4222 --journal-batch 4
usage --from-journal subscribe --from-journal nats://127.0.0.1:4222 --source "$SRC"
usage --journal-max-age subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-max-age 0
usage --journal-max-age subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-max-age nan
usage --journal-max-bytes subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --journal-max-bytes 0
usage --snapshot-to-journal subscribe --source "$SRC" --journal nats://127.0.0.1:4222 --snapshot-to-journal 0
usage "need --journal" subscribe --source "$SRC" --snapshot-to-journal 5 --duration 0.1
usage "need --journal" subscribe --source "$SRC" --journal-max-bytes 100000 --duration 0.1
usage "belong to the ingester" subscribe --from-journal nats://127.0.0.1:4222 --snapshot-to-journal 5
usage --from-journal subscribe --from-journal nats://127.0.0.1:4222 --record "$TMP/x.kvcap"
usage --from-journal record --from-journal nats://127.0.0.1:4222 --source "$SRC" --out "$TMP/x.kvcap"
usage --journal-stream record --source "$SRC" --out "$TMP/x.kvcap" --journal-stream s --duration 0.1

# No server: an export fails (exit 1, one line); a replica waits and says so; an ingester indexes
# on, its journal down.
run timeout 20 "$KVINDEX" record --from-journal "nats://127.0.0.1:$closed" --out "$TMP/x.kvcap"
expect_status 1 "record --from-journal, no server"
expect_stderr_lines 1
[ ! -e "$TMP/x.kvcap" ] || fail "a capture was created without a journal"
run timeout 20 "$KVINDEX" subscribe --from-journal "nats://127.0.0.1:$closed" --duration 1 --stats-interval 0
expect_status 0 "replica without a server"
expect_stderr_contains "waiting for the journal"
run timeout 20 "$KVINDEX" subscribe --source "$SRC" --journal "nats://127.0.0.1:$closed" --duration 1 \
  --stats-interval 0.3
expect_status 0 "ingester without a server"
expect_stderr_contains "journal DOWN"

# A server, no stream yet: an export names the missing stream.
start_nats "$nats"
run timeout 20 "$KVINDEX" record --from-journal "nats://127.0.0.1:$nats" --journal-stream nothing --out "$TMP/y.kvcap"
expect_status 1 "record --from-journal, no stream"
expect_stderr_contains "nothing"
# A server list whose first server is down: the journal is made on the second.
"$KVINDEX" subscribe --source "$SRC" --journal "nats://127.0.0.1:$closed,127.0.0.1:$nats" \
  --journal-stream listed --stats-interval 0 --json "$TMP/i.json" >"$TMP/i.out" 2>"$TMP/i.err" &
ing=$!
PIDS+=("$ing")
run timeout 20 "$KVINDEX" publish-fake --format vllm --model m --port "$pub" --count 20 --rate 1000 \
  --wait-subscribers 1 --wait-timeout 15 --linger 0.5
expect_status 0 "publish-fake"
sleep 0.5
kill -TERM "$ing"
wait "$ing" || fail "ingester on a server list"
run "$KVINDEX" record --from-journal "nats://127.0.0.1:$nats" --journal-stream listed --out "$TMP/l.kvcap" \
  --json "$TMP/l.json"
expect_status 0 "export of the listed journal"
# 1 definition + 20 batches.
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; assert j["records"] == 21, j' "$TMP/l.json" \
  || fail "listed journal content"
finish
