#!/usr/bin/env bash
# Trace replay benchmarks (docs/benchmarks.md "Trace replay"), on the full Mooncake
# conversation trace (traces/mooncake/conversation_trace.jsonl: 12,031 requests, 288,500 blocks):
#   1. bench/replay_bench (Google Benchmark): parse (kvindex vs an nlohmann_json baseline),
#      id preparation, and the time of single configurations;
#   2. the 9-configuration sweep (lru, lfu, fifo × 1,000, 10,000, inf blocks; one instance) end to
#      end: `kvindex replay` (all cores, and --threads 1) against bench/replay_baseline.py, a
#      straightforward Python simulator, timed in the same run; their counts must agree.
# Raw results: bench/results/replay_bench-<commit>.json and replay_sweep-<commit>.json.
#   scripts/bench-replay.sh [TRACE]
#
#   scripts/bench-replay.sh --plots
# instead regenerates the checked-in charts docs/img/*.svg (README.md, docs/simulation.md) and
# prints the tier tables behind them: the bundled sample and both public traces
# (traces/mooncake/), with shared CPU/disk tiers and --plot.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--plots" ]; then
  MOONCAKE=traces/mooncake
  for t in conversation synthetic; do
    [ -f "$MOONCAKE/${t}_trace.jsonl" ] || { echo "bench-replay: trace not found: $MOONCAKE/${t}_trace.jsonl" >&2; exit 1; }
  done
  cmake -S . -B build/bench-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINDEX_BUILD_TESTS=OFF \
    -DKVINDEX_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build build/bench-release -j "$(nproc)" --target kvindex_cli >/dev/null
  KVINDEX=build/bench-release/tools/kvindex/kvindex
  mkdir -p docs/img
  echo "== sample: policies x capacities x routers, 4 instances -> docs/img/sample-capacity.svg =="
  "$KVINDEX" replay traces/sample.jsonl --instances 4 --policy lru,lfu,prefix-lru \
    --capacity 100,300,1000,3000,10000 --router round-robin,cache-aware \
    --plot docs/img/sample-capacity.svg
  echo "== sample: a shared CPU pool and disk below 4 small GPU caches =="
  "$KVINDEX" replay traces/sample.jsonl --instances 4 --capacity 200,1000 \
    --cpu-capacity none,2000 --disk-capacity none,8000 --router round-robin,cache-aware
  echo "== conversation: over time, 5-minute windows -> docs/img/conversation-over-time.svg =="
  "$KVINDEX" replay "$MOONCAKE/conversation_trace.jsonl" --instances 4 --capacity 2000 \
    --cpu-capacity 8000 --policy lru,prefix-lru --router round-robin,cache-aware --window 300 \
    --plot docs/img/conversation-over-time.svg
  for t in conversation synthetic; do
    echo "== $t: GPU capacity x (no / 8,000-block CPU pool) x (no / 32,000-block disk) -> docs/img/$t-tiers.svg =="
    "$KVINDEX" replay "$MOONCAKE/${t}_trace.jsonl" --instances 4 \
      --capacity 250,500,1000,2000,4000,8000 --cpu-capacity none,8000 --disk-capacity none,32000 \
      --router round-robin,cache-aware --plot "docs/img/$t-tiers.svg"
  done
  exit 0
fi
TRACE=${1:-traces/mooncake/conversation_trace.jsonl}
[ -f "$TRACE" ] || { echo "bench-replay: trace not found: $TRACE" >&2; exit 1; }
PY=/usr/bin/python3
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p bench/results

cmake -S . -B build/bench-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINDEX_BUILD_TESTS=OFF \
  -DKVINDEX_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/bench-release -j "$(nproc)" --target replay_bench kvindex_cli >/dev/null
KVINDEX=build/bench-release/tools/kvindex/kvindex

echo "== bench/replay_bench =="
build/bench-release/bench/replay_bench --benchmark_min_time=0.5 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="bench/results/replay_bench-$commit.json" --benchmark_out_format=json

echo "== 9-configuration sweep, end to end =="
"$PY" - "$KVINDEX" "$TRACE" "bench/results/replay_sweep-$commit.json" "$commit" <<'PYEOF'
import json, os, resource, statistics, subprocess, sys, tempfile, time
kvindex, trace, out_path, commit = sys.argv[1:5]
grid = ["--policy", "lru,lfu,fifo", "--capacity", "1000,10000,inf"]
tmp = tempfile.mkdtemp()

def timed(cmd, runs):
    """Median wall time, all wall times, median CPU time (user + sys of the child), stdout."""
    times, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return statistics.median(times), times, statistics.median(cpus), p.stdout

kv_json = os.path.join(tmp, "kv.json")
kv_all, kv_all_runs, kv_all_cpu, _ = timed([kvindex, "replay", trace] + grid + ["--json", kv_json], 7)
kv_one, kv_one_runs, kv_one_cpu, _ = timed([kvindex, "replay", trace] + grid +
                                           ["--threads", "1", "--json", kv_json], 7)
py, py_runs, py_cpu, py_out = timed(["/usr/bin/python3", "bench/replay_baseline.py", trace] + grid, 3)
ours = json.load(open(kv_json))["results"]
theirs = json.loads(py_out)["results"]
keys = ("policy", "capacity", "blocks", "prefix_hit_blocks", "any_hit_blocks", "evictions")
agree = all(all(a[k] == b[k] for k in keys) for a, b in zip(ours, theirs)) and len(ours) == 9
result = {
    "commit": commit, "trace": os.path.basename(trace), "configurations": 9,
    "cores": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
    "kvindex_all_cores_s": kv_all, "kvindex_all_cores_runs_s": kv_all_runs,
    "kvindex_all_cores_cpu_s": kv_all_cpu,
    "kvindex_one_thread_s": kv_one, "kvindex_one_thread_runs_s": kv_one_runs,
    "kvindex_one_thread_cpu_s": kv_one_cpu,
    "python_baseline_s": py, "python_baseline_runs_s": py_runs, "python_baseline_cpu_s": py_cpu,
    "ratio_all_cores": py / kv_all, "ratio_one_thread": py / kv_one,
    "ratio_cpu_one_thread": py_cpu / kv_one_cpu, "counts_agree": agree,
}
json.dump(result, open(out_path, "w"), indent=2)
print(f"kvindex replay, all cores : {kv_all * 1000:8.1f} ms wall (median of 7), {kv_all_cpu * 1000:7.1f} ms CPU")
print(f"kvindex replay, 1 thread  : {kv_one * 1000:8.1f} ms wall (median of 7), {kv_one_cpu * 1000:7.1f} ms CPU")
print(f"Python baseline           : {py * 1000:8.1f} ms wall (median of 3), {py_cpu * 1000:7.1f} ms CPU")
print(f"wall ratio: {py / kv_all:.1f}x (all cores), {py / kv_one:.1f}x (1 thread); "
      f"CPU ratio: {py_cpu / kv_one_cpu:.1f}x; load average {os.getloadavg()[0]:.1f} "
      f"on {os.cpu_count()} cores; counts agree: {agree}")
print(f"raw: {out_path}")
sys.exit(0 if agree else 1)
PYEOF
