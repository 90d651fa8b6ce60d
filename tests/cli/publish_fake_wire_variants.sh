#!/usr/bin/env bash
# The publishers that speak a variant of the vLLM/SGLang wire (docs/wire-formats.md): SGLang with
# EAGLE (bigram token pairs), TensorRT-LLM's native publisher (tagged maps, signed hashes),
# LMCache's connector (CPU medium), a vLLM hybrid model (two KV-cache groups) and one whose second
# group is a sparse Mamba group (block_offsets, or skipped context). For each: the bytes as an independent python3-zmq +
# python3-msgpack subscriber sees them, then publish-fake -> subscribe --record -> replay --queries,
# every emitted answer exact (the sparse group's: publish_fake_sparse.sh).
# Last, an EAGLE stream read by a source configured as plain sglang: still exact, and counted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_live.bash"

COUNT=12
for format in sglang-eagle trtllm lmcache vllm-hybrid vllm-hybrid-sparse vllm-hybrid-skipped; do
  port=$(free_ports 1) || { fail "no free port"; continue; }
  $SUB sub --endpoint tcp://127.0.0.1:$port --count $COUNT --timeout 20 --idle 5 \
    >"$TMP/$format.sub" 2>"$TMP/$format.suberr" &
  sub_pid=$!
  run timeout 30 "$KVINDEX" publish-fake --format "$format" --count $COUNT --events-per-batch 2 \
    --port "$port" --rate 0 --wait-subscribers 1 --wait-timeout 15 --block-size 4 \
    --prompt-blocks 5 --prefix-blocks 2 --capacity 12 --seed 5
  expect_status 0 "publish-fake --format $format"
  wait $sub_pid || fail "$format: subscriber failed: $(cat "$TMP/$format.suberr")"
  "$PY" - "$format" "$TMP/$format.sub" >"$TMP/check" 2>&1 <<'PYEOF' || fail "$format: $(cat "$TMP/check")"
import json, sys
fmt, msgs = sys.argv[1], json.load(open(sys.argv[2]))["messages"]
errors, stored, groups, skipped = [], 0, [], 0
held = {}  # vllm-hybrid-sparse: group-1 hashes held, for the parent check
for m in msgs:
    d = m["decoded"]
    for e in d["events"]:
        if fmt == "vllm-hybrid-skipped":
            if e["form"] != "map":
                errors.append("vllm-hybrid-skipped event is not a map")
            groups.append((e["type"], e.get("group")))
            if e["type"] == "BlockStored":
                stored += 1
                if e.get("block_offsets") is not None:
                    errors.append("skipped-context stream sent block_offsets")
                if e["tokens"] != 4 * len(e["hashes"]):
                    errors.append("%d tokens for %d blocks" % (e["tokens"], len(e["hashes"])))
                if e.get("group") == 1:
                    # A run of kept chunks: its skipped context (whole chunks, one extra_keys
                    # entry each) chains from a hash the group holds; without skipped context
                    # the parent is one.
                    if "skipped_tokens" in e:
                        skipped += 1
                        if (e["skipped_tokens"] == 0 or e["skipped_tokens"] % 4
                                or e["skipped_extra_keys"] != e["skipped_tokens"] // 4):
                            errors.append("bad skipped context: %r" % e)
                        anchor = e["skipped_parent"]
                    else:
                        anchor = e["parent"]
                    if anchor is not None and anchor not in held:
                        errors.append("skipped-context anchor %r not held by group 1" % anchor)
                    held.update((h, True) for h in e["hashes"])
            elif e["type"] == "BlockRemoved" and e.get("group") == 1:
                for h in e["hashes"]:
                    if held.pop(h, None) is None:
                        errors.append("group 1 removes %r it does not hold" % h)
            continue
        if fmt == "vllm-hybrid-sparse":
            if e["form"] != "map":
                errors.append("vllm-hybrid-sparse event is not a map")
            groups.append((e["type"], e.get("group")))
            if e["type"] == "BlockStored":
                stored += 1
                want = {0: "full_attention", 1: "mamba"}.get(e.get("group"))
                if e.get("spec_kind") != want:
                    errors.append("group %r kind %r" % (e.get("group"), e.get("spec_kind")))
                offsets = e.get("block_offsets")
                if e.get("group") == 1:
                    # One strictly increasing offset per hash, the last chunk hashed, token_ids a
                    # whole number of chunks, the parent a hash the group still holds.
                    chunks, rem = divmod(e["tokens"], 4)
                    if (offsets is None or len(offsets) != len(e["hashes"]) or rem != 0
                            or offsets != sorted(set(offsets)) or offsets[-1] != chunks - 1):
                        errors.append("bad sparse event: %d tokens, offsets %r" % (e["tokens"], offsets))
                    if e["parent"] is not None and e["parent"] not in held:
                        errors.append("sparse parent %r not held by group 1" % e["parent"])
                    held.update((h, True) for h in e["hashes"])
                elif offsets is not None:
                    errors.append("group 0 sent block_offsets")
            elif e["type"] == "BlockRemoved" and e.get("group") == 1:
                for h in e["hashes"]:
                    if held.pop(h, None) is None:
                        errors.append("group 1 removes %r it does not hold" % h)
            continue
        if fmt == "vllm-hybrid":
            if e["form"] != "map":
                errors.append("vllm-hybrid event is not a map")
            groups.append((e["type"], e.get("group")))
            if e["type"] == "BlockStored":
                stored += 1
                want = {0: "full_attention", 1: "sliding_window"}.get(e.get("group"))
                if e.get("spec_kind") != want:
                    errors.append("group %r kind %r" % (e.get("group"), e.get("spec_kind")))
            continue
        if e["type"] != "BlockStored":
            continue
        stored += 1
        if fmt == "trtllm":
            # TensorRT-LLM's structs are tagged maps: type and the seven required fields, the
            # fields with defaults omitted; signed int64 hashes.
            if e["form"] != "map" or e["len"] != 8:
                errors.append("trtllm BlockStored is %s of %d" % (e["form"], e["len"]))
            if not (e["signed"] or all(h < 2**63 for h in e["hashes"])):
                errors.append("trtllm hashes above 2^63 must go out as negative int64")
            if e["medium"] != "GPU":
                errors.append("trtllm medium %r" % e["medium"])
            continue
        if e["form"] != "array":
            errors.append("%s: not a positional event" % fmt)
        if fmt == "sglang-eagle":
            # Pairs that chain, one per token, the block's tokens plus the one after it.
            if not (e["bigram"] and e["bigram_chained"]):
                errors.append("not chained bigram pairs: %r" % e)
            if len(e["plain"]) != 4 * len(e["hashes"]):
                errors.append("%d pairs for %d blocks" % (len(e["plain"]), len(e["hashes"])))
            if not e["signed"] and not all(h < 2**63 for h in e["hashes"]):
                errors.append("SGLang hashes must be signed")
        else:
            if e["bigram"]:
                errors.append("%s sent bigram pairs" % fmt)
            if e["len"] != 12:
                errors.append("%s BlockStored has %d elements" % (fmt, e["len"]))
        if fmt == "lmcache" and e["medium"] != "CPU":
            errors.append("lmcache medium %r" % e["medium"])
if stored == 0:
    errors.append("no BlockStored seen")
if fmt.startswith("vllm-hybrid-s") and not any(g == ("BlockStored", 1) for g in groups):
    errors.append("no sparse group event seen")
if fmt == "vllm-hybrid-skipped" and skipped == 0:
    errors.append("no event with skipped context seen")
if fmt == "vllm-hybrid":
    # Every group-0 event is followed by its group-1 mirror (a batch never splits them: 2 per batch).
    for i in range(0, len(groups) - 1, 2):
        if groups[i][1] != 0 or groups[i + 1] != (groups[i][0], 1):
            errors.append("events %d, %d are not a group 0 / group 1 pair: %r" % (i, i + 1, groups[i:i + 2]))
            break
if errors:
    print("; ".join(errors[:5]))
    sys.exit(1)
PYEOF
done

# trtllm sends signed hashes: over a dozen batches some hash is >= 2^63 (they are uniform).
"$PY" -c "
import json, sys
m = json.load(open('$TMP/trtllm.sub'))['messages']
assert any(e.get('signed') for x in m for e in x['decoded']['events']), 'no negative hash seen'
" || fail "trtllm: no signed hash on the wire"

live_exact eagle sglang-eagle sglang-eagle
live_exact trtllm trtllm trtllm
live_exact lmcache lmcache lmcache
live_exact mismatch sglang sglang-eagle
live_exact hybrid vllm vllm-hybrid
# The hybrid index holds group 1 too: the recording answers a query that names it.
"$PY" - "$TMP/hybrid.q" >"$TMP/hybrid1.q" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    q = json.loads(line)
    if q["expect"]["fake-0"]["longest_matched"] > 0:
        q["query"]["group"] = 1  # group 1 mirrors group 0 block for block
        print(json.dumps(q))
        q["query"]["group"] = 2  # no such group: nothing
        q["id"] += "-g2"
        for v in q["expect"].values():
            for k in ("longest_matched", "GPU"):
                v[k] = 0
            v["DP"] = {r: 0 for r in v["DP"]}
        print(json.dumps(q))
PYEOF
[ -s "$TMP/hybrid1.q" ] || fail "hybrid: no query with a hit to ask group 1"
run "$KVINDEX" replay "$TMP/hybrid.kvcap" --queries "$TMP/hybrid1.q"
expect_status 0 "hybrid: replay --queries with group 1 and 2"
expect_stderr_contains " 0 differ"

"$PY" - "$TMP/eagle.json" "$TMP/mismatch.json" "$TMP/trtllm.json" <<'PYEOF' || fail "token form counters"
import json, sys
eagle, mismatch, plain = (json.load(open(p))["total"] for p in sys.argv[1:])
assert eagle["bigram_events"] > 0 and eagle["token_form_mismatches"] == 0, eagle
assert mismatch["bigram_events"] == mismatch["token_form_mismatches"] > 0, mismatch
assert plain["bigram_events"] == 0 and plain["token_form_mismatches"] == 0, plain
PYEOF
# --explain of a prompt the mismatched source does not hold names the token form.
run "$KVINDEX" query --capture "$TMP/mismatch.kvcap" --model fake-model --tokens 1,2,3,4 --explain
expect_status 0 "query --explain of the mismatched capture"
grep -q "eagle-bigram: source 'fake-0' is configured as 'sglang'" "$stdout_file" \
  || fail "explain does not name the token form: $(cat "$stdout_file")"
run "$KVINDEX" query --capture "$TMP/eagle.kvcap" --model fake-model --tokens 1,2,3,4 --explain
grep -q "first-block-absent" "$stdout_file" || fail "eagle capture explained as $(cat "$stdout_file")"

# /metrics over a live server: the silence gauge of a source nobody publishes to, and the reasons
# of the explanations given.
PORT=$(free_ports 1)
quiet=$(free_ports 1)
"$KVINDEX" subscribe --source "quiet-0=sglang-eagle@tcp://127.0.0.1:$quiet,model=m,block-size=4" \
  --http "127.0.0.1:$PORT" --stats-interval 0 >"$TMP/h.out" 2>"$TMP/h.err" &
PIDS+=($!)
"$PY" - "$PORT" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "metrics checks failed"
import json, sys
sys.path.insert(0, sys.argv[2])
from http_client import Server, wait_for
server = Server(sys.argv[1])
wait_for(lambda: server.call("/healthz")[0] == 200, "the server")
for group in (None, 1):
    body = {"model": "m", "token_ids": [1, 2, 3, 4], "explain": True}
    if group is not None:
        body["group"] = group
    code, text = server.call("/query", body)
    assert code == 200, (code, text)
    why = json.loads(text)["explain"]["quiet-0"]
    assert why["reason"] == "first-block-absent", why  # listened to for less than 30 s
code, text = server.call("/query", {"model": "m", "token_ids": [1], "group": -1})
assert code == 400 and "group" in text, (code, text)
code, text = server.call("/metrics")
lines = text.splitlines()
assert 'kvindex_explain_reasons_total{reason="first-block-absent"} 2' in lines, [l for l in lines if "explain" in l]
gauge = [l for l in lines if l.startswith("kvindex_source_seconds_since_last_message{")]
assert len(gauge) == 1 and 'instance="quiet-0"' in gauge[0] and float(gauge[0].split()[-1]) >= 0, gauge
for key in ("bigram_events", "token_form_mismatches"):
    assert any(l.startswith("kvindex_source_%s_total{" % key) for l in lines), key
PYEOF
finish
