#!/usr/bin/env bash
# The replay ROUTER in every reply style, probed by an independent python DEALER: a request from
# the middle of the ring, from before the ring (starts at the oldest kept batch), past the end
# (only the end marker), and malformed requests (no reply, counted in the summary).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

for style in vllm vllm-topic mooncake; do
  base=$(free_ports 2) || { fail "no free ports"; continue; }
  $SUB sub --endpoint tcp://127.0.0.1:$base --count 20 --timeout 20 --idle 5 --hex >"$TMP/$style.sub" &
  sub_pid=$!
  timeout 40 "$KVINDEX" publish-fake --format vllm --replay-style "$style" --topic kv-events \
    --count 20 --ring 5 --port "$base" --replay-port $((base + 1)) --rate 0 \
    --wait-subscribers 1 --wait-timeout 15 --linger 5 --json "$TMP/$style.json" 2>"$TMP/$style.err" &
  pub_pid=$!
  wait $sub_pid
  ep=tcp://127.0.0.1:$((base + 1))
  $SUB replay --endpoint $ep --start 17 --idle 3 >"$TMP/$style.middle"
  $SUB replay --endpoint $ep --start 2 --idle 3 >"$TMP/$style.before"
  $SUB replay --endpoint $ep --start 20 --idle 3 >"$TMP/$style.past"
  # Malformed: no empty delimiter (the Go conductor's request), and a 4-byte sequence.
  $SUB replay --endpoint $ep --raw 0000000000000011 --idle 1 >"$TMP/$style.bad1"
  $SUB replay --endpoint $ep --raw "" 00000011 --idle 1 >"$TMP/$style.bad2"
  wait $pub_pid || fail "$style: publish-fake failed: $(cat "$TMP/$style.err")"
  "$PY" - "$style" "$TMP/$style" >"$TMP/check" 2>&1 <<'PYEOF' || fail "$style: $(cat "$TMP/check")"
import json, sys
style, prefix = sys.argv[1], sys.argv[2]
live = {m["seq"]: m["payload_hex"] for m in json.load(open(prefix + ".sub"))["messages"]}
topic = "kv-events".encode().hex()
END = "ff" * 8
def batch(seq):
    s = "%016x" % seq
    if style == "vllm-topic":
        return ["", topic, s, live[seq]]
    return ["", s, live[seq]]
end = {"vllm": ["", END, ""], "vllm-topic": ["", "", END, ""], "mooncake": ["", "", END]}[style]
errors = []
def expect(name, seqs):
    got = json.load(open(prefix + "." + name))
    want = [batch(s) for s in seqs] + [end]
    if got["replies"] != want or not got["ended"]:
        errors.append("%s: got %r\n want %r" % (name, got["replies"], want))
expect("middle", [17, 18, 19])
expect("before", [15, 16, 17, 18, 19])   # ring 5: older requests start at the oldest kept
expect("past", [])
for bad in ("bad1", "bad2"):
    got = json.load(open(prefix + "." + bad))
    if got["replies"]:
        errors.append("%s got a reply %r" % (bad, got["replies"]))
summary = json.load(open(prefix + ".json"))
if (summary["replay_requests"], summary["replay_batches"], summary["replay_malformed"]) != (3, 8, 2):
    errors.append("summary replay counters %r" % ((summary["replay_requests"], summary["replay_batches"], summary["replay_malformed"]),))
if summary["replay_style"] != style:
    errors.append("replay_style %r" % summary["replay_style"])
if errors:
    print("\n".join(errors))
    sys.exit(1)
PYEOF
done

finish
