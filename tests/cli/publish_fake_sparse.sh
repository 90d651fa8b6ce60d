#!/usr/bin/env bash
# A sparse KV-cache group end to end (docs/wire-formats.md "Hybrid models"): publish-fake
# --format vllm-hybrid-sparse (group 1 a Mamba group announcing block_offsets) and
# vllm-hybrid-skipped (the same group announcing runs with skipped context) -> subscribe
# --record -> replay --queries, every emitted answer exact, among them each prompt asked in
# group 1, where the walk stops at the first chunk the group skipped, and the prefix every group
# holds asked in both groups.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/publish_fake_lib.bash"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_live.bash"

for variant in sparse skipped; do
live_exact "$variant" vllm "vllm-hybrid-$variant"
"$PY" - "$TMP/$variant.q" >"$TMP/$variant.check" 2>&1 <<'PYEOF' || fail "$variant queries: $(cat "$TMP/$variant.check")"
import json, sys
qs = [json.loads(line) for line in open(sys.argv[1])]
longest = lambda q: q["expect"]["fake-0"]["longest_matched"]
pairs = [(a, b) for a, b in zip(qs, qs[1:])
         if "group" not in a["query"] and b["query"].get("group") == 1
         and a["query"]["token_ids"] == b["query"]["token_ids"]]
assert pairs, "no prompt asked in group 1"
assert any(longest(b) < longest(a) for a, b in pairs), "group 1 never holds less than group 0"
assert any(0 < len(a["query"]["token_ids"]) == longest(a) == longest(b) for a, b in pairs), \
    "no query for the prefix every group holds"
PYEOF
done

# --dump shows each event's group, and the sparse form of group 1's stored events: a
# skipped-context run is its consecutive chunks after the skipped ones, tokens from the parent on.
run "$KVINDEX" replay "$TMP/skipped.kvcap" --dump
expect_status 0 "replay --dump of the skipped-context capture"
cp "$stdout_file" "$TMP/skipped.dump"
"$PY" - "$TMP/skipped.dump" >"$TMP/dump.check" 2>&1 <<'PYEOF' || fail "dump: $(cat "$TMP/dump.check")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
stored = [l for l in lines if l["type"] == "stored"]
assert {l.get("group") for l in stored} == {0, 1}, "groups %r" % {l.get("group") for l in stored}
runs = [l for l in stored if l.get("group") == 1 and "block_offsets" in l]
assert runs, "no group-1 event with block_offsets"
for l in runs:
    o = l["block_offsets"]
    assert o[0] > 0 and o == list(range(o[0], o[0] + len(o))), o
    assert len(l["token_ids"]) == (o[-1] + 1) * 4 and len(o) == len(l["block_hashes"]), l
assert not any("block_offsets" in l for l in stored if l.get("group") == 0)
PYEOF
finish
