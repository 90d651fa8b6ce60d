#!/usr/bin/env bash
# HTTP query latency under ingest (docs/benchmarks-http.md "Latency and CPU under ingest"):
# bench/http_load (open loop, latency from the scheduled send time) POSTs /query with 2,048-token
# prompts (128 blocks of 16) to `kvindex subscribe --http` whose index holds >= 1 M presences, while
# publish-fake streams 200 k blocks/s into the same process on a second source. Baselines, same rate
# and connections, same run: kvindex with no ingest (what the ingest costs the queries), and
# bench/http_floor, a server that does nothing, with and without the same ingest load on the machine
# (the machine's own floor: the generator, loopback TCP, thread wake-ups and the scheduling of the
# CPUs; on a small VM its p99 alone can exceed 1 ms). It also prints each server's process CPU per
# request sent (all threads, over the generator's run): kvindex's beside http_floor's shows what the
# HTTP stack costs beyond the answer itself (the mean server time per query).
#
# Usage: scripts/bench-http.sh [BUILD_DIR] [RATE] [DURATION_S] [CONNECTIONS]
#   defaults: build 5000 10 4 (env HTTP_MODE=pool the server's --http-mode, HTTP_THREADS=2 its
#   --http-threads; FILL_PROMPTS=8200,
#   STREAM_BPS=200000, STREAM_EPB=50 events per batch; PUB_NICE=19; OUT_SUFFIX names the result;
#   SAMPLES_DIR=DIR keeps each phase's per-request due time and latency as
#   DIR/{baseline,floor-idle,loaded,floor-loaded}.tsv; NO_INGEST=1 runs the two phases without
#   ingest only, whose CPU per request is the HTTP comparison, and leaves the loaded ones out of
#   the results). Raw results:
#   bench/results/http-<short commit><OUT_SUFFIX>.json.
#
# The streaming publish-fake stands in for the engines, which run on other machines: it runs at
# nice PUB_NICE (default 19) so that on a small machine its ~0.25 core does not preempt the server
# under test; the script still checks that every batch it sent was applied, with no gap and none
# lost. PUB_NICE=0 gives the co-located worst case. The load generator runs at normal priority.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RATE=${2:-5000}
DURATION=${3:-10}
CONNS=${4:-4}
KVINDEX=$BUILD/tools/kvindex/kvindex
LOAD=$BUILD/bench/http_load
FLOOR=$BUILD/bench/http_floor
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
commit=$(git rev-parse --short=12 HEAD)
out=bench/results/http-$commit${OUT_SUFFIX:-}.json
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

fill_port=$((20000 + RANDOM % 12000))  # below the kernel's ephemeral range (32768-)
stream_port=$((fill_port + 1))
http_port=$((fill_port + 2))
floor_port=$((fill_port + 3))
FILL_PROMPTS=${FILL_PROMPTS:-8200}     # x 128 blocks = 1,049,600 presences
STREAM_BPS=${STREAM_BPS:-200000}     # blocks/s: 4,000 batches/s of 50 one-block events
PUB_NICE=${PUB_NICE:-19}             # the streaming publisher's niceness (it stands in for remote engines)
STREAM_EPB=${STREAM_EPB:-50}         # one-block events per batch (500: 400 batches/s, an engine step every 2.5 ms)
"$KVINDEX" subscribe \
  --source "fill=vllm@tcp://127.0.0.1:$fill_port,model=fake-model,block-size=16" \
  --source "stream=vllm@tcp://127.0.0.1:$stream_port,model=stream-model,block-size=16" \
  --http "127.0.0.1:$http_port" --http-mode "${HTTP_MODE:-pool}" --http-threads "${HTTP_THREADS:-2}" \
  --stats-interval 0 \
  >"$tmp/sub.out" 2>"$tmp/sub.err" &
sub=$!
pids+=("$sub")
"$FLOOR" --port "$floor_port" >"$tmp/floor.out" 2>&1 &
floor=$!
pids+=("$floor")

metric() {  # metric NAME_PREFIX: the first sample's value
  "$PY" - "$http_port" "$1" <<'PYEOF'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
for line in text.splitlines():
    if line.startswith(sys.argv[2]):
        print(int(float(line.split()[-1]))); break
else:
    print(0)
PYEOF
}

echo "== fill: $FILL_PROMPTS prompts of 2,048 tokens" >&2
"$KVINDEX" publish-fake --format vllm --blast --count "$FILL_PROMPTS" --events-per-batch 1 \
  --block-size 16 --prompt-blocks 128 --prefix-blocks 0 --capacity 100000000 --seed 11 \
  --port "$fill_port" --wait-subscribers 1 --wait-timeout 20 --linger 1 \
  --emit-queries "$tmp/q.jsonl" >/dev/null 2>"$tmp/fill.err"
for _ in $(seq 1 600); do
  presences=$(metric kvindex_index_presences)
  [ "$presences" -ge $((FILL_PROMPTS * 128)) ] && break
  sleep 0.5
done
echo "presences: $presences" >&2
# Bodies: the final queries (the latest prompt, a shared prefix, an unseen prompt), 2,048 tokens.
"$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    q = json.loads(l)
    if "after" not in q and len(q["query"]["token_ids"]) == 2048:
        print(json.dumps(q["query"]))
' "$tmp/q.jsonl" >"$tmp/bodies.jsonl"
[ -s "$tmp/bodies.jsonl" ] || { echo "no 2,048-token query bodies" >&2; exit 1; }

# The server's own time per query (parse, match, render): /metrics histogram sum and count.
server_time() {
  echo "$(metric kvindex_http_query_duration_seconds_count) $("$PY" - "$http_port" <<'PYEOF'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print([l.split()[-1] for l in text.splitlines() if l.startswith("kvindex_http_query_duration_seconds_sum")][0])
PYEOF
)"
}
cpu_of() {  # utime + stime of a live process, seconds (as in bench-ingest.sh)
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
kernel_monitor_cpu() {  # CPU seconds used so far by the kernel's DAMON threads (kdamond.N), if any
  local total=0 p
  for p in $(pgrep -x 'kdamond\.[0-9]+' || true); do
    total=$(awk -v t="$total" '{print t + $1 / 1e9}' "/proc/$p/schedstat" 2>/dev/null || echo "$total")
  done
  echo "$total"
}
load() {  # load PORT PHASE PID: one generator run, results in $tmp/PHASE.json (and SAMPLES_DIR);
  # the server's CPU (process PID) over the run in $tmp/PHASE.cpu, seconds; the kernel's DAMON
  # threads' CPU over the run in $tmp/PHASE.kdamond (docs/benchmarks-machine.md)
  local before kbefore
  before=$(cpu_of "$3")
  kbefore=$(kernel_monitor_cpu)
  "$LOAD" --port "$1" --bodies "$tmp/bodies.jsonl" --rate "$RATE" --duration "$DURATION" \
    --connections "$CONNS" --out "$tmp/$2.json" ${SAMPLES_DIR:+--samples "$SAMPLES_DIR/$2.tsv"} >&2 || true
  awk -v a="$before" -v b="$(cpu_of "$3")" 'BEGIN {print b - a}' >"$tmp/$2.cpu"
  awk -v a="$kbefore" -v b="$(kernel_monitor_cpu)" 'BEGIN {print b - a}' >"$tmp/$2.kdamond"
}
t0=$(server_time)
echo "== baseline: $CONNS connections, no ingest" >&2
load "$http_port" baseline "$sub"

t1=$(server_time)
echo "== floor: http_floor, $CONNS connections, no ingest" >&2
load "$floor_port" floor-idle "$floor"
if [ "${NO_INGEST:-0}" = 1 ]; then
  t2=$(server_time)
  gaps=0 lost=0 applied=0 batches=0
else
echo "== loaded: $CONNS connections, publish-fake (nice $PUB_NICE) streaming $STREAM_BPS blocks/s in batches of $STREAM_EPB" >&2
gaps_before=$(metric 'kvindex_source_gaps_total{source="stream"')
batches=$(( (STREAM_BPS / STREAM_EPB) * (2 * DURATION + 6) ))  # covers both loaded phases
nice -n "$PUB_NICE" "$KVINDEX" publish-fake --format vllm --count "$batches" --rate $((STREAM_BPS / STREAM_EPB)) \
  --events-per-batch "$STREAM_EPB" --block-size 16 --prompt-blocks 1 --prefix-blocks 0 \
  --capacity 100000000 --seed 12 --model stream-model --port "$stream_port" \
  --wait-subscribers 1 --wait-timeout 20 --linger 1 --json "$tmp/stream.json" \
  >/dev/null 2>"$tmp/stream.err" &
pub=$!
pids+=("$pub")
# publish-fake generates every batch before its first send (tens of seconds of one core for
# millions of events): start the load only once the stream's batches arrive, so the measured
# window sees the 200 k blocks/s ingest and not the generator's start-up.
for _ in $(seq 1 600); do
  [ "$(metric 'kvindex_source_applied_total{source="stream"')" -gt 0 ] && break
  sleep 0.5
done
sleep 1  # the stream is at its rate
load "$http_port" loaded "$sub"
t2=$(server_time)
echo "== floor: http_floor, $CONNS connections, same ingest" >&2
load "$floor_port" floor-loaded "$floor"
wait "$pub" || true
sleep 1
gaps=$(( $(metric 'kvindex_source_gaps_total{source="stream"') - gaps_before ))
lost=$(metric 'kvindex_source_lost_total{source="stream"')
applied=$(metric 'kvindex_source_applied_total{source="stream"')
fi
kill -TERM "$sub"; wait "$sub" || true

"$PY" - "$tmp" "$out" "$commit" "$presences" "$gaps" "$lost" "$applied" "$batches" "$t0" "$t1" "$t2" "$PUB_NICE" "$STREAM_EPB" <<'PYEOF'
import json, os, sys
tmp, out, commit = sys.argv[1:4]
presences, gaps, lost, applied, sent = map(int, sys.argv[4:9])
t0, t1, t2 = [tuple(map(float, t.split())) for t in sys.argv[9:12]]
pub_nice, epb = int(sys.argv[12]), int(sys.argv[13])
def server_mean_us(a, b):
    n = b[0] - a[0]
    return (b[1] - a[1]) / n * 1e6 if n else None
base = json.load(open(tmp + "/baseline.json"))
floor_idle = json.load(open(tmp + "/floor-idle.json"))
ingest = os.path.exists(tmp + "/loaded.json")  # NO_INGEST=1: the two phases without ingest only
loaded = json.load(open(tmp + "/loaded.json")) if ingest else None
stream = json.load(open(tmp + "/stream.json")) if ingest else None
floor_loaded = json.load(open(tmp + "/floor-loaded.json")) if ingest else None
def cpu_us_per_request(phase, answers):
    # the server process's CPU over the generator's run (warm-up included), per request sent
    sent = answers["rate"] * (answers["warmup_s"] + answers["duration_s"])
    return float(open(tmp + "/" + phase + ".cpu").read()) * 1e6 / sent
cpu = {"no_ingest": cpu_us_per_request("baseline", base),
       "floor_no_ingest": cpu_us_per_request("floor-idle", floor_idle)}
if ingest:
    cpu["loaded_with_ingest"] = cpu_us_per_request("loaded", loaded)
    cpu["floor_loaded"] = cpu_us_per_request("floor-loaded", floor_loaded)
phase_files = {"baseline": base, "floor-idle": floor_idle, "loaded": loaded, "floor-loaded": floor_loaded}
kdamond_ms = {k: float(open(tmp + "/" + k + ".kdamond").read()) * 1e3
              for k, v in phase_files.items() if v is not None}
def clear_ratio(a, b):
    return a["p99_us_clear"] / b["p99_us_clear"] if a and b and b.get("p99_us_clear") else None
result = {"commit": commit, "http_mode": os.environ.get("HTTP_MODE", "pool"),
          "http_threads": int(os.environ.get("HTTP_THREADS", "2")),
          "presences": presences, "baseline": base, "loaded": loaded,
          "floor_no_ingest": floor_idle, "floor_loaded": floor_loaded,
          "ingest": {"batches_sent": sent, "applied": applied, "gaps": gaps, "lost": lost,
                     "events_per_batch": epb, "publish_fake_nice": pub_nice, "publish_fake": stream}
                    if ingest else None,
          "server_mean_us": {"baseline": server_mean_us(t0, t1),
                             "loaded": server_mean_us(t1, t2) if ingest else None},
          "server_cpu_us_per_request": cpu,
          "ratio_cpu_over_floor_no_ingest": cpu["no_ingest"] / cpu["floor_no_ingest"],
          "ratio_p99_loaded_over_baseline": loaded["p99_us"] / base["p99_us"] if ingest and base["p99_us"] else None,
          "ratio_p99_over_floor": {"no_ingest": base["p99_us"] / floor_idle["p99_us"],
                                   "loaded": loaded["p99_us"] / floor_loaded["p99_us"] if ingest else None},
          "ratio_p99_clear_over_floor": {"no_ingest": clear_ratio(base, floor_idle),
                                         "loaded": clear_ratio(loaded, floor_loaded)},
          "kdamond_cpu_ms": kdamond_ms,
          "cpus": os.cpu_count(), "loadavg_after": open("/proc/loadavg").read().split()[:3]}
json.dump(result, open(out, "w"), indent=1)
print("%-22s %8s %8s %8s %8s %8s %7s %9s %9s %10s %8s" % ("run", "rate", "p50 us", "p99 us", "p999 us", "errors",
      "stalls", "stall ms", "max ms", "clear p99", "kdamond"))
phases = [("no ingest %d conn" % base["connections"], base, "baseline"), ("floor, no ingest", floor_idle, "floor-idle")]
if ingest:
    phases += [("loaded %d conn" % loaded["connections"], loaded, "loaded"), ("floor, loaded", floor_loaded, "floor-loaded")]
for name, r, key in phases:
    print("%-22s %8.0f %8.1f %8.1f %8.1f %8d %7d %9.1f %9.1f %10.1f %6.0fms" % (name, r["achieved_rate"], r["p50_us"],
          r["p99_us"], r["p999_us"], r["errors"], r["machine_stalls"], r["machine_stalled_ms"],
          r["machine_stall_max_us"] / 1e3, r["p99_us_clear"], kdamond_ms[key]))
print("server time per query (mean, us): baseline %s, loaded %s" % (result["server_mean_us"]["baseline"], result["server_mean_us"]["loaded"]))
print("server process CPU per request (us): kvindex %.1f, floor %.1f (ratio %.2f)"
      % (cpu["no_ingest"], cpu["floor_no_ingest"], cpu["no_ingest"] / cpu["floor_no_ingest"]))
print("p99 / floor p99: no ingest %.2f (clear of machine stalls %.2f)"
      % (result["ratio_p99_over_floor"]["no_ingest"], result["ratio_p99_clear_over_floor"]["no_ingest"] or 0))
if ingest:
    print("loaded, ingest included: kvindex %.1f, floor %.1f us CPU per request; p99 / floor p99 %.2f (clear %.2f)"
          % (cpu["loaded_with_ingest"], cpu["floor_loaded"], result["ratio_p99_over_floor"]["loaded"],
             result["ratio_p99_clear_over_floor"]["loaded"] or 0))
    print("presences %d; stream applied %d of %d batches, gaps %d, lost %d" % (presences, applied, sent, gaps, lost))
print("wrote", out)
PYEOF
