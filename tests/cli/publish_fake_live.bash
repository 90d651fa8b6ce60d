# live_exact for the publish-fake CLI tests (sourced after lib.sh, publish_fake_lib.bash and
# live_lib.bash; not a test itself).

# live_exact NAME SOURCE_FORMAT FAKE_FORMAT: publish-fake -> subscribe --record -> replay
# --queries, every emitted answer exact (recording $TMP/NAME.kvcap, queries $TMP/NAME.q).
live_exact() {
  local name=$1 source_format=$2 fake_format=$3 port
  port=$(free_ports 1) || { fail "no free port"; return; }
  "$KVINDEX" subscribe --source "fake-0=$source_format@tcp://127.0.0.1:$port,model=fake-model" \
    --record "$TMP/$name.kvcap" --json "$TMP/$name.json" --stats-interval 0 \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local sub=$!
  PIDS+=("$sub")
  run timeout 30 "$KVINDEX" publish-fake --format "$fake_format" --port "$port" --count 60 \
    --rate 2000 --block-size 4 --prompt-blocks 6 --prefix-blocks 2 --capacity 20 \
    --wait-subscribers 1 --wait-timeout 20 --linger 1 --emit-queries "$TMP/$name.q" \
    --query-every 6
  expect_status 0 "publish-fake --format $fake_format (live)"
  kill -TERM "$sub"
  wait "$sub" || fail "$name: subscribe exit after SIGTERM"
  run "$KVINDEX" replay "$TMP/$name.kvcap" --queries "$TMP/$name.q"
  expect_status 0 "$name: replay --queries"
  expect_stderr_contains " 0 differ"
  [ "$(wc -l <"$TMP/$name.q")" -ge 5 ] || fail "$name: too few emitted queries"
}
