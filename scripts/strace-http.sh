#!/usr/bin/env bash
# System calls per HTTP request (docs/benchmarks-http.md): `strace -c -f` on the server while
# bench/http_load POSTs /query (2,048-token bodies) at RATE over CONNECTIONS for DURATION_S, for
# `kvindex subscribe --http` (an empty index: the calls are the transport's) and bench/http_floor.
# Prints each server's calls per request sent, by system call.
#
# Usage: scripts/strace-http.sh [BUILD_DIR] [RATE] [DURATION_S] [CONNECTIONS]
#   defaults: build 5000 3 4 (env HTTP_MODE=pool the server's --http-mode, HTTP_THREADS=2 its
#   --http-threads)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RATE=${2:-5000}
DURATION=${3:-3}
CONNS=${4:-4}
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 12000))  # below the ephemeral range (32768-)
floor_port=$((port + 1))
"$BUILD/tools/kvindex/kvindex" subscribe --source "a=vllm@tcp://127.0.0.1:$((port + 2)),model=m,block-size=16" \
  --http "127.0.0.1:$port" --http-mode "${HTTP_MODE:-pool}" --http-threads "${HTTP_THREADS:-2}" \
  --stats-interval 0 >"$tmp/sub.out" 2>&1 &
pids+=($!)
sub=$!
"$BUILD/bench/http_floor" --port "$floor_port" >"$tmp/floor.out" 2>&1 &
pids+=($!)
floor=$!
"$PY" -c 'import json; print(json.dumps({"model": "m", "token_ids": list(range(2048))}))' >"$tmp/bodies.jsonl"
sleep 1
count() {  # count NAME PORT PID
  strace -c -f -q -o "$tmp/$1.strace" -p "$3" &
  local tracer=$!
  sleep 0.5
  "$BUILD/bench/http_load" --port "$2" --bodies "$tmp/bodies.jsonl" --rate "$RATE" --duration "$DURATION" \
    --connections "$CONNS" --out "$tmp/$1.json" >/dev/null 2>&1 || true
  kill -INT "$tracer"; wait "$tracer" || true
  "$PY" - "$tmp/$1.strace" "$tmp/$1.json" "$1" <<'PYEOF'
import json, sys
run = json.load(open(sys.argv[2]))
sent = run["rate"] * (run["warmup_s"] + run["duration_s"])
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        rows.append((int(f[3]), f[-1]))
total = sum(c for c, _ in rows)
print("%s: %.2f system calls per request (%d sent, %d errors): %s" % (
    sys.argv[3], total / sent, sent, run["errors"],
    ", ".join("%s %.2f" % (n, c / sent) for c, n in sorted(rows, reverse=True) if c / sent >= 0.05)))
PYEOF
}
count kvindex "$port" "$sub"
count floor "$floor_port" "$floor"
