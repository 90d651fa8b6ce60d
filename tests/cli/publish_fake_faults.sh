#!/usr/bin/env bash
# Fault injection, observed by an independent python subscriber and DEALER: a dropped batch is
# missing live but present in replay; a corrupt batch is corrupt only live (the ring keeps the good
# payload); a duplicate arrives twice; a restart resets the sequence, empties the replay ring and
# the fake's cache (its first batch stores the shared prefix again, from the root).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

# Run A: 16 batches; batch k (1-based) dropped when k%5==0 (not the last), else corrupt when
# k%7==0, else duplicated when k%3==0. Sequences are k-1.
base=$(free_ports 2) || fail "no free ports"
$SUB sub --endpoint tcp://127.0.0.1:$base --count 17 --timeout 20 --idle 4 --hex >"$TMP/a.sub" &
sub_pid=$!
timeout 40 "$KVINDEX" publish-fake --format vllm-map --count 16 --drop-every 5 --corrupt-every 7 \
  --duplicate-every 3 --port "$base" --replay-port $((base + 1)) --rate 0 --wait-subscribers 1 \
  --wait-timeout 15 --linger 4 --json "$TMP/a.json" 2>"$TMP/a.err" &
pub_pid=$!
wait $sub_pid
$SUB replay --endpoint tcp://127.0.0.1:$((base + 1)) --start 4 --idle 3 >"$TMP/a.replay"
wait $pub_pid || fail "run A: $(cat "$TMP/a.err")"
"$PY" - "$TMP/a" >"$TMP/check" 2>&1 <<'PYEOF' || fail "faults: $(cat "$TMP/check")"
import json, sys
sys.path.insert(0, sys.argv[0])
prefix = sys.argv[1]
msgs = json.load(open(prefix + ".sub"))["messages"]
errors = []
seqs = [m["seq"] for m in msgs]
want = [0, 1, 2, 2, 3, 5, 5, 6, 7, 8, 8, 10, 11, 11, 12, 13, 15]   # by hand from the rules above
if seqs != want:
    errors.append("live seqs %r, want %r" % (seqs, want))
bad = sorted({m["seq"] for m in msgs if m["decoded"] is None})
if bad != [6, 13]:
    errors.append("undecodable live seqs %r, want [6, 13]" % bad)
live = {}
for m in msgs:
    if m["decoded"] is not None:
        live[m["seq"]] = m["payload_hex"]
rep = json.load(open(prefix + ".replay"))
got = [int(r[-2], 16) for r in rep["replies"][:-1]]
if got != list(range(4, 16)) or not rep["ended"]:
    errors.append("replay from 4 gave %r" % got)
sys.path.insert(0, "")
import msgpack
for r in rep["replies"][:-1]:
    seq, payload = int(r[-2], 16), bytes.fromhex(r[-1])
    try:
        msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception:
        errors.append("replayed seq %d does not decode" % seq)
    if seq in live and live[seq] != r[-1]:
        errors.append("replayed seq %d differs from its live copy" % seq)
s = json.load(open(prefix + ".json"))
if s["faults"] != {"dropped": 3, "corrupted": 2, "duplicated": 4, "restarts": 0}:
    errors.append("summary faults %r" % s["faults"])
if s["live_messages"] != 17:
    errors.append("summary live_messages %r" % s["live_messages"])
if errors:
    print("\n".join(errors)); sys.exit(1)
PYEOF

# Run B: a restart after 5 batches. One shared prefix (2 blocks) in every prompt.
base=$(free_ports 2) || fail "no free ports"
$SUB sub --endpoint tcp://127.0.0.1:$base --count 8 --timeout 20 --idle 4 >"$TMP/b.sub" &
sub_pid=$!
timeout 40 "$KVINDEX" publish-fake --format vllm --count 8 --restart-after 5 --prefixes 1 \
  --prefix-blocks 2 --prompt-blocks 4 --capacity 100 --port "$base" --replay-port $((base + 1)) \
  --rate 0 --wait-subscribers 1 --wait-timeout 15 --linger 4 --json "$TMP/b.json" 2>"$TMP/b.err" &
pub_pid=$!
wait $sub_pid
$SUB replay --endpoint tcp://127.0.0.1:$((base + 1)) --start 0 --idle 3 >"$TMP/b.replay"
wait $pub_pid || fail "run B: $(cat "$TMP/b.err")"
"$PY" - "$TMP/b" >"$TMP/check" 2>&1 <<'PYEOF' || fail "restart: $(cat "$TMP/check")"
import json, sys
prefix = sys.argv[1]
msgs = json.load(open(prefix + ".sub"))["messages"]
errors = []
seqs = [m["seq"] for m in msgs]
if seqs != [0, 1, 2, 3, 4, 0, 1, 2]:
    errors.append("live seqs %r" % seqs)
first = msgs[0]["decoded"]["events"][0]
again = msgs[5]["decoded"]["events"][0]
middle = msgs[1]["decoded"]["events"][0]
# Before the restart the shared prefix is cached: later prompts store only their own blocks.
if middle["parent"] is None or len(middle["hashes"]) != 2:
    errors.append("second batch should store 2 blocks under the prefix: %r" % middle)
# After it the cache is empty: the prefix is stored again, from the root.
if first["parent"] is not None or len(first["hashes"]) != 4:
    errors.append("first batch %r" % first)
if again["parent"] is not None or len(again["hashes"]) != 4 or again["hashes"][:2] != first["hashes"][:2]:
    errors.append("first batch after the restart %r" % again)
rep = json.load(open(prefix + ".replay"))
got = [int(r[-2], 16) for r in rep["replies"][:-1]]
if got != [0, 1, 2]:
    errors.append("after a restart the ring holds only the new incarnation, got %r" % got)
s = json.load(open(prefix + ".json"))
if s["faults"]["restarts"] != 1:
    errors.append("summary restarts %r" % s["faults"])
if errors:
    print("\n".join(errors)); sys.exit(1)
PYEOF

finish
