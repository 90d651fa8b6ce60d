#!/usr/bin/env bash
# Soak test of the live path (not in CI): one `kvindex subscribe --http --record` runs for M
# minutes (default 10) while publish-fake streams into it at R batches/s (default 50,000, over 2 DP
# ranks) with every fault on (drops, duplicates, corrupt copies, an engine restart) and a steady
# /query load (scripts/soak_client.py) hits its HTTP server. The stream comes in rounds of S seconds
# (default 30; publish-fake encodes a whole run up front, so rounds bound its memory): each round is
# a new publish-fake process, whose sequence restart the subscriber sees as an engine restart that
# clears the source. Prints the subscriber's RSS every minute (VmRSS of /proc/PID/status) and, after
# each round, checks every final expected answer publish-fake wrote (--emit-queries) against the
# live /query answer. At the end the subscriber must exit 0 on SIGTERM with every batch applied or
# counted lost (losses only where a restart cleared the ring before a replay could fill a hole), the load must have had no failed request, and `kvindex replay` of the recording
# must give the last round's expected answers too. Exits 1 on any difference, crash or error.
#   scripts/soak.sh [--minutes M] [--rate R] [--round-seconds S] [--keep DIR]
# KVINDEX names the binary (default: build/ci's, then build/'s; built in Release when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/soak.sh [--minutes M] [--rate BATCHES_PER_S] [--round-seconds S]" \
    "[--keep DIR]" >&2
  exit 2
}
minutes=10
rate=50000
round_seconds=30
keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --minutes|--rate|--round-seconds|--keep)
      [ $# -ge 2 ] || usage
      case $1 in
        --minutes) minutes=$2 ;;
        --rate) rate=$2 ;;
        --round-seconds) round_seconds=$2 ;;
        --keep) keep=$2 ;;
      esac
      shift 2
      ;;
    -h|--help) usage ;;
    *) echo "scripts/soak.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
for v in "$minutes" "$rate" "$round_seconds"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] \
    || { echo "scripts/soak.sh: '$v' is not a positive integer" >&2; exit 2; }
done

PY=/usr/bin/python3
KVINDEX=${KVINDEX:-}
if [ -z "$KVINDEX" ]; then
  for candidate in build/ci/tools/kvindex/kvindex build/tools/kvindex/kvindex; do
    [ -x "$candidate" ] && { KVINDEX=$candidate; break; }
  done
fi
if [ -z "$KVINDEX" ]; then
  echo "== building kvindex (Release) in build/ci =="
  cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ >/dev/null
  cmake --build build/ci -j "$(nproc)" --target kvindex_cli
  KVINDEX=build/ci/tools/kvindex/kvindex
fi
KVINDEX=$(realpath "$KVINDEX")

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  WORK=$(realpath "$keep")
else
  WORK=$(mktemp -d)
fi
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "$keep" ] || rm -rf "$WORK"
}
trap cleanup EXIT

problems=0
problem() {
  echo "SOAK FAILURE: $*" >&2
  problems=$((problems + 1))
}

# Three free ports: live (rank r on P + r), replay (Q + r), HTTP. Checked by binding them.
read -r pub_port replay_port http_port < <("$PY" - <<'PYEOF'
import random, socket
for _ in range(500):
    p = random.randrange(20000, 32000)
    ports = [p, p + 1, p + 2, p + 3, p + 4]
    socks = []
    try:
        for q in ports:
            s = socket.socket(); s.bind(("127.0.0.1", q)); socks.append(s)
        print(p, p + 2, p + 4)
        break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PYEOF
)
ranks=2
per_source=$(( (rate + ranks - 1) / ranks ))
count=$(( per_source * round_seconds ))
total_seconds=$(( minutes * 60 ))
source="fake-0=vllm@tcp://127.0.0.1:$pub_port,replay=tcp://127.0.0.1:$replay_port,model=fake-model"
source+=",block-size=16,dp-size=$ranks"
echo "soak: $KVINDEX, $minutes min, $rate batches/s ($ranks ranks x $per_source), rounds of" \
  "$round_seconds s ($count batches per rank), work dir $WORK"

"$KVINDEX" subscribe --source "$source" --http "127.0.0.1:$http_port" --record "$WORK/soak.kvcap" \
  --json "$WORK/subscribe.json" --stats-interval 60 >"$WORK/subscribe.out" 2>"$WORK/subscribe.err" &
sub=$!
PIDS+=("$sub")

"$PY" scripts/soak_client.py load --port "$http_port" --stop "$WORK/stop-load" \
  --queries-dir "$WORK" >"$WORK/load.log" 2>&1 &
load=$!
PIDS+=("$load")

start=$(date +%s)
# RSS of the subscriber once a minute, while it lives.
(
  minute=0
  while kill -0 "$sub" 2>/dev/null; do
    sleep 60
    minute=$((minute + 1))
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$sub/status" 2>/dev/null || echo "?")
    echo "soak: minute $minute: subscriber RSS ${rss} kB"
  done
) &
rss_loop=$!
PIDS+=("$rss_loop")

round=0
batches=0
while [ $(( $(date +%s) - start )) -lt "$total_seconds" ]; do
  round=$((round + 1))
  q=$WORK/round-$round.queries.jsonl
  rc=0
  "$KVINDEX" publish-fake --format vllm --instances 1 --dp-ranks "$ranks" --port "$pub_port" \
    --replay-port "$replay_port" --count "$count" --rate "$per_source" --seed "$round" \
    --drop-every 97 --duplicate-every 89 --corrupt-every 83 --restart-after $(( count / 2 )) \
    --capacity 4096 --wait-subscribers 1 --wait-timeout 30 --linger 3 \
    --emit-queries "$q" --json "$WORK/round-$round.json" 2>"$WORK/round-$round.err" || rc=$?
  if [ "$rc" -ne 0 ]; then
    problem "round $round: publish-fake exited $rc: $(tail -c 500 "$WORK/round-$round.err")"
    break
  fi
  kill -0 "$sub" 2>/dev/null || { problem "round $round: the subscriber died"; break; }
  sent=$("$PY" -c 'import json, sys
print(sum(s["batches"] for s in json.load(open(sys.argv[1]))["sources"]))' "$WORK/round-$round.json")
  batches=$((batches + sent))
  # The final queries (no "after") hold at the end of the round, once the subscriber applied it.
  if ! "$PY" scripts/soak_client.py check --port "$http_port" --queries "$q" --wait 60 \
      >"$WORK/round-$round.check" 2>&1; then
    problem "round $round: $(tail -c 1500 "$WORK/round-$round.check")"
  fi
  echo "soak: round $round: $sent batches published, $(cat "$WORK/round-$round.check" | tail -1)"
done
elapsed=$(( $(date +%s) - start ))

touch "$WORK/stop-load"
wait "$load" || problem "the query load failed: $(tail -c 1500 "$WORK/load.log")"
echo "soak: query load: $(tail -1 "$WORK/load.log")"
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$sub/status" 2>/dev/null || echo "?")
echo "soak: end: subscriber RSS ${rss} kB"
kill -TERM "$sub" 2>/dev/null || true
sub_rc=0
wait "$sub" || sub_rc=$?
kill "$rss_loop" 2>/dev/null || true
[ "$sub_rc" -eq 0 ] \
  || problem "the subscriber exited $sub_rc: $(tail -c 1500 "$WORK/subscribe.err")"

if [ -s "$WORK/subscribe.json" ]; then
  "$PY" - "$WORK/subscribe.json" "$batches" <<'PYEOF' || problem "subscriber counters"
import json, sys
total = json.load(open(sys.argv[1]))["total"]
published = int(sys.argv[2])
keys = ("received", "applied", "malformed", "duplicates", "gaps", "recovered", "lost", "restarts")
print("soak: subscriber totals: " + ", ".join("%s %s" % (k, total.get(k)) for k in keys))
# Every batch published is applied or counted lost, once. A loss is legitimate only where the
# publisher's ring could no longer answer: a batch dropped live shortly before an engine restart
# (--restart-after, or a round's end) whose replay request arrives after the ring was cleared.
# Those are counted at the restart (docs/sequence-rules.md "Restarts").
assert total["applied"] + total["lost"] == published, \
    "applied %d + lost %d != %d published" % (total["applied"], total["lost"], published)
PYEOF
else
  problem "the subscriber wrote no --json summary"
fi

# The recording, replayed offline, gives the last round's final answers (the end of the capture is
# the end of that round).
if [ "$round" -gt 0 ]; then
  grep -v '"after"' "$WORK/round-$round.queries.jsonl" >"$WORK/final.queries.jsonl" || true
  if "$KVINDEX" replay "$WORK/soak.kvcap" --queries "$WORK/final.queries.jsonl" \
      >"$WORK/replay.out" 2>"$WORK/replay.err"; then
    counts=$(grep -o '[0-9]* queries, [0-9]* checked, [0-9]* differ' "$WORK/replay.err" || true)
    echo "soak: replay of the recording: $counts"
  else
    problem "replay --queries of the recording: $(tail -c 1500 "$WORK/replay.err")"
  fi
fi

echo "soak: $round round(s), $batches batches in ${elapsed} s, $problems problem(s)"
[ "$problems" -eq 0 ] || exit 1
echo "scripts/soak.sh: passed"
