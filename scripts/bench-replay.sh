#!/usr/bin/env bash
# Trace replay benchmarks (docs/benchmarks.md "Trace replay"), on the full Mooncake
# conversation trace (traces/mooncake/conversation_trace.jsonl: 12,031 requests, 288,500 blocks):
#   1. bench/replay_bench (Google Benchmark): parse (kvindex vs an nlohmann_json baseline),
#      id preparation, and the time of single configurations;
#   2. the 9-configuration sweep (lru, lfu, fifo × 1,000, 10,000, inf blocks; one instance) end to
#      end: `kvindex replay` (all cores, and --threads 1) against bench/replay_baseline.py, a
#      straightforward Python simulator, timed in the same run; their counts must agree.
#   3. the exact LRU curve (`--curve`, every capacity) against one `--capacity` simulation and a
#      20-capacity sweep, same trace, same run; their counts must agree at the 20 capacities. Then
#      the same ratios for the simulation alone, from 1.'s BM_Replay_Curve and BM_Replay_Config.
# Raw results: bench/results/replay_bench-<commit>.json, replay_sweep-<commit>.json and
# replay_curve-<commit>.json.
#   scripts/bench-replay.sh [TRACE] [--quick]
# --quick: one round of each, Google Benchmark at its minimum time (a check that it runs).
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
QUICK=0
ARGS=()
for a in "$@"; do
  if [ "$a" = "--quick" ]; then QUICK=1; else ARGS+=("$a"); fi
done
TRACE=${ARGS[0]:-traces/mooncake/conversation_trace.jsonl}
if [ "$QUICK" = 1 ]; then
  GB_FLAGS=(--benchmark_min_time=0.01 --benchmark_repetitions=1)
  KV_RUNS=1 PY_RUNS=1
else
  GB_FLAGS=(--benchmark_min_time=0.5 --benchmark_repetitions=3)
  KV_RUNS=7 PY_RUNS=3
fi
[ -f "$TRACE" ] || { echo "bench-replay: trace not found: $TRACE" >&2; exit 1; }
PY=/usr/bin/python3
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p bench/results

cmake -S . -B build/bench-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINDEX_BUILD_TESTS=OFF \
  -DKVINDEX_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/bench-release -j "$(nproc)" --target replay_bench kvindex_cli >/dev/null
KVINDEX=build/bench-release/tools/kvindex/kvindex

echo "== bench/replay_bench =="
build/bench-release/bench/replay_bench "${GB_FLAGS[@]}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="bench/results/replay_bench-$commit.json" --benchmark_out_format=json

echo "== 9-configuration sweep, end to end =="
"$PY" - "$KVINDEX" "$TRACE" "bench/results/replay_sweep-$commit.json" "$commit" "$KV_RUNS" \
  "$PY_RUNS" <<'PYEOF'
import json, os, resource, statistics, subprocess, sys, tempfile, time
kvindex, trace, out_path, commit = sys.argv[1:5]
kv_runs, py_runs = int(sys.argv[5]), int(sys.argv[6])
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
kv_all, kv_all_runs, kv_all_cpu, _ = timed([kvindex, "replay", trace] + grid + ["--json", kv_json],
                                           kv_runs)
kv_one, kv_one_runs, kv_one_cpu, _ = timed([kvindex, "replay", trace] + grid +
                                           ["--threads", "1", "--json", kv_json], kv_runs)
py, py_runs, py_cpu, py_out = timed(["/usr/bin/python3", "bench/replay_baseline.py", trace] + grid,
                                    py_runs)
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
print(f"kvindex replay, all cores : {kv_all * 1000:8.1f} ms wall (median of {kv_runs}), {kv_all_cpu * 1000:7.1f} ms CPU")
print(f"kvindex replay, 1 thread  : {kv_one * 1000:8.1f} ms wall (median of {kv_runs}), {kv_one_cpu * 1000:7.1f} ms CPU")
print(f"Python baseline           : {py * 1000:8.1f} ms wall (median of {py_runs}), {py_cpu * 1000:7.1f} ms CPU")
print(f"wall ratio: {py / kv_all:.1f}x (all cores), {py / kv_one:.1f}x (1 thread); "
      f"CPU ratio: {py_cpu / kv_one_cpu:.1f}x; load average {os.getloadavg()[0]:.1f} "
      f"on {os.cpu_count()} cores; counts agree: {agree}")
print(f"raw: {out_path}")
sys.exit(0 if agree else 1)
PYEOF

echo "== exact LRU curve vs one --capacity run vs a 20-capacity sweep (1 thread each) =="
"$PY" - "$KVINDEX" "$TRACE" "bench/results/replay_curve-$commit.json" "$commit" "$KV_RUNS" <<'PYEOF'
import json, os, resource, statistics, subprocess, sys, tempfile
kvindex, trace, out_path, commit = sys.argv[1:5]
runs = int(sys.argv[5])
tmp = tempfile.mkdtemp()


def cpu_time(cmd):
    """Median CPU time (user + sys of the child) over `runs` runs."""
    cpus = []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return statistics.median(cpus)


curve_json, sweep_json = os.path.join(tmp, "curve.json"), os.path.join(tmp, "sweep.json")
base = [kvindex, "replay", trace, "--threads", "1"]
# The ratios compare the same output: the table on stdout. Writing the full curve as JSON (a row
# at every capacity where a count changes) is timed on its own line.
curve_with_json = cpu_time(base + ["--curve", "--json", curve_json])
curve = cpu_time(base + ["--curve"])
steps = json.load(open(curve_json))["curve"]
working_set = json.load(open(curve_json))["reach"][0]["working_set"]
caps = sorted({max(1, round(working_set ** (k / 19))) for k in range(20)})
one = cpu_time(base + ["--capacity", str(caps[len(caps) // 2])])
sweep = cpu_time(base + ["--capacity", ",".join(map(str, caps))])
subprocess.run(base + ["--capacity", ",".join(map(str, caps)), "--json", sweep_json],
               stdout=subprocess.DEVNULL, check=True)
sim = {r["capacity"]: (r["prefix_hit_blocks"], r["any_hit_blocks"])
       for r in json.load(open(sweep_json))["results"]}


def at(c):
    best = (0, 0)
    for s in steps:
        if s["capacity"] <= c:
            best = (s["prefix_hit_blocks"], s["any_hit_blocks"])
    return best


agree = all(at(c) == sim[c] for c in caps)
result = {"commit": commit, "trace": os.path.basename(trace), "cores": os.cpu_count(),
          "load_average_1min": os.getloadavg()[0], "capacities": caps,
          "curve_cpu_s": curve, "curve_with_json_cpu_s": curve_with_json, "curve_json_rows": len(steps),
          "one_capacity_cpu_s": one, "sweep_cpu_s": sweep,
          "curve_vs_one": curve / one, "sweep_vs_curve": sweep / curve, "counts_agree": agree}
json.dump(result, open(out_path, "w"), indent=2)
print(f"--curve (every capacity)  : {curve * 1000:8.1f} ms CPU (median of {runs}); with --json "
      f"of all {len(steps)} curve rows {curve_with_json * 1000:.1f} ms")
print(f"one --capacity run        : {one * 1000:8.1f} ms CPU")
print(f"{len(caps)}-capacity sweep       : {sweep * 1000:8.1f} ms CPU")
print(f"ratios: curve / one run {curve / one:.2f}x; sweep / curve {sweep / curve:.2f}x; "
      f"counts agree at {len(caps)} capacities: {agree}")
print(f"raw: {out_path}")
sys.exit(0 if agree else 1)
PYEOF

# Simulation only (no parse, no output), from section 1's bench results: the curve against one lru
# configuration of the same instances, and against 20 of them (a 20-capacity sweep, estimated).
"$PY" - "bench/results/replay_bench-$commit.json" <<'PYEOF'
import json, sys
runs = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}


def cpu(name):
    for key in (name + "_median", name):
        if key in runs:
            return runs[key]["cpu_time"]
    return None


pairs = [("1 instance ", "BM_Replay_Curve/instances:1",
          "BM_Replay_Config/policy:0/capacity:10000/router:0/instances:1"),
         ("8 instances", "BM_Replay_Curve/instances:8",
          "BM_Replay_Config/policy:0/capacity:2000/router:0/instances:8")]
for label, curve, config in pairs:
    c, one = cpu(curve), cpu(config)
    if c is None or one is None:
        print(f"simulation only, {label}: missing from the bench results")
        continue
    print(f"simulation only, {label}: curve / one lru configuration {c / one:.2f}x; "
          f"20 configurations / curve {20 * one / c:.1f}x")
PYEOF
