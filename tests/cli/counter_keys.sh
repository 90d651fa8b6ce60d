#!/usr/bin/env bash
# The per-source counters carry the same keys everywhere: HTTP /instances (`counters`), /metrics
# (`kvindex_source_<key>_total`), `subscribe --json` (`sources[]`, `total`) and `replay --json` of
# the capture subscribe recorded (`sources[]`). The oracle is the documented list, parsed from the
# table of docs/http-api.md "Per-source counters". Values that must agree: 20 live batches of one
# block each (the independent Python publisher's plan) are received and applied in every output;
# the transport keys are live only (`messages` 20 live, 0 offline).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

PORT=$(free_ports 1)
plan "$TMP/p.json" 0 20 '[{"sleep": 30}]'
start_pub p "$TMP/p.json"
"$KVINDEX" subscribe --source "vllm-0=vllm@$PUB_EP,model=m,block-size=4" --http "127.0.0.1:$PORT" \
  --record "$TMP/cap.kvcap" --json "$TMP/sub.json" --stats-interval 0 >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
PIDS+=($sub)
"$PY" - "$PORT" "$TMP" "$KVINDEX_SOURCE_DIR/tests/data" <<'PYEOF' || fail "could not read /instances and /metrics"
import json, sys
sys.path.insert(0, sys.argv[3])
from http_client import Server, wait_for
server = Server(sys.argv[1])
inst = wait_for(lambda: (lambda j: j if j["sources"][0]["counters"]["applied"] == 20 else None)(
    server.json("/instances")), "the 20 batches in /instances")
json.dump({"instances": inst, "metrics": server.call("/metrics")[1]}, open(sys.argv[2] + "/http.json", "w"))
PYEOF
kill -TERM $sub
wait $sub
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"
run "$KVINDEX" replay "$TMP/cap.kvcap" --json "$TMP/rep.json"
expect_status 0 "replay --json"

"$PY" - "$TMP" "$KVINDEX_SOURCE_DIR/docs/http-api.md" <<'PYEOF' || fail "the counter key sets differ"
import json, re, sys
tmp, doc = sys.argv[1], open(sys.argv[2]).read()
section = doc.split("## Per-source counters", 1)[1].split("\n## ", 1)[0]
documented = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
assert len(documented) == len(set(documented)) >= 20, documented
documented = set(documented)
http = json.load(open(tmp + "/http.json"))
sub = json.load(open(tmp + "/sub.json"))
rep = json.load(open(tmp + "/rep.json"))
outputs = {
    "/instances": http["instances"]["sources"][0]["counters"],
    "subscribe --json sources": {k: v for k, v in sub["sources"][0].items() if k not in ("name", "endpoint")},
    "subscribe --json total": sub["total"],
    "replay --json sources": {k: v for k, v in rep["sources"][0].items() if k not in ("source", "instance")},
}
bad = []
for name, counters in outputs.items():
    if set(counters) != documented:
        bad.append("%s: extra %s, missing %s" % (name, sorted(set(counters) - documented),
                                                  sorted(documented - set(counters))))
families = set(re.findall(r"^kvindex_source_([a-z_]+)_total\{", http["metrics"], re.M))
if families != documented:
    bad.append("/metrics: extra %s, missing %s" % (sorted(families - documented), sorted(documented - families)))
for name, counters in outputs.items():
    if set(counters) == documented:
        for key, want in (("received", 20), ("applied", 20), ("events", 20), ("malformed", 0),
                          ("frame_errors", 0), ("lost", 0)):
            if counters[key] != want:
                bad.append("%s: %s = %s, want %s" % (name, key, counters[key], want))
if outputs["replay --json sources"].get("messages") != 0 or outputs["/instances"].get("messages") != 20:
    bad.append("messages: live 20 and offline 0 expected")
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
PYEOF
finish
