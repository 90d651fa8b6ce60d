#!/usr/bin/env bash
# `kvindex replay TRACE --plot FILE.svg`: well-formed SVG (parsed by python's xml.etree), one
# series per configuration, axes and legend; a capacity sweep and hit rate over time.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
T=$TMP/t.jsonl
cat >"$T" <<'JSONL'
{"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 1000, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 4]}
{"timestamp": 2000, "input_length": 512, "output_length": 1, "hash_ids": [5]}
{"timestamp": 3000, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
JSONL
# $1 = SVG, $2 = expected series count, $3 = expected points per series.
check_svg() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF' || fail "SVG check failed: $1"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == ns + "svg", root.tag
groups = [g for g in root.iter(ns + "g") if g.get("class") == "series"]
assert len(groups) == int(sys.argv[2]), len(groups)
for g in groups:
    pts = g.find(ns + "polyline").get("points").split()
    assert len(pts) == int(sys.argv[3]), pts
texts = [t.text for t in root.iter(ns + "text")]
assert any(t and "prefix hit rate" in t for t in texts)
PYEOF
}

run "$KVINDEX" replay --help
expect_status 0 "--help"
expect_stdout_contains "--plot"

# A sweep: 2 policies x 2 routers = 4 series of 3 capacities each (inf is not drawn).
run "$KVINDEX" replay "$T" --policy lru,lfu --router round-robin,cache-aware --instances 2 \
  --capacity 1,2,3,inf --plot "$TMP/sweep.svg"
expect_status 0 "sweep plot"
check_svg "$TMP/sweep.svg" 4 3

# Tier lists are series too: 2 CPU pools x 2 disks = 4 series, labelled by their tiers.
run "$KVINDEX" replay "$T" --capacity 1,2,3 --cpu-capacity none,2 --disk-capacity none,4 \
  --plot "$TMP/tiers.svg"
expect_status 0 "tier sweep plot"
check_svg "$TMP/tiers.svg" 4 3
grep -q "cpu 2 disk 4" "$TMP/tiers.svg" || fail "tier series label"

# Over time: 2 configurations, windows of 1 s -> 4 points each.
run "$KVINDEX" replay "$T" --capacity 2,3 --window 1 --plot "$TMP/time.svg"
expect_status 0 "time plot"
check_svg "$TMP/time.svg" 2 4

# Nothing to draw: only inf capacities and no window.
run "$KVINDEX" replay "$T" --plot "$TMP/none.svg"
expect_status 2 "plot without axis"
expect_stderr_contains "--plot"
finish
