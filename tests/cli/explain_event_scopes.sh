#!/usr/bin/env bash
# `query --explain` when the salt or LoRA lives only in the events (a per-request cache_salt, a
# LoRA adapter no source configures): the reason is `salt` / `lora` and the detail names the value
# to use, offline (query --capture) and live (query --server over subscribe --http). Independent
# check: asking again with the named value matches the whole prompt (hand-computed: 2 blocks of 4
# tokens = 8 tokens on GPU).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_lib.bash"

# Two one-batch sources: tokens 1..8 in blocks of 4, salted with "r1" / under LoRA "adapter-b".
echo '{"ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": [11, 12], "token_ids": [1,2,3,4,5,6,7,8], "block_size": 4, "medium": "GPU", "cache_salt": "r1"}]}' >"$TMP/salted.jsonl"
echo '{"ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": [21, 22], "token_ids": [1,2,3,4,5,6,7,8], "block_size": 4, "medium": "GPU", "lora_name": "adapter-b"}]}' >"$TMP/lora.jsonl"
prompt=1,2,3,4,5,6,7,8
want8='"longest_matched": 8'

# explain_case WHERE REASON VALUE_TEXT FIX_FLAG FIX_VALUE -- QUERY_ARGS...: the explanation of the
# plain prompt names REASON and VALUE_TEXT; the query with FIX_FLAG FIX_VALUE then matches 8 tokens.
explain_case() {
  local where=$1 reason=$2 text=$3 flag=$4 value=$5
  shift 6
  run "$KVINDEX" query "$@" --model m --tokens "$prompt" --explain
  expect_status 0 "$where: --explain"
  grep -q "matched nothing: $reason: " "$stdout_file" || fail "$where: no '$reason' reason"
  expect_stdout_contains "$text"
  run "$KVINDEX" query "$@" --model m --tokens "$prompt" "$flag" "$value" --json "$TMP/fix.json"
  expect_status 0 "$where: query with $flag $value"
  "$PY" -c '
import json, sys
data = json.load(open(sys.argv[1]))["data"]["default"]
assert [v["longest_matched"] for v in data.values()] == [8] and [v["GPU"] for v in data.values()] == [8], data
' "$TMP/fix.json" || fail "$where: $flag $value does not match the 8 tokens"
}

# Offline: one capture per source (publish-fake --out).
run "$KVINDEX" publish-fake --format vllm --batches "$TMP/salted.jsonl" --model m --block-size 4 \
  --out "$TMP/salted.kvcap"
expect_status 0 "publish-fake --out salted"
run "$KVINDEX" publish-fake --format vllm --batches "$TMP/lora.jsonl" --model m --block-size 4 \
  --out "$TMP/lora.kvcap"
expect_status 0 "publish-fake --out lora"
explain_case capture-salt salt "with cache_salt 'r1' (stored events carry it)" --salt r1 -- \
  --capture "$TMP/salted.kvcap"
explain_case capture-lora lora "with LoRA 'adapter-b' (stored events carry it)" --lora-name adapter-b -- \
  --capture "$TMP/lora.kvcap"

# Live: both sources into one subscribe --http.
base=$(free_ports 3)
http=$((base + 2))
"$KVINDEX" subscribe --source "salted=vllm@tcp://127.0.0.1:$base,model=m,block-size=4" \
  --source "adapted=vllm@tcp://127.0.0.1:$((base + 1)),model=m,block-size=4" \
  --http "127.0.0.1:$http" --stats-interval 0 >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub=$!
PIDS+=("$sub")
k=0
for f in salted lora; do
  timeout 30 "$KVINDEX" publish-fake --format vllm --batches "$TMP/$f.jsonl" --model m \
    --port $((base + k)) --wait-subscribers 1 --wait-timeout 20 >"$TMP/pub-$f.out" 2>&1 \
    || fail "publish-fake $f: $(cat "$TMP/pub-$f.out")"
  k=$((k + 1))
done
URL="http://127.0.0.1:$http"
# Wait until both sources' blocks are in (2 + 2 resident presences).
"$PY" - "$http" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "the live index never held the 4 blocks"
import sys
sys.path.insert(0, sys.argv[2])
from http_client import Server, wait_for
server = Server(sys.argv[1])
wait_for(lambda: all('kvindex_resident_blocks{instance="%s",tier="GPU"} 2' % i in server.call("/metrics")[1]
                     for i in ("salted", "adapted")), "the 4 blocks")
PYEOF
explain_case live-salt salt "salted matched nothing: salt: the query's cache_salt differs; with cache_salt 'r1' (stored events carry it)" \
  --salt r1 -- --server "$URL" --instance salted
explain_case live-lora lora "adapted matched nothing: lora: the query's LoRA differs; with LoRA 'adapter-b' (stored events carry it)" \
  --lora-name adapter-b -- --server "$URL" --instance adapted
kill -TERM "$sub"
wait "$sub"
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"
finish
