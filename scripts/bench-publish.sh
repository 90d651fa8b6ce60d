#!/usr/bin/env bash
# publish-fake --blast publishing rate (docs/benchmarks.md "Ingest"): the publisher must comfortably
# exceed the ZMQ ingest targets, 1 M blocks/s with 50-event batches and 100 k batches/s with 1-event
# batches, or the ingest benchmark measures the publisher.
#
# Usage: scripts/bench-publish.sh [BUILD_DIR]   (default build). Writes
# bench/results/publish-<short commit>.json. A python3-zmq SUB is connected (RCVHWM unlimited,
# libzmq's I/O thread drains the TCP stream into memory), so every batch really crosses loopback
# TCP; --wait-subscribers 1 makes sure it is connected before the clock starts.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
KVINDEX=$BUILD/tools/kvindex/kvindex
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
commit=$(git rev-parse --short=12 HEAD)
out=bench/results/publish-$commit.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sink() {  # a SUB on $1 that never reads: libzmq queues everything (RCVHWM 0)
  "$PY" -c "
import sys, time, zmq
s = zmq.Context().socket(zmq.SUB)
s.setsockopt(zmq.RCVHWM, 0)
s.setsockopt(zmq.SUBSCRIBE, b'')
s.connect('tcp://127.0.0.1:$1')
time.sleep(float(sys.argv[1]))" "$2" >/dev/null 2>&1 &
  echo $!
}

results=()
# name, events per batch, batches
for spec in "1-event:1:300000" "50-event:50:20000"; do
  IFS=: read -r name epb count <<<"$spec"
  for rep in 1 2 3; do
    port=$((20000 + RANDOM % 12000))  # below the ephemeral range (32768-)
    pid=$(sink "$port" 120)
    "$KVINDEX" publish-fake --format vllm --blast --count "$count" --events-per-batch "$epb" \
      --port "$port" --wait-subscribers 1 --wait-timeout 20 --json "$tmp/$name-$rep.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    results+=("$tmp/$name-$rep.json")
  done
done

"$PY" - "$out" "$commit" "${results[@]}" <<'PYEOF'
import json, os, platform, sys
out, commit, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = []
for p in paths:
    s = json.load(open(p))
    name = os.path.basename(p).rsplit("-", 1)[0]
    runs.append({"name": name, "batches": s["batches"], "events": s["events"],
                 "blocks": s["blocks_stored"] + s["blocks_removed"],
                 "payload_bytes": s["payload_bytes"], "send_seconds": s["send_seconds"],
                 "batches_per_second": s["batches_per_second"],
                 "blocks_per_second": s["blocks_per_second"]})
doc = {"bench": "publish-fake --blast", "commit": commit, "machine": platform.machine(),
       "cpus": os.cpu_count(), "runs": runs}
json.dump(doc, open(out, "w"), indent=1)
for name in ("1-event", "50-event"):
    rs = sorted((r for r in runs if r["name"] == name), key=lambda r: r["batches_per_second"])
    med = rs[len(rs) // 2]
    print("%-9s median of %d: %10.0f batches/s %12.0f blocks/s (%d batches, %d blocks)" % (
        name, len(rs), med["batches_per_second"], med["blocks_per_second"], med["batches"], med["blocks"]))
print("raw results:", out)
PYEOF
