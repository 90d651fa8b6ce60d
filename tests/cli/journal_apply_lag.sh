#!/usr/bin/env bash
# A replica's kvindex_journal_apply_lag_seconds (/metrics): publish-fake -> `subscribe --journal`
# -> a real nats-server -> `subscribe --from-journal`. The histogram counts each live message and
# replay reply of the journal once (counted in its export, `record --from-journal`, read here by
# its own parser), its buckets are cumulative up to +Inf = the count, and every lag lies between 0
# and the time since the test began (each message was received after that and applied before the
# scrape); the ingester has no such histogram.
. "$(dirname "$0")/journal_lib.bash"

journal_start 5
http_ing=$((base + 3)) http_rep=$((base + 4))
began=$("$PY" -c 'import time; print(time.time())')
SRC=$(fake_source "$pub" replay)
launch_ingester ing "$http_ing"
launch_replica rep "$http_rep"
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --replay-port "$((pub + 1))" \
  --count 300 --rate 3000 --wait-subscribers 1 --wait-timeout 20 --linger 1
expect_status 0 "publish-fake"
wait_acked "$http_ing" none || fail "ingester journal state"
last=$(http_json "$http_ing" /healthz | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["journal"]["last_acked_seq"])')
wait_lag0 "$http_rep" "$last" || fail "replica lag"

http_json "$http_rep" /metrics >"$TMP/rep.metrics"
run "$KVINDEX" record --from-journal "$J" --out "$TMP/j.kvcap"
expect_status 0 "record --from-journal"
"$PY" - "$TMP/rep.metrics" "$began" "$TMP/j.kvcap" <<'PYEOF' || fail "replica's apply lag histogram"
import math, struct, sys, time
name = "kvindex_journal_apply_lag_seconds"
elapsed = time.time() - float(sys.argv[2])
# The journal's messages (record types 2 and 3) in its export (docs/capture-format.md).
data = open(sys.argv[3], "rb").read()
messages, at = 0, 32
while at + 32 <= len(data):
    length, kind = struct.unpack_from("<IB", data, at)
    recv_ns = struct.unpack_from("<q", data, at + 16)[0]
    if length == 0:
        break
    if kind in (2, 3):
        messages += 1
        assert recv_ns >= float(sys.argv[2]) * 1e9 - 1e6, recv_ns
    at += length
assert messages >= 300, messages  # every batch published, live or replayed
lines = open(sys.argv[1]).read().splitlines()
assert "# TYPE %s histogram" % name in lines, "no histogram"
buckets, count, total = [], None, None
for line in lines:
    if line.startswith(name + "_bucket{"):
        le = line.split('le="', 1)[1].split('"', 1)[0]
        buckets.append((math.inf if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    elif line.startswith(name + "_count "):
        count = float(line.rsplit(" ", 1)[1])
    elif line.startswith(name + "_sum "):
        total = float(line.rsplit(" ", 1)[1])
assert count == messages, (count, messages)
assert len(buckets) >= 10 and buckets[-1] == (math.inf, count), buckets
assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets
# No lag exceeds the time since the test began.
held = next(n for le, n in buckets if le >= elapsed)
assert held == count, (elapsed, buckets)
assert 0 <= total <= count * elapsed, (total, elapsed)
print("apply lag: %d messages, mean %.2f ms" % (count, 1e3 * total / count))
PYEOF
http_json "$http_ing" /metrics | grep -q "kvindex_journal_apply_lag_seconds" && fail "ingester has an apply lag histogram"
finish
