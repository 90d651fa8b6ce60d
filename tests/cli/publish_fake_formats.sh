#!/usr/bin/env bash
# publish-fake in every wire format over loopback, received by an independent python3-zmq +
# python3-msgpack subscriber (tests/data/fake_subscriber.py): framing, sequence numbers and
# decoded content against what was asked for and against the fake's --json summary.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"

COUNT=12
EPB=3
for format in vllm-v0.9 vllm vllm-map sglang mooncake mooncake-seed; do
  port=$(free_ports 1) || { fail "no free port"; continue; }
  $SUB sub --endpoint tcp://127.0.0.1:$port --count $COUNT --timeout 20 --idle 5 \
    >"$TMP/$format.sub" 2>"$TMP/$format.suberr" &
  sub_pid=$!
  run timeout 30 "$KVINDEX" publish-fake --format "$format" --count $COUNT --events-per-batch $EPB \
    --port "$port" --topic kv-events --rate 0 --wait-subscribers 1 --wait-timeout 15 \
    --block-size 4 --prompt-blocks 6 --prefix-blocks 2 --capacity 12 --seed 3 \
    --json "$TMP/$format.json"
  expect_status 0 "publish-fake --format $format"
  wait $sub_pid || fail "$format: subscriber failed: $(cat "$TMP/$format.suberr")"
  "$PY" - "$format" "$TMP/$format.sub" "$TMP/$format.json" $COUNT $EPB >"$TMP/check" 2>&1 <<'PYEOF' \
    || fail "$format: $(cat "$TMP/check")"
import json, sys
fmt, sub_path, summary_path, count, epb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
msgs = json.load(open(sub_path))["messages"]
summary = json.load(open(summary_path))
errors = []
def check(cond, what):
    if not cond:
        errors.append(what)
check(len(msgs) == count, "received %d messages, want %d" % (len(msgs), count))
first = 1 if fmt == "mooncake" else 0  # the RFC store publisher numbers from 1
check([m.get("seq") for m in msgs] == list(range(first, first + count)), "sequence numbers %r" % [m.get("seq") for m in msgs])
events = stored = removed = 0
seen = set()
for m in msgs:
    check(m["frames"] == 3 and m["topic"] == "kv-events", "framing %r" % m)
    d = m["decoded"]
    if d is None:
        errors.append("seq %s does not decode" % m["seq"]); continue
    want_len = {"vllm-v0.9": 2, "vllm": 3, "vllm-map": 3, "sglang": 2, "mooncake": 3, "mooncake-seed": 2}[fmt]
    check(d["batch_len"] == want_len, "%s: batch has %d elements" % (fmt, d["batch_len"]))
    if fmt in ("vllm", "vllm-map", "mooncake"):
        check(d["dp_rank"] == 0, "dp_rank %r" % d["dp_rank"])
    if fmt == "mooncake":
        check(isinstance(d["ts"], int), "RFC timestamp must be integer milliseconds")
    else:
        check(isinstance(d["ts"], float), "ts must be a float")
    check(len(d["events"]) <= epb and (len(d["events"]) == epb or m is msgs[-1]),
          "seq %d has %d events" % (m["seq"], len(d["events"])))
    for e in d["events"]:
        events += 1
        t = e["type"]
        if fmt == "vllm-map":
            check(e["form"] == "map", "vllm-map event is not a map")
        elif fmt != "mooncake":
            check(e["form"] == "array", "%s event is not an array" % fmt)
        if t in ("BlockStored", "stored", "BlockStoreEvent"):
            stored += len(e["hashes"])
            check(e["tokens"] == 4 * len(e["hashes"]), "tokens %d for %d blocks" % (e["tokens"], len(e["hashes"])))
            check(e["block_size"] == 4, "block_size %r" % e["block_size"])
            if e["parent"] is not None and fmt != "mooncake-seed":
                check(e["parent"] in seen, "parent %d never stored before" % e["parent"])
            seen.update(e["hashes"])
            if fmt == "vllm-v0.9":
                check(e["len"] == 6, "v0.9 BlockStored has %d fields" % e["len"])
            if fmt == "vllm":
                check(e["len"] == 12 and e["medium"] == "GPU", "vllm BlockStored %r" % e)
            if fmt == "sglang":
                check(e["len"] in (6, 7), "sglang BlockStored has %d fields" % e["len"])
            if fmt == "mooncake":
                check(e["model"] == "fake-model", "RFC model_name %r" % e["model"])
            if fmt == "mooncake-seed":
                check(e["replicas"] == [["memory", "tcp://fake-store:0"]], "replicas %r" % e["replicas"])
        elif t in ("BlockRemoved", "removed"):
            removed += len(e["hashes"])
            for h in e["hashes"]:
                check(h in seen, "removed %d never stored" % h)
        elif t == "BlockUpdateEvent":
            check(e["replicas"] == [], "a seed removal is an empty replica set")
            removed += 1
        else:
            errors.append("unexpected event type %r" % t)
check(events == summary["events"], "events %d vs summary %d" % (events, summary["events"]))
check(stored == summary["blocks_stored"], "stored %d vs summary %d" % (stored, summary["blocks_stored"]))
check(removed == summary["blocks_removed"], "removed %d vs summary %d" % (removed, summary["blocks_removed"]))
check(removed > 0, "capacity 12 must evict")
check(summary["live_messages"] == count, "summary live_messages %r" % summary["live_messages"])
if errors:
    print("; ".join(errors[:5]))
    sys.exit(1)
PYEOF
done

# Instances and DP ranks: instance i, rank r on port P + i*R + r, each batch carrying its rank.
base=$(free_ports 4) || fail "no free ports"
pids=()
for k in 0 1 2 3; do
  $SUB sub --endpoint tcp://127.0.0.1:$((base + k)) --count 5 --timeout 20 --idle 5 >"$TMP/dp$k.sub" &
  pids+=($!)
done
run timeout 30 "$KVINDEX" publish-fake --format vllm --instances 2 --dp-ranks 2 --count 5 \
  --port "$base" --rate 0 --wait-subscribers 1 --wait-timeout 15 --json "$TMP/dp.json"
expect_status 0 "publish-fake --instances 2 --dp-ranks 2"
for p in "${pids[@]}"; do wait "$p"; done
for k in 0 1 2 3; do
  "$PY" -c "
import json, sys
m = json.load(open('$TMP/dp$k.sub'))['messages']
assert len(m) == 5, len(m)
assert all(x['decoded']['dp_rank'] == $k % 2 for x in m), [x['decoded']['dp_rank'] for x in m]
s = json.load(open('$TMP/dp.json'))['sources'][$k]
assert s['endpoint'] == 'tcp://127.0.0.1:%d' % ($base + $k), s['endpoint']
assert s['name'] == 'fake-%d/dp%d' % ($k // 2, $k % 2), s['name']
" || fail "dp layout, source $k"
done

# --connect: the subscriber binds, the publisher connects.
port=$(free_ports 1)
$SUB sub --bind --endpoint tcp://127.0.0.1:$port --count 4 --timeout 20 --idle 5 >"$TMP/conn.sub" &
sub_pid=$!
sleep 0.3
run timeout 30 "$KVINDEX" publish-fake --format sglang --connect 127.0.0.1 --port "$port" --count 4 \
  --rate 0 --wait-subscribers 1 --wait-timeout 15
expect_status 0 "publish-fake --connect"
wait $sub_pid
"$PY" -c "
import json; m = json.load(open('$TMP/conn.sub'))['messages']
assert [x['seq'] for x in m] == [0, 1, 2, 3], m" || fail "--connect delivery"

finish
