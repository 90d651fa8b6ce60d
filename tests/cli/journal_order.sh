#!/usr/bin/env bash
# A journal stream that holds a source's first batches after later ones, as a resend after a
# failed publish leaves it: a replica applies them in the ingester's order and is exact (read in
# stream order, batch 0 after batches 1-5 would be a publisher restart that clears them), and
# `record --from-journal` exports them in that order. The stream is written here over the NATS
# protocol from a recorded journal's records, each batch naming its predecessor in the
# Kvindex-Prev header, computed independently (python3-xxhash: XXH3-64 of the payload, seeded with
# the batch's sequence; docs/scale-out.md "Order within a source").
. "$(dirname "$0")/journal_lib.bash"

journal_start 4
http_ing=$((base + 2)) http_rep=$((base + 3))
# The records: an ingester's journal of 40 batches, exported as a capture (in order: no failure).
SRC=$(fake_source "$pub")
launch_ingester ing "$http_ing" --journal-stream src
run timeout 30 "$KVINDEX" publish-fake --format vllm --port "$pub" --count 40 --rate 2000 \
  --wait-subscribers 1 --wait-timeout 20 --linger 1 --emit-queries "$TMP/q.jsonl" --query-every 10
expect_status 0 "publish-fake"
wait_acked "$http_ing" none || fail "ingester journal state"
run "$KVINDEX" record --from-journal "$J" --journal-stream src --out "$TMP/src.kvcap"
expect_status 0 "record --from-journal src"

# The stream `dst`: the same records, batches 1-5 before batch 0.
"$PY" - "$nats" "$TMP/src.kvcap" <<PYEOF || fail "writing the reordered stream"
$JS_PY
import socket, struct, sys
import xxhash
port, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
records, pos = [], 32
while pos < len(data) and data[pos:pos + 4] != b"\0\0\0\0":
    length, rtype, _, _, _, _, source, _ = struct.unpack_from("<IBBHQqII", data, pos)
    records.append((rtype, source, data[pos:pos + length]))
    pos += length
keys, last, out = {}, {}, []
for rtype, source, record in records:
    prev = None
    if rtype == 1:  # a source definition: the subject is the hash of its body
        keys[source] = xxhash.xxh3_64_intdigest(record[32:])
    elif rtype == 2:  # a live batch [topic, seq, payload]
        f = frames(record)
        seq = int.from_bytes(f[1], "big")
        prev = last.get(source)
        last[source] = xxhash.xxh3_64_intdigest(f[-1], seed=seq)
        out.append((seq, source, record, prev))
        continue
    out.append((None, source, record, prev))
batch = [i for i, r in enumerate(out) if r[0] is not None]
assert [out[i][0] for i in batch[:6]] == [0, 1, 2, 3, 4, 5], [out[i][0] for i in batch[:6]]
first = out[batch[0]]
del out[batch[0]]
out.insert(batch[5], first)  # after batch 5
assert api(port, "STREAM.CREATE.dst", {"name": "dst", "subjects": ["dst.>"], "storage": "file"}).get("config"), "stream"
s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
s.recv(65536)
s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
for seq, source, record, prev in out:
    subject = b"dst.src.%016x" % keys[source]
    hdr = b"NATS/1.0\r\n" + (b"Kvindex-Prev: %016x\r\n" % prev if prev is not None else b"") + b"\r\n"
    s.sendall(b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, len(hdr), len(hdr) + len(record), hdr, record))
s.sendall(b"PING\r\n")
buf = b""
while b"PONG" not in buf:
    buf += s.recv(65536)
info = api(port, "STREAM.INFO.dst")
assert info["state"]["messages"] == len(out), (info["state"], len(out))
print(len(out))
PYEOF

launch_replica rep "$http_rep" --journal-stream dst
last=$("$PY" -c "$JS_PY"$'\n'"print(api($nats, 'STREAM.INFO.dst')['state']['last_seq'])")
wait_lag0 "$http_rep" "$last" || fail "replica lag"
check_answers "$TMP/q.jsonl" "$http_rep" || fail "replica answers"
http_json "$http_rep" /healthz | "$PY" -c 'import json, sys
j = json.load(sys.stdin)["journal"]
assert j["reordered"] == 5 and j["held_records"] == 0, j' || fail "replica reordered count"
http_json "$http_rep" /metrics | grep -q "^kvindex_journal_reordered 5\$" || fail "metrics reordered"
http_json "$http_rep" /instances | "$PY" -c 'import json, sys
sources = json.load(sys.stdin)["sources"]
assert [s["counters"]["restarts"] for s in sources] == [0], sources' || fail "no restart seen"

# The export puts the batches back in the ingester's order.
run "$KVINDEX" record --from-journal "$J" --journal-stream dst --out "$TMP/dst.kvcap" \
  --json "$TMP/rec.json"
expect_status 0 "record --from-journal dst"
expect_stdout_contains "5 put back in order, 0 without their predecessor at the end"
"$PY" - "$KVINDEX_SOURCE_DIR/tests/data/capture_check.py" "$TMP/dst.kvcap" "$TMP/rec.json" <<'PYEOF' || fail "export order"
import json, subprocess, sys
out = subprocess.run([sys.executable, sys.argv[1], sys.argv[2]], capture_output=True, text=True, check=True).stdout
seqs = [int(r["frames"][1], 16) for r in map(json.loads, out.splitlines()) if r["type"] == 2]
assert seqs == list(range(40)), seqs
j = json.load(open(sys.argv[3]))["journal"]
assert j["reordered"] == 5 and j["unordered_at_end"] == 0, j
PYEOF
finish
