#!/usr/bin/env bash
# Longer fuzzing runs with libFuzzer (not in CI, which replays the corpora: ctest -L fuzz-regress).
# Builds every tests/fuzz/<name>_fuzz.cpp as a libFuzzer binary with clang
# (-fsanitize=fuzzer,address,undefined; the library itself gets the coverage instrumentation too),
# then runs each named target (default: all) for M minutes (default 10) over a copy of its
# checked-in corpus, with tests/fuzz/<name>.dict when there is one. Prints per target the runs,
# execs/s, the corpus size before and after, and the crashes found, which are saved under the run
# directory it names (build/fuzz-runs/<time>/<name>/crashes/). Exits 1 when any target crashed.
#   scripts/fuzz.sh [--minutes M] [TARGET...]     e.g. scripts/fuzz.sh --minutes 1 address framing
# Reproduce a crash: build/fuzz/tests/fuzz/<name>_fuzz_libfuzzer CRASH_FILE
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/fuzz.sh [--minutes M] [TARGET...]" >&2
  echo "targets: $(all_targets | tr '\n' ' ')" >&2
  exit 2
}
all_targets() {
  for f in tests/fuzz/*_fuzz.cpp; do basename "$f" _fuzz.cpp; done
}

minutes=10
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --minutes)
      [ $# -ge 2 ] || usage
      minutes=$2
      shift 2
      ;;
    --minutes=*) minutes=${1#--minutes=}; shift ;;
    -h|--help) usage ;;
    -*) echo "scripts/fuzz.sh: unknown option '$1'" >&2; usage ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] && [ "$(awk -v m="$minutes" 'BEGIN{print (m > 0)}')" = 1 ] \
  || { echo "scripts/fuzz.sh: --minutes must be a positive number, got '$minutes'" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(all_targets)
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/${t}_fuzz.cpp" ] || { echo "scripts/fuzz.sh: no fuzz target '$t'" >&2; usage; }
done
seconds=$(awk -v m="$minutes" 'BEGIN{s = int(m * 60 + 0.5); print (s < 1 ? 1 : s)}')

build=build/fuzz
echo "== building ${#targets[@]} libFuzzer target(s) with clang in $build =="
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -DKVINDEX_SANITIZE=address,undefined \
  -DKVINDEX_BUILD_FUZZERS=ON -DKVINDEX_BUILD_TOOLS=OFF -DKVINDEX_BUILD_BENCHMARKS=OFF >/dev/null
binaries=()
for t in "${targets[@]}"; do binaries+=("${t}_fuzz_libfuzzer"); done
cmake --build "$build" -j "$(nproc)" --target "${binaries[@]}"

runs_dir=build/fuzz-runs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$runs_dir"
echo "== fuzzing ${seconds} s per target; corpora, logs and crashes in $runs_dir =="
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
crashed=0
summary=()
for t in "${targets[@]}"; do
  dir=$runs_dir/$t
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp tests/fuzz/corpus/"$t"/* "$dir/corpus/"
  before=$(find "$dir/corpus" -type f | wc -l)
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048
        -artifact_prefix="$dir/crashes/")
  dict=""
  if [ -f "tests/fuzz/$t.dict" ]; then
    args+=(-dict="tests/fuzz/$t.dict")
    dict=", dictionary tests/fuzz/$t.dict"
  fi
  echo "-- $t: ${seconds} s from $before corpus inputs$dict"
  rc=0
  "$build/tests/fuzz/${t}_fuzz_libfuzzer" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  after=$(find "$dir/corpus" -type f | wc -l)
  found=$(find "$dir/crashes" -type f | wc -l)
  if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then
    found=1  # libFuzzer failed without an artifact (e.g. a startup error): count it, see the log
  fi
  line=$(printf '%-16s runs %10s  execs/s %7s  corpus %5s -> %-5s  new crashes %s' "$t" \
    "${runs:-?}" "${speed:-?}" "$before" "$after" "$found")
  echo "$line"
  summary+=("$line")
  if [ "$found" -ne 0 ]; then
    crashed=1
    echo "   crash inputs in $dir/crashes/, log $dir/log:" >&2
    grep -m3 -E 'ERROR: |runtime error|==[0-9]+==|_fuzz: ' "$dir/log" | sed 's/^/   /' >&2 || true
  fi
done
echo "== summary ($runs_dir) =="
printf '%s\n' "${summary[@]}"
if [ "$crashed" -ne 0 ]; then
  echo "scripts/fuzz.sh: crashes found (inputs saved under $runs_dir/*/crashes/)" >&2
  exit 1
fi
echo "scripts/fuzz.sh: no crash"
