#!/usr/bin/env bash
# ZMQ ingest on loopback (docs/benchmarks.md "Ingest"): `publish-fake --blast` ->
# `kvindex subscribe` (live index), and the same with `subscribe --record`. Prints blocks/s,
# batches/s, gaps recovered, batches lost and CPU seconds per process; writes
# bench/results/ingest-<short commit>.json.
#
# Usage: scripts/bench-ingest.sh [BUILD_DIR] [SCALE] [REPS]
#   SCALE divides the sizes (a smoke run); REPS repetitions of each run (default 3, medians).
# Snapshots: RUNS="50ev-q 50ev-snap 1ev-q 1ev-snap" runs the subscriber with --http and
#   bench/http_load POSTing /query at QUERY_RATE (default 500/s, 2 connections) for the first
#   QUERY_S seconds (default 8) of each run's stream, without (-q) and with (-snap) --snapshot-dir (a
#   temporary folder) --snapshot-interval SNAP_INTERVAL (default 5): the same invocation otherwise.
#   It prints the -snap/-q ratios of the rate and of the query p99, the snapshots written and the
#   longest writer pause they logged.
# Environment: RUNS (default "50ev 50ev-rec 1ev 1ev-rec") picks and orders the runs of each
#   repetition. 50ev-pair / 1ev-pair: one publisher, two subscribers at once, one of them with
#   --record: both see the same stream in the same seconds, so their ratio is free of the drift
#   between runs that a shared machine adds (the pair shares the CPUs, so its rates are lower).
#   RECORD_ARGS adds subscriber flags to the --record runs (e.g. "--fsync-interval 0.1");
#   OUT_SUFFIX names the results file ingest-<commit>-<suffix>.json. RATE=N paces the publisher at
#   N batches/s instead of --blast: at a rate every subscriber keeps up with, the pairs' "CPU per
#   block" is what recording costs at that live rate (their rate ratio is then ~1 by construction).
#   PUB_NICE=N runs the publisher at niceness N (default 0): on a 2-core machine the blasting
#   publisher takes a whole core, so niceness tells the subscriber's own contention from the
#   publisher's.
# Sizes: 50-event batches of 1-block events, 200,000 batches (10 M blocks); 1-event batches,
# 1,000,000 batches. Rates are over the subscriber's first-to-last received message; blocks are
# applied events (each event stores one block: --prompt-blocks 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SCALE=${2:-1}
REPS=${3:-3}
KVINDEX=$BUILD/tools/kvindex/kvindex
LOAD=$BUILD/bench/http_load
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
commit=$(git rev-parse --short=12 HEAD)
out=bench/results/ingest-$commit${OUT_SUFFIX:+-$OUT_SUFFIX}.json
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

cpu_of() {  # utime + stime of a live process, seconds
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}

# Query bodies for the -q / -snap runs: 64 prompts of 8 blocks of 16 random tokens.
"$PY" -c '
import json, random
r = random.Random(7)
for _ in range(64):
    print(json.dumps({"model": "fake-model", "token_ids": [r.randrange(150000) for _ in range(128)]}))
' >"$tmp/bodies.jsonl"

# Runs one publisher and one or more subscribers on it. Arguments: events_per_batch batches, then
# NAME:MODE per subscriber (MODE 0 plain, 1 with --record, q with --http and a query load, s the
# same with --snapshot-dir). Appends one row per subscriber.
run_subs() {
  local epb=$1 count=$2
  shift 2
  local port=$((20000 + RANDOM % 12000))  # below the ephemeral range (32768-)
  local rport=$((port + 1))
  local names=() subs=() loads=() spec name record
  for spec in "$@"; do
    name=${spec%%:*}
    record=${spec##*:}
    local rec_args=()
    # shellcheck disable=SC2206  # RECORD_ARGS is split on purpose
    [ "$record" = 1 ] && rec_args=(--record "$tmp/$name.kvcap" --force ${RECORD_ARGS:-})
    local hport=$((port + 2 + ${#names[@]}))
    case $record in
      q) rec_args=(--http "127.0.0.1:$hport" --http-threads 1) ;;
      s) rec_args=(--http "127.0.0.1:$hport" --http-threads 1 --snapshot-dir "$tmp/$name-snaps"
                   --snapshot-interval "${SNAP_INTERVAL:-5}") ;;
    esac
    local log=()
    # The snapshot keeper logs each snapshot's pauses at info.
    if [ "$record" = q ] || [ "$record" = s ]; then log=(--log-level info); fi
    "$KVINDEX" "${log[@]}" subscribe --source "fake-0=vllm@tcp://127.0.0.1:$port,model=fake-model,replay=tcp://127.0.0.1:$rport" \
      --stats-interval 0.5 --json "$tmp/$name-sub.json" "${rec_args[@]}" \
      >"$tmp/$name-sub.out" 2>"$tmp/$name-sub.err" &
    subs+=("$!")
    pids+=("$!")
    names+=("$name")
    if [ "$record" = q ] || [ "$record" = s ]; then
      local up=0
      for _ in $(seq 1 100); do
        "$PY" -c 'import sys, urllib.request; urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=1)' \
          "$hport" 2>/dev/null && { up=1; break; }
        sleep 0.1
      done
      [ "$up" = 1 ] || { echo "bench-ingest.sh: $name: no HTTP server" >&2; exit 1; }
      # The queries start with the stream (the publisher first builds its events).
      (for _ in $(seq 1 1200); do
         grep -q 'applied [1-9]' "$tmp/$name-sub.err" 2>/dev/null && break
         sleep 0.1
       done
       exec "$LOAD" --port "$hport" --bodies "$tmp/bodies.jsonl" --rate "${QUERY_RATE:-500}" \
         --duration "${QUERY_S:-8}" --connections 2 --out "$tmp/$name-load.json") \
        >"$tmp/$name-load.out" 2>&1 &
      loads+=("$!")
      pids+=("$!")
    fi
  done
  local pub=${names[0]}
  local pace=(--blast)
  [ -n "${RATE:-}" ] && pace=(--rate "$RATE" --hwm 1000000)
  /usr/bin/time -f "%U %S" -o "$tmp/$pub-pub.time" nice -n "${PUB_NICE:-0}" \
    "$KVINDEX" publish-fake --format vllm "${pace[@]}" --count "$count" --events-per-batch "$epb" \
    --prompt-blocks 1 --prefix-blocks 0 --capacity 100000000 \
    --port "$port" --replay-port "$rport" --wait-subscribers "${#names[@]}" --wait-timeout 20 --linger 3 \
    --json "$tmp/$pub-pub.json" >/dev/null 2>"$tmp/$pub-pub.err" || { cat "$tmp/$pub-pub.err" >&2; exit 1; }
  local i
  for i in "${!names[@]}"; do
    name=${names[$i]}
    # Wait until the subscriber has applied everything (or stops progressing for 3 s).
    local last=-1 same=0 applied=0
    while [ "$same" -lt 6 ]; do
      applied=$(grep -o 'applied [0-9]*' "$tmp/$name-sub.err" | tail -1 | awk '{print $2}')
      applied=${applied:-0}
      [ "$applied" -ge "$count" ] && break
      sleep 0.5
      if [ "$applied" = "$last" ]; then same=$((same + 1)); else same=0; fi
      last=$applied
    done
    local sub_cpu
    sub_cpu=$(cpu_of "${subs[$i]}")
    for l in "${loads[@]}"; do wait "$l" || true; done
    loads=()
    kill -TERM "${subs[$i]}"
    wait "${subs[$i]}" || true
    record=0
    [ -e "$tmp/$name.kvcap" ] && record=1
    "$PY" - "$name" "$epb" "$count" "$record" "$sub_cpu" "$tmp/$name-sub.json" "$tmp/$pub-pub.json" \
        "$tmp/$pub-pub.time" "${#names[@]}" "$tmp/$name-load.json" "$tmp/$name-sub.err" \
        >>"$tmp/rows.jsonl" <<'PYEOF'
import json, os, re, sys
name, epb, count, record, sub_cpu, subj, pubj, pubt, subscribers, loadj, suberr = sys.argv[1:]
s = json.load(open(subj)); p = json.load(open(pubj))
query = json.load(open(loadj)) if os.path.exists(loadj) else None
# The snapshot keeper's log lines: "... writer paused P us at the point and M us at most (C us
# CPU, ...)": wall clock, and the writer thread's CPU time for the longest piece.
found = re.findall(r"writer paused (\d+) us at the point and (\d+) us at most \((\d+) us CPU",
                   open(suberr).read())
pauses = [(int(a), int(b)) for a, b, c in found]
cpu_pauses = [int(c) for a, b, c in found]
t = s["total"]
span = max(1, s["last_message_ns"] - s["first_message_ns"]) / 1e9
u, st = map(float, open(pubt).read().split()[-2:])
print(json.dumps({"name": name, "events_per_batch": int(epb), "batches_sent": int(count),
    "record": record == "1", "subscribers": int(subscribers), "applied": t["applied"],
    "events": t["events"], "blocks": t["events"], "span_s": span,
    "batches_per_s": t["applied"] / span, "blocks_per_s": t["events"] / span, "gaps": t["gaps"],
    "recovered": t["recovered"], "lost": t["lost"], "malformed": t["malformed"],
    "subscriber_cpu_s": float(sub_cpu),
    "query": query, "query_p99_us": query["p99_us"] if query else None,
    "snapshots": len(pauses), "snapshot_pause_max_us": max([max(a, b) for a, b in pauses], default=0),
    "snapshot_piece_cpu_max_us": max(cpu_pauses, default=0),
    "subscriber_cpu_us_per_block": float(sub_cpu) * 1e6 / max(1, t["events"]),
    "publisher_cpu_s": u + st, "publisher": p}))
PYEOF
  done
}

b50=$((200000 / SCALE))
b1=$((1000000 / SCALE))
for rep in $(seq 1 "$REPS"); do
  for run in ${RUNS:-50ev 50ev-rec 1ev 1ev-rec}; do
    case $run in
      50ev) run_subs 50 "$b50" "50ev-r$rep:0" ;;
      50ev-rec) run_subs 50 "$b50" "50ev-rec-r$rep:1" ;;
      1ev) run_subs 1 "$b1" "1ev-r$rep:0" ;;
      1ev-rec) run_subs 1 "$b1" "1ev-rec-r$rep:1" ;;
      50ev-q) run_subs 50 "$b50" "50ev-q-r$rep:q" ;;
      50ev-snap) run_subs 50 "$b50" "50ev-snap-r$rep:s" ;;
      1ev-q) run_subs 1 "$b1" "1ev-q-r$rep:q" ;;
      1ev-snap) run_subs 1 "$b1" "1ev-snap-r$rep:s" ;;
      50ev-pair) run_subs 50 "$b50" "50ev-pair-r$rep:0" "50ev-pair-rec-r$rep:1" ;;
      1ev-pair) run_subs 1 "$b1" "1ev-pair-r$rep:0" "1ev-pair-rec-r$rep:1" ;;
      *) echo "bench-ingest.sh: unknown run '$run' in RUNS" >&2; exit 2 ;;
    esac
  done
done
"$PY" - "$tmp/rows.jsonl" "$out" "$commit" <<'PYEOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump({"commit": sys.argv[3], "runs": rows}, open(sys.argv[2], "w"), indent=1)
groups = {}
for r in rows:
    groups.setdefault(r["name"].rsplit("-r", 1)[0], []).append(r)
print("%-10s %5s %12s %12s %9s %9s %6s %8s %8s" % ("run", "runs", "batches/s", "blocks/s",
      "recovered", "lost", "gaps", "sub CPU", "pub CPU"))
med = {}
for name, rs in groups.items():
    m = lambda k: statistics.median(r[k] for r in rs)
    med[name] = m("blocks_per_s") if rs[0]["events_per_batch"] > 1 else m("batches_per_s")
    print("%-10s %5d %12.0f %12.0f %9d %9d %6d %8.2f %8.2f" % (name, len(rs), m("batches_per_s"),
          m("blocks_per_s"), sum(r["recovered"] for r in rs), sum(r["lost"] for r in rs),
          sum(r["gaps"] for r in rs), m("subscriber_cpu_s"), m("publisher_cpu_s")))
for base in ("50ev", "1ev"):
    if base in med and base + "-rec" in med:
        print("%s: --record keeps %.1f%% of the rate" % (base, 100 * med[base + "-rec"] / med[base]))
    q, snap = groups.get(base + "-q"), groups.get(base + "-snap")
    if q and snap:
        p99 = lambda rs: statistics.median(r["query_p99_us"] for r in rs if r["query_p99_us"] is not None)
        print("%s: with snapshots every %s s the rate is x%.3f and the query p99 x%.3f "
              "(%.0f us against %.0f); %d snapshots, longest writer pause %d us wall, longest piece %d us "
              "of the writer's CPU" % (
              base, os.environ.get("SNAP_INTERVAL", "5"), med[base + "-snap"] / med[base + "-q"],
              p99(snap) / p99(q), p99(snap), p99(q), sum(r["snapshots"] for r in snap),
              max(r["snapshot_pause_max_us"] for r in snap),
              max(r["snapshot_piece_cpu_max_us"] for r in snap)))
        qs = lambda rs, k: [r["query"][k] for r in rs if r["query"] and k in r["query"]]
        if qs(q, "p99_us_clear") and qs(snap, "p99_us_clear"):
            # bench/http_load's view clear of machine stalls (docs/benchmarks-machine.md)
            print("%s: query p99 clear of machine stalls x%.3f (%.0f us against %.0f); machine stalls "
                  "per run with snapshots %s (longest %.1f ms), without %s (longest %.1f ms)" % (
                  base, statistics.median(qs(snap, "p99_us_clear")) / statistics.median(qs(q, "p99_us_clear")),
                  statistics.median(qs(snap, "p99_us_clear")), statistics.median(qs(q, "p99_us_clear")),
                  qs(snap, "machine_stalls"), max(qs(snap, "machine_stall_max_us")) / 1e3,
                  qs(q, "machine_stalls"), max(qs(q, "machine_stall_max_us")) / 1e3))
# Pairs: the ratio within each repetition (same stream, same seconds), then the median.
by_name = {r["name"]: r for r in rows}
for base in ("50ev-pair", "1ev-pair"):
    rate, cpu = [], []
    for name, r in by_name.items():
        if name.rsplit("-r", 1)[0] != base:
            continue
        rec = by_name.get(base + "-rec-r" + name.rsplit("-r", 1)[1])
        if rec is None:
            continue
        rate.append(rec["blocks_per_s"] / r["blocks_per_s"])
        cpu.append(rec["subscriber_cpu_us_per_block"] / r["subscriber_cpu_us_per_block"])
    if rate:
        print("%s: --record keeps %.1f%% of the rate (median of %d paired runs: %s); "
              "CPU per block x%.3f (%s)" % (base, 100 * statistics.median(rate), len(rate),
              " ".join("%.3f" % x for x in rate), statistics.median(cpu),
              " ".join("%.3f" % x for x in cpu)))
print("raw: " + sys.argv[2])
PYEOF
