#!/usr/bin/env bash
# The event journal measured against direct subscribe (docs/benchmarks-journal.md), on loopback
# with its own nats-server -js (a fresh temporary store per run, stopped after it):
#   throughput  publish-fake --blast -> subscribe --journal -> JetStream -> subscribe --from-journal,
#               blocks/s until the replica has applied the whole journal (its /healthz applied_seq),
#               beside publish-fake --blast -> subscribe (no journal), the same publish-fake
#               parameters; repetitions interleaved (direct, journal, direct, journal, ...).
#   lag         a steady RATE_BLOCKS blocks/s through the same path; the replica's
#               kvindex_journal_apply_lag_seconds histogram (ingester received -> replica applied),
#               p50 / p99 interpolated within its buckets.
#   latejoin    a journal of 1 M and of 10 M presences; replicas started after it is written, seconds
#               until ready (/healthz lag 0 at the journal's last sequence), beside `kvindex replay`
#               of the same journal exported as a capture (the same records applied from a file).
#               When `subscribe` accepts --snapshot-to-journal, the same again with the ingester
#               writing snapshots into JetStream (the with-snapshot variant); otherwise a note says it
#               was skipped.
# Prints a table per part; writes bench/results/journal-<short commit>[-<suffix>].json.
#
# Usage: scripts/bench-journal.sh [--help] [BUILD_DIR] [SCALE] [REPS]
#   BUILD_DIR (default build), SCALE divides every size (a smoke run), REPS repetitions (default 3).
# Environment: PARTS (default "throughput lag latejoin"); EPB events per batch (default 50; every
#   event stores one block); RATE_BLOCKS (default 200000) and LAG_SECONDS (default 20) for `lag`;
#   SNAPSHOT_EVERY (default 2, seconds) for the with-snapshot variant; JOURNAL_BATCH (default 1:
#   the ingesters' --journal-batch); OUT_SUFFIX.
# Sizes: throughput 60,000 batches of 50 events (3 M blocks); late join 1 M and 10 M blocks.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi
BUILD=${1:-build}
SCALE=${2:-1}
REPS=${3:-3}
KVINDEX=$BUILD/tools/kvindex/kvindex
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
NATS_SERVER=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$KVINDEX" ] || { echo "bench-journal.sh: no $KVINDEX (build kvindex_cli first)" >&2; exit 2; }
[ -x "$NATS_SERVER" ] || { echo "bench-journal.sh: nats-server not found (scripts/setup.sh)" >&2; exit 2; }
EPB=${EPB:-50}
JOURNAL_BATCH=${JOURNAL_BATCH:-1}
commit=$(git rev-parse --short=12 HEAD)
out=bench/results/journal-$commit${OUT_SUFFIX:+-$OUT_SUFFIX}.json
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
: >"$tmp/rows.jsonl"

cpu_of() {  # utime + stime of a live process, seconds
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
now_ns() { date +%s%N; }
free_port() {  # the first of 5 free ports
  "$PY" - <<'PYEOF'
import random, socket
for _ in range(500):
    base = random.randint(20000, 32000)
    try:
        for p in range(base, base + 5):
            s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
        print(base); break
    except OSError:
        pass
PYEOF
}
wait_port() {
  "$PY" - "$1" <<'PYEOF'
import socket, sys, time
deadline = time.time() + 20
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.02)
sys.exit("port %s: nothing listens" % sys.argv[1])
PYEOF
}
healthz() { "$PY" -c 'import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1], timeout=5).read().decode())' "$1"; }

# Each run has its own ports: PORT (nats), PUB (publish-fake, +1 replay), H_ING and H_REP (HTTP).
alloc_ports() {
  local base
  base=$(free_port)
  PORT=$base PUB=$((base + 1)) H_ING=$((base + 3)) H_REP=$((base + 4))
}
# A nats-server -js of its own with a fresh store, for one run.
start_nats() {
  alloc_ports
  rm -rf "$tmp/js"
  "$NATS_SERVER" -js -sd "$tmp/js" -a 127.0.0.1 -p "$PORT" >"$tmp/nats.log" 2>&1 &
  NATS_PID=$!
  pids+=("$NATS_PID")
  wait_port "$PORT"
}
stop_nats() {
  kill -TERM "$NATS_PID" 2>/dev/null || true
  wait "$NATS_PID" 2>/dev/null || true
  rm -rf "$tmp/js"
}

# start_ingester NAME [ARGS...]: subscribe on the fake publisher's ports, with ARGS; sets ING.
start_ingester() {
  local name=$1
  shift
  "$KVINDEX" subscribe --source "fake-0=vllm@tcp://127.0.0.1:$PUB,model=fake-model,replay=tcp://127.0.0.1:$((PUB + 1))" \
    --http "127.0.0.1:$H_ING" --stats-interval 0.5 --json "$tmp/$name-ing.json" "$@" \
    >"$tmp/$name-ing.out" 2>"$tmp/$name-ing.err" &
  ING=$!
  pids+=("$ING")
  wait_port "$H_ING"
}
# start_replica NAME: subscribe --from-journal on this run's NATS; sets REP and REP_START_NS.
start_replica() {
  REP_START_NS=$(now_ns)
  "$KVINDEX" subscribe --from-journal "nats://127.0.0.1:$PORT" --http "127.0.0.1:$H_REP" \
    --stats-interval 0 --json "$tmp/$1-rep.json" >"$tmp/$1-rep.out" 2>"$tmp/$1-rep.err" &
  REP=$!
  pids+=("$REP")
}
# publish COUNT PACE...: publish-fake of COUNT EPB-event batches of new 1-block prompts.
publish() {
  local count=$1
  shift
  "$KVINDEX" publish-fake --format vllm "$@" --count "$count" --events-per-batch "$EPB" \
    --prompt-blocks 1 --prefix-blocks 0 --capacity 100000000 \
    --port "$PUB" --replay-port "$((PUB + 1))" --wait-subscribers 1 --wait-timeout 20 --linger 2 \
    --json "$tmp/pub.json" >/dev/null 2>"$tmp/pub.err" || { cat "$tmp/pub.err" >&2; exit 1; }
}
# wait_ingested NAME COUNT: until the ingester applied COUNT batches (status line), or made no
# progress for 5 s.
wait_ingested() {
  local last=-1 same=0 applied=0
  while [ "$same" -lt 10 ]; do
    applied=$(grep -o 'applied [0-9]*' "$tmp/$1-ing.err" | tail -1 | awk '{print $2}')
    applied=${applied:-0}
    [ "$applied" -ge "$2" ] && return 0
    sleep 0.5
    if [ "$applied" = "$last" ]; then same=$((same + 1)); else same=0; fi
    last=$applied
  done
}
# poll_until PORT FIELD COND... : polls /healthz of PORT (every 20 ms, up to 600 s) until its
# journal object satisfies the Python expression COND (over `j`); prints "<realtime ns of the
# first poll that did> <json of j>".
poll_until() {
  "$PY" - "$@" <<'PYEOF'
import http.client, json, sys, time
port, cond = sys.argv[1], sys.argv[2]
deadline = time.time() + 600
conn = None
while time.time() < deadline:
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=5)
        conn.request("GET", "/healthz")
        j = json.loads(conn.getresponse().read())
        t = time.time_ns()
        jj = j.get("journal", {})
        jj["blocks"] = j.get("blocks")
        if eval(cond, {}, {"j": jj}):
            print(t, json.dumps(jj))
            sys.exit(0)
    except (OSError, http.client.HTTPException, ValueError, KeyError):
        conn = None
    time.sleep(0.02)
sys.exit("port %s: never %s" % (port, cond))
PYEOF
}
# start_poller FILE PORT...: polls /healthz of each PORT every 25 ms in the background, one line
# per answer ("<port> <realtime ns> <json of its journal object>"), until stop_poller; sets POLLER.
start_poller() {
  "$PY" - "$@" <<'PYEOF' &
import http.client, json, sys, time
out, ports = open(sys.argv[1], "w"), sys.argv[2:]
conns = {}
while True:
    for port in ports:
        try:
            if port not in conns:
                conns[port] = http.client.HTTPConnection("127.0.0.1", int(port), timeout=5)
            conns[port].request("GET", "/healthz")
            j = json.loads(conns[port].getresponse().read())
            out.write("%s %d %s\n" % (port, time.time_ns(), json.dumps(j.get("journal", {}))))
        except (OSError, http.client.HTTPException, ValueError):
            conns.pop(port, None)
    out.flush()
    time.sleep(0.025)
PYEOF
  POLLER=$!
  pids+=("$POLLER")
}
stop_poller() {
  kill "$POLLER" 2>/dev/null || true
  wait "$POLLER" 2>/dev/null || true
}
# first_time FILE PORT COND: the realtime ns of the first answer of PORT in FILE whose journal
# object `j` satisfies the Python expression COND.
first_time() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, port, cond = sys.argv[1:]
for line in open(path):
    p, t, j = line.split(" ", 2)
    if p == port and eval(cond, {}, {"j": json.loads(j)}):
        print(t)
        sys.exit(0)
sys.exit("%s: no answer of %s with %s" % (path, port, cond))
PYEOF
}
# stop_proc PID: SIGTERM and wait.
stop_proc() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
# row PART NAME KEY=VALUE...: appends a result row (values: numbers, or JSON files with @path).
row() {
  "$PY" - "$@" >>"$tmp/rows.jsonl" <<'PYEOF'
import json, sys
r = {"part": sys.argv[1], "name": sys.argv[2]}
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    if v.startswith("@"):
        r[k] = json.load(open(v[1:]))
    else:
        try:
            r[k] = float(v) if "." in v or "e" in v else int(v)
        except ValueError:
            r[k] = v
print(json.dumps(r))
PYEOF
}
load() { cut -d' ' -f1 /proc/loadavg; }

# --- throughput ---------------------------------------------------------------------------------
tp_direct() {  # NAME COUNT
  local name=$1 count=$2 l0
  l0=$(load)
  alloc_ports
  start_ingester "$name"
  publish "$count" --blast
  wait_ingested "$name" "$count"
  local cpu
  cpu=$(cpu_of "$ING")
  stop_proc "$ING"
  row throughput "$name" path=direct batches="$count" epb="$EPB" ing_cpu_s="$cpu" load="$l0" \
    ing=@"$tmp/$name-ing.json" pub=@"$tmp/pub.json"
}
tp_journal() {  # NAME COUNT
  local name=$1 count=$2 l0
  l0=$(load)
  start_nats
  start_replica "$name"
  wait_port "$H_REP"
  start_ingester "$name" --journal "nats://127.0.0.1:$PORT" --journal-batch "$JOURNAL_BATCH"
  poll_until "$H_REP" 'j["connected"]' >/dev/null  # the replica follows the stream
  start_poller "$tmp/$name.poll" "$H_ING" "$H_REP"
  publish "$count" --blast
  wait_ingested "$name" "$count"
  local acked last applied
  acked=$(poll_until "$H_ING" 'j["connected"] and j["records_pending"] == 0')
  last=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["last_acked_seq"])' "$acked")
  poll_until "$H_REP" "j['applied_seq'] >= $last" >/dev/null
  sleep 0.1
  stop_poller
  acked=$(first_time "$tmp/$name.poll" "$H_ING" "j['last_acked_seq'] >= $last")
  applied=$(first_time "$tmp/$name.poll" "$H_REP" "j['applied_seq'] >= $last")
  local icpu rcpu ncpu
  icpu=$(cpu_of "$ING") rcpu=$(cpu_of "$REP") ncpu=$(cpu_of "$NATS_PID")
  stop_proc "$ING"
  stop_proc "$REP"
  stop_nats
  row throughput "$name" path=journal batches="$count" epb="$EPB" last_seq="$last" \
    journal_batch="$JOURNAL_BATCH" \
    acked_ns="$acked" applied_ns="$applied" ing_cpu_s="$icpu" rep_cpu_s="$rcpu" \
    nats_cpu_s="$ncpu" load="$l0" ing=@"$tmp/$name-ing.json" rep=@"$tmp/$name-rep.json" \
    pub=@"$tmp/pub.json"
}

# --- lag ----------------------------------------------------------------------------------------
lag_run() {  # NAME
  local name=$1 l0
  local rate=$(( ${RATE_BLOCKS:-200000} / EPB ))
  local count=$(( rate * ${LAG_SECONDS:-20} / SCALE ))
  l0=$(load)
  start_nats
  start_replica "$name"
  wait_port "$H_REP"
  start_ingester "$name" --journal "nats://127.0.0.1:$PORT" --journal-batch "$JOURNAL_BATCH"
  poll_until "$H_REP" 'j["connected"]' >/dev/null  # the replica follows the stream
  publish "$count" --rate "$rate" --hwm 1000000
  wait_ingested "$name" "$count"
  local acked last
  acked=$(poll_until "$H_ING" 'j["connected"] and j["records_pending"] == 0')
  last=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["last_acked_seq"])' "$acked")
  poll_until "$H_REP" "j['applied_seq'] >= $last" >/dev/null
  "$PY" -c 'import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode())' \
    "$H_REP" | grep '^kvindex_journal_apply_lag_seconds' >"$tmp/$name.lag"
  local icpu rcpu ncpu
  icpu=$(cpu_of "$ING") rcpu=$(cpu_of "$REP") ncpu=$(cpu_of "$NATS_PID")
  stop_proc "$ING"
  stop_proc "$REP"
  stop_nats
  "$PY" - "$tmp/$name.lag" >"$tmp/$name.lag.json" <<'PYEOF'
import json, math, sys
b, count, total = [], 0, 0.0
for line in open(sys.argv[1]):
    name, value = line.rsplit(" ", 1)
    if "_bucket{" in name:
        le = name.split('le="', 1)[1].split('"', 1)[0]
        b.append([math.inf if le == "+Inf" else float(le), float(value)])
    elif name.endswith("_count"):
        count = float(value)
    elif name.endswith("_sum"):
        total = float(value)
def quantile(q):  # linear within the bucket, as Prometheus' histogram_quantile
    rank, lo, below = q * count, 0.0, 0.0
    for le, n in b:
        if n >= rank:
            if math.isinf(le):
                return lo
            return lo + (le - lo) * ((rank - below) / max(n - below, 1e-9))
        lo, below = le, n
    return lo
def bucket_of(q):  # the upper bound of the bucket holding the quantile
    return next((le for le, n in b if n >= q * count), math.inf)
print(json.dumps({"count": count, "sum_s": total, "p50_s": quantile(0.5), "p99_s": quantile(0.99),
                  "p50_bucket_le": bucket_of(0.5), "p99_bucket_le": bucket_of(0.99),
                  "buckets": [[str(le), n] for le, n in b]}))
PYEOF
  row lag "$name" batches="$count" epb="$EPB" rate_batches="$rate" last_seq="$last" \
    journal_batch="$JOURNAL_BATCH" \
    ing_cpu_s="$icpu" rep_cpu_s="$rcpu" nats_cpu_s="$ncpu" load="$l0" \
    lag=@"$tmp/$name.lag.json" ing=@"$tmp/$name-ing.json" pub=@"$tmp/pub.json"
}

# --- late join ----------------------------------------------------------------------------------
latejoin() {  # VARIANT(plain|snapshot) BLOCKS
  local variant=$1 blocks=$2
  local count=$(( blocks / EPB / SCALE ))
  local name=lj-$variant-$blocks extra=()
  [ "$variant" = snapshot ] && extra=(--snapshot-to-journal "${SNAPSHOT_EVERY:-2}")
  start_nats
  start_ingester "$name" --journal "nats://127.0.0.1:$PORT" --journal-batch "$JOURNAL_BATCH" \
    "${extra[@]}"
  publish "$count" --blast
  wait_ingested "$name" "$count"
  local acked last
  acked=$(poll_until "$H_ING" 'j["connected"] and j["records_pending"] == 0')
  last=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["last_acked_seq"])' "$acked")
  # The with-snapshot variant: let the ingester write at least one snapshot of the whole journal.
  [ "$variant" = snapshot ] && sleep $(( 2 * ${SNAPSHOT_EVERY:-2} + 2 ))
  stop_proc "$ING"
  local rep l0 ready rcpu
  for rep in $(seq 1 "$REPS"); do
    l0=$(load)
    start_replica "$name-r$rep"
    ready=$(poll_until "$H_REP" "j.get('lag') == 0 and j.get('applied_seq', 0) >= $last")
    rcpu=$(cpu_of "$REP")
    stop_proc "$REP"
    echo "${ready#* }" >"$tmp/ready.json"
    row latejoin "$name-r$rep" variant="$variant" blocks="$(( count * EPB ))" last_seq="$last" \
      ready_s="$("$PY" -c "print((${ready%% *} - $REP_START_NS) / 1e9)")" rep_cpu_s="$rcpu" \
      load="$l0" healthz=@"$tmp/ready.json"
  done
  if [ "$variant" = plain ]; then
    # The baseline: the same records applied from a file (`replay` of the exported journal).
    "$KVINDEX" record --from-journal "nats://127.0.0.1:$PORT" --out "$tmp/j.kvcap" --force \
      >/dev/null 2>"$tmp/export.err" || { cat "$tmp/export.err" >&2; exit 1; }
    local t0 t1
    for rep in $(seq 1 "$REPS"); do
      l0=$(load)
      t0=$(now_ns)
      /usr/bin/time -f "%U %S" -o "$tmp/replay.time" "$KVINDEX" replay "$tmp/j.kvcap" \
        >/dev/null 2>"$tmp/replay.err" || { cat "$tmp/replay.err" >&2; exit 1; }
      t1=$(now_ns)
      row latejoin "$name-replay-r$rep" variant=replay blocks="$(( count * EPB ))" \
        ready_s="$("$PY" -c "print(($t1 - $t0) / 1e9)")" \
        rep_cpu_s="$(awk '{print $1 + $2}' "$tmp/replay.time")" load="$l0"
    done
    rm -f "$tmp"/j.kvcap*
  fi
  stop_nats
}

# --- runs ---------------------------------------------------------------------------------------
for part in ${PARTS:-throughput lag latejoin}; do
  case $part in
    throughput)
      for rep in $(seq 1 "$REPS"); do
        tp_direct "tp-direct-r$rep" $(( 3000000 / EPB / SCALE ))
        tp_journal "tp-journal-r$rep" $(( 3000000 / EPB / SCALE ))
      done ;;
    lag)
      for rep in $(seq 1 "$REPS"); do lag_run "lag-r$rep"; done ;;
    latejoin)
      snapshot=0
      "$KVINDEX" subscribe --help 2>/dev/null | grep -q -- '--snapshot-to-journal' && snapshot=1
      for blocks in 1000000 10000000; do
        latejoin plain "$blocks"
        if [ "$snapshot" = 1 ]; then
          latejoin snapshot "$blocks"
        fi
      done
      [ "$snapshot" = 1 ] || echo "latejoin: with-snapshot variant skipped: this kvindex's subscribe has no --snapshot-to-journal" ;;
    *) echo "bench-journal.sh: unknown part '$part' in PARTS" >&2; exit 2 ;;
  esac
done

"$PY" - "$tmp/rows.jsonl" "$out" "$commit" <<'PYEOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
doc = {"bench": "scripts/bench-journal.sh", "commit": sys.argv[3], "cpus": os.cpu_count(),
       "runs": rows}
med = statistics.median
tp = [r for r in rows if r["part"] == "throughput"]
if tp:
    print("throughput (%d-event batches of 1-block events; wall clock, loaded machine: medians)"
          % tp[0]["epb"])
    print("%-9s %5s %12s %14s %9s %9s %9s %9s %9s %9s" % ("path", "runs", "blocks", "blocks/s",
          "ing CPU", "rep CPU", "nats CPU", "load", "zmq lost", "jrnl lost"))
    for r in tp:
        ing = r["ing"]
        blocks = ing["total"]["events"]
        r["blocks"] = blocks
        start = ing["first_message_ns"]
        end = ing["last_message_ns"] if r["path"] == "direct" else r["applied_ns"]
        r["seconds"] = max(1, end - start) / 1e9
        r["blocks_per_s"] = blocks / r["seconds"]
        if r["path"] == "journal":
            r["ingest_blocks_per_s"] = blocks / (max(1, ing["last_message_ns"] - start) / 1e9)
            r["acked_blocks_per_s"] = blocks / (max(1, r["acked_ns"] - start) / 1e9)
    out = {}
    for path in ("direct", "journal"):
        rs = [r for r in tp if r["path"] == path]
        if not rs:
            continue
        out[path] = med(r["blocks_per_s"] for r in rs)
        print("%-9s %5d %12d %14.0f %9.2f %9s %9s %9.2f %9d %9s" % (path, len(rs),
              med(r["blocks"] for r in rs), out[path], med(r["ing_cpu_s"] for r in rs),
              "%.2f" % med(r["rep_cpu_s"] for r in rs) if path == "journal" else "-",
              "%.2f" % med(r["nats_cpu_s"] for r in rs) if path == "journal" else "-",
              med(r["load"] for r in rs), sum(r["ing"]["total"]["lost"] for r in rs),
              sum(r["ing"]["journal"]["lost_records"] for r in rs) if path == "journal" else "-"))
    js = [r for r in tp if r["path"] == "journal"]
    if js:
        print("journal path: ingester received at %.0f blocks/s, JetStream acked at %.0f, replica "
              "applied at %.0f (medians)" % (med(r["ingest_blocks_per_s"] for r in js),
              med(r["acked_blocks_per_s"] for r in js), med(r["blocks_per_s"] for r in js)))
    if len(out) == 2:
        pairs = [j["blocks_per_s"] / d["blocks_per_s"] for d, j in
                 zip([r for r in tp if r["path"] == "direct"], js)]
        doc["throughput"] = {"direct_blocks_per_s": out["direct"], "journal_blocks_per_s": out["journal"],
                             "ratio_of_medians": out["journal"] / out["direct"], "ratios": pairs}
        print("journal / direct: %.3f (medians); per repetition %s; targets >= 0.5 and >= 500000 "
              "blocks/s" % (out["journal"] / out["direct"], " ".join("%.3f" % x for x in pairs)))
lag = [r for r in rows if r["part"] == "lag"]
if lag:
    print("lag at %d blocks/s (%d-event batches): ingester received -> replica applied"
          % (lag[0]["rate_batches"] * lag[0]["epb"], lag[0]["epb"]))
    for r in lag:
        ing = r["ing"]
        r["ingest_blocks_per_s"] = ing["total"]["events"] / (max(1, ing["last_message_ns"] - ing["first_message_ns"]) / 1e9)
        l = r["lag"]
        print("  %-7s %7d batches  p50 %7.2f ms (bucket <= %s)  p99 %7.2f ms (bucket <= %s)  "
              "received at %.0f blocks/s, load %.2f" % (r["name"], l["count"], 1e3 * l["p50_s"],
              l["p50_bucket_le"], 1e3 * l["p99_s"], l["p99_bucket_le"], r["ingest_blocks_per_s"], r["load"]))
    p50 = med(r["lag"]["p50_s"] for r in lag)
    p99 = med(r["lag"]["p99_s"] for r in lag)
    doc["lag"] = {"p50_s": p50, "p99_s": p99, "p99_over_target": p99 / 0.05}
    print("lag: median p50 %.2f ms, p99 %.2f ms (target p99 <= 50 ms: %.2fx of it)" % (1e3 * p50, 1e3 * p99, p99 / 0.05))
lj = [r for r in rows if r["part"] == "latejoin"]
if lj:
    print("late join: seconds until a replica started after the journal was written is ready (lag 0)")
    groups = {}
    for r in lj:
        groups.setdefault((r["blocks"], r["variant"]), []).append(r)
    doc["latejoin"] = []
    for (blocks, variant), rs in sorted(groups.items()):
        s = med(r["ready_s"] for r in rs)
        base = groups.get((blocks, "replay"))
        ratio = s / med(r["ready_s"] for r in base) if base and variant != "replay" else None
        doc["latejoin"].append({"blocks": blocks, "variant": variant, "ready_s": s, "over_replay": ratio})
        print("  %9d blocks %-9s %3d runs  %8.2f s  CPU %7.2f s%s" % (blocks, variant, len(rs), s,
              med(r["rep_cpu_s"] for r in rs), "  (%.2fx the replay of the same records)" % ratio if ratio else ""))
json.dump(doc, open(sys.argv[2], "w"), indent=1)
print("raw: " + sys.argv[2])
PYEOF
