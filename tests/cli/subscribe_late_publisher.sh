#!/usr/bin/env bash
# A publisher that binds long after `subscribe` started is reached at once: ZeroMQ retries every
# 100 ms with no growing backoff (docs/cli.md "subscribe"). The subscriber waits 7 s with nothing
# bound, then publish-fake binds and waits up to 3 s for its subscription. With a backoff growing
# to 5 s the subscriber's next attempt would come 6.3 s and 11.3 s after its start, after that
# wait ends, and publish-fake would exit 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

port=$(free_ports 1) || fail "no free port"
"$KVINDEX" subscribe --source "fake-0=vllm@tcp://127.0.0.1:$port,model=fake-model" \
  --duration 20 --stats-interval 0 >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub_pid=$!
sleep 7
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$port" --count 20 \
  --wait-subscribers 1 --wait-timeout 3 --linger 1
expect_status 0 "publish-fake reached by the subscriber that started 7 s earlier"
kill -TERM "$sub_pid" 2>/dev/null
wait "$sub_pid"
[ $? -eq 0 ] || fail "subscribe after SIGTERM should exit 0"

finish
