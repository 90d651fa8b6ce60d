#!/usr/bin/env bash
# User-space instructions per HTTP request of the whole server process (docs/benchmarks-http.md
# "HTTP library"): `kvindex subscribe --http` (an empty index, as scripts/strace-http.sh) runs under
# `valgrind --tool=callgrind --instr-atstart=no`; instrumentation is switched on only while
# bench/http_load POSTs /query (2,048-token bodies) at RATE over CONNECTIONS for DURATION_S, so
# start-up is not counted. Prints the process's instructions (every thread) per request sent.
# Instruction counts do not depend on the machine's load.
#
# Usage: scripts/callgrind-http.sh [BUILD_DIR] [RATE] [DURATION_S] [CONNECTIONS]
#   defaults: build 100 5 4 (env HTTP_THREADS=2 the server's --http-threads; KEEP=FILE keeps the
#   callgrind output)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RATE=${2:-100}
DURATION=${3:-5}
CONNS=${4:-4}
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 12000))  # below the ephemeral range (32768-)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$tmp/cg.out" \
  "$BUILD/tools/kvindex/kvindex" subscribe --source "a=vllm@tcp://127.0.0.1:$((port + 1)),model=m,block-size=16" \
  --http "127.0.0.1:$port" --http-threads "${HTTP_THREADS:-2}" --stats-interval 0 \
  >"$tmp/sub.out" 2>"$tmp/sub.err" &
sub=$!
pids+=("$sub")
"$PY" -c 'import json; print(json.dumps({"model": "m", "token_ids": list(range(2048))}))' >"$tmp/bodies.jsonl"
for _ in $(seq 1 300); do
  "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" \
    2>/dev/null && break
  sleep 0.2
done
callgrind_control -i on "$sub" >/dev/null
"$BUILD/bench/http_load" --port "$port" --bodies "$tmp/bodies.jsonl" --rate "$RATE" \
  --duration "$DURATION" --connections "$CONNS" --out "$tmp/load.json" >/dev/null 2>&1 || true
callgrind_control -i off "$sub" >/dev/null
kill -TERM "$sub"
wait "$sub" || true
[ -n "${KEEP:-}" ] && cp "$tmp"/cg.out* "$KEEP"
"$PY" - "$tmp" <<'PYEOF'
import glob, json, sys
tmp = sys.argv[1]
run = json.load(open(tmp + "/load.json"))
sent = run["rate"] * (run["warmup_s"] + run["duration_s"])
total = 0
for name in glob.glob(tmp + "/cg.out*"):
    for line in open(name):
        if line.startswith("totals:"):  # one per part of the output
            total += int(line.split()[1])
print("instructions per request: %.0f (%d sent, %d errors, %d measured)" % (
    total / sent, sent, run["errors"], run["measured"]))
PYEOF
