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
finish
