#!/usr/bin/env bash
# The two golden captures of real publisher bytes (vLLM v0.9.0 and an early SGLang,
# tests/data/golden/): publishing their logical content with `--batches` must give the
# same payload bytes, topic and sequence frames, and the replay ROUTER must answer the golden
# replay requests (ranged, past the end) with the golden reply frames.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

for pair in "vllm_v0_9_0:vllm-v0.9" "sglang_006d053f:sglang"; do
  golden=$KVINDEX_SOURCE_DIR/tests/data/golden/${pair%%:*}.json
  format=${pair##*:}
  "$PY" -c "
import json, sys
for f in json.load(open('$golden'))['frames']:
    print(json.dumps(f['logical']))" >"$TMP/$format.jsonl"
  base=$(free_ports 2) || { fail "no free ports"; continue; }
  $SUB sub --endpoint tcp://127.0.0.1:$base --count 14 --timeout 20 --idle 5 --hex >"$TMP/$format.sub" &
  sub_pid=$!
  timeout 40 "$KVINDEX" publish-fake --format "$format" --batches "$TMP/$format.jsonl" --topic kv-events \
    --port "$base" --replay-port $((base + 1)) --rate 0 --wait-subscribers 1 --wait-timeout 15 \
    --linger 4 --json "$TMP/$format.json" 2>"$TMP/$format.err" &
  pub_pid=$!
  wait $sub_pid
  $SUB replay --endpoint tcp://127.0.0.1:$((base + 1)) --start 11 --idle 3 >"$TMP/$format.ranged"
  $SUB replay --endpoint tcp://127.0.0.1:$((base + 1)) --start 114 --idle 3 >"$TMP/$format.past"
  wait $pub_pid || fail "$format: publish-fake failed: $(cat "$TMP/$format.err")"
  "$PY" - "$golden" "$TMP/$format.sub" "$TMP/$format.ranged" "$TMP/$format.past" >"$TMP/check" 2>&1 <<'PYEOF' \
    || fail "$format golden: $(cat "$TMP/check")"
import json, sys
golden = json.load(open(sys.argv[1]))
msgs = json.load(open(sys.argv[2]))["messages"]
errors = []
if len(msgs) != len(golden["frames"]):
    errors.append("received %d messages, golden has %d" % (len(msgs), len(golden["frames"])))
for m, g in zip(msgs, golden["frames"]):
    if m["topic"].encode().hex() != g["topic_hex"]:
        errors.append("frame %d topic" % g["index"])
    if "%016x" % m["seq"] != g["seq_hex"]:
        errors.append("frame %d seq %d" % (g["index"], m["seq"]))
    if m["payload_hex"] != g["payload_hex"]:
        errors.append("frame %d payload\n  got  %s\n  want %s" % (g["index"], m["payload_hex"], g["payload_hex"]))
for path, key in ((sys.argv[3], "ranged"), (sys.argv[4], "past_end")):
    got = json.load(open(path))
    want = golden["replay"][key]["reply_messages_hex"]
    if got["replies"] != want or not got["ended"]:
        errors.append("replay %s: got %r want %r" % (key, got["replies"], want))
if errors:
    print("\n".join(errors[:6]))
    sys.exit(1)
PYEOF
done

finish
