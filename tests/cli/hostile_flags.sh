#!/usr/bin/env bash
# Every flag that takes a value, of every subcommand, given hostile values: empty, negative, zero,
# nan, inf, 1e300, 2^64, a 100 KB string, invalid UTF-8, a directory, /dev/full, a missing file.
# The flags come from each subcommand's --help, so a new flag is covered without editing this
# file. Each run must end (a short timeout) with exit 0, 1 or 2 — never a signal — and an error
# must be one stderr line (a usage error may add the "Run 'kvindex ... --help'" hint line).
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}

# Relative hostile values ("0", "nan") name files in the current directory: make it $TMP (each
# job below works in a subdirectory of its own).
cd "$TMP" || exit 1
port=$(free_ports 1)
# A small request trace and a small capture: the inputs the base command lines read.
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}' \
  '{"timestamp": 5, "input_length": 8, "output_length": 1, "hash_ids": [1, 3]}' >"$TMP/t.jsonl"
run "$KVINDEX" publish-fake --count 3 --out "$TMP/c.kvcap"
expect_status 0 "publish-fake --out (the capture the base command lines read)"

BIG=$(head -c 102400 /dev/zero | tr '\0' x)
VALUES=("" "-1" "0" "nan" "inf" "1e300" "18446744073709551616" "$BIG" $'\xff\xfe\xc0\x80'
        "$TMP" "/dev/full" "$TMP/missing/file")

# The flags of `kvindex SUB --help` that take a value: "--name TYPE ..." lines, where TYPE is
# CLI11's upper-case type name (TEXT, UINT, FLOAT, ...).
value_flags() {
  "$KVINDEX" "$@" --help | sed -n -E 's/^ +(-[a-z], )?(--[a-z0-9-]+) +([A-Z][A-Z0-9_]*)([:\[ ].*)?$/\2/p' |
    sort -u
}

# A flag that excludes one of the base's flags replaces it: "COMMAND FLAG" -> the base flag.
declare -A REPLACES=(
  ["query --tokens-file"]=--tokens ["query --hashes"]=--tokens ["query --prefix-hashes"]=--tokens
  ["query --server"]=--capture
)

# check_flag NAME FLAG -- BASE...: runs BASE (without its own FLAG) plus FLAG VALUE for each value.
check_flag() {
  local name=$1 flag=$2
  shift 3
  local drop=${REPLACES["$name $flag"]:-} base=() skip=0 arg
  for arg in "$@"; do
    if [ "$skip" -eq 1 ]; then skip=0; continue; fi
    # Leave out the base's own value for FLAG (and its argument).
    if [ "$arg" = "$flag" ] || [ "$arg" = "$drop" ]; then skip=1; continue; fi
    base+=("$arg")
  done
  local value shown lines
  for value in "${VALUES[@]}"; do
    shown=${value:0:40}
    run timeout -s KILL 10 "${base[@]}" "$flag" "$value"
    checked=$((checked + 1))
    case "$status" in
      0) ;;
      1)
        lines=$(wc -l <"$stderr_file")
        [ "$lines" -eq 1 ] || fail "$name $flag '$shown': exit 1 with $lines stderr lines"
        ;;
      2)
        lines=$(grep -vc "^Run 'kvindex .*--help' for usage\.$" "$stderr_file")
        [ "$lines" -eq 1 ] || fail "$name $flag '$shown': exit 2 with $lines error lines"
        ;;
      *) fail "$name $flag '$shown': exit $status (a signal, a hang, or an unknown code)" ;;
    esac
  done
}

# check_command NAME -- BASE...: every value flag of BASE's subcommand (BASE[1]), in a job of its
# own (most of the time is the live commands' --duration) that leaves "FAILURES RUNS" in
# $TMP/NAME.result.
check_command() {
  local name=$1
  shift 2
  (
    # Each job in a directory of its own: relative values ("-1", "0") name files there, so one
    # job's output file is never another job's live, mapped capture.
    mkdir -p "$TMP/$name.d" && cd "$TMP/$name.d" || exit 1
    stdout_file=$TMP/$name.stdout
    stderr_file=$TMP/$name.stderr
    failures=0
    checked=0
    local flags flag
    flags=$(value_flags "$2")
    [ -n "$flags" ] || fail "$name: no value flags found in '$2 --help'"
    for flag in $flags; do
      check_flag "$name" "$flag" -- "$@"
    done
    echo "$failures $checked" >"$TMP/$name.result"
  ) &
}

SOURCE="a=vllm@tcp://127.0.0.1:$port,model=m"
NAMES=(replay-trace replay-capture query record subscribe publish-fake)
check_command replay-trace -- "$KVINDEX" replay "$TMP/t.jsonl" --threads 1
check_command replay-capture -- "$KVINDEX" replay "$TMP/c.kvcap"
check_command query -- "$KVINDEX" query --capture "$TMP/c.kvcap" --model fake-model --tokens 1,2
check_command record -- "$KVINDEX" record --source "$SOURCE" --out "$TMP/r.kvcap" --force \
  --duration 0.1 --stats-interval 0
check_command subscribe -- "$KVINDEX" subscribe --source "$SOURCE" --duration 0.1 \
  --stats-interval 0
check_command publish-fake -- "$KVINDEX" publish-fake --count 3 --out "$TMP/p.kvcap" \
  --port $((port + 1))
wait
checked=0
for name in "${NAMES[@]}"; do
  [ -s "$TMP/$name.result" ] || { fail "$name: the job left no result"; continue; }
  read -r job_failures job_checked <"$TMP/$name.result"
  failures=$((failures + job_failures))
  checked=$((checked + job_checked))
done
# The global flag, before a subcommand.
for value in "${VALUES[@]}"; do
  run timeout -s KILL 10 "$KVINDEX" --log-level "$value" replay "$TMP/t.jsonl"
  case "$status" in 0 | 2) ;; *) fail "--log-level '${value:0:40}': exit $status" ;; esac
done

# Bounds that take two flags: replay --window keeps counts per window and instance, so 10^6
# windows (a 1,000 s trace in 1 ms windows) of 1,024 instances are refused before any allocation
# (under a 4 GB address-space limit, so a regression fails instead of exhausting the machine).
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1]}' \
  '{"timestamp": 1000000, "input_length": 8, "output_length": 1, "hash_ids": [2]}' >"$TMP/span.jsonl"
# A sanitized binary reserves terabytes of shadow address space, so it runs without the limit
# (its allocator then fails a regression's huge allocation with a non-2 exit instead).
limit=4000000
[ -n "${ASAN_OPTIONS:-}" ] && limit=unlimited
run bash -c 'ulimit -v "$0"; exec "$@"' "$limit" "$KVINDEX" replay "$TMP/span.jsonl" --window 0.001 \
  --instances 1024 --threads 1
expect_status 2 "--window x --instances beyond 10^6 cells"
expect_stderr_contains "window too short: more than 10^6 windows x instances"

# The matrix really ran: every subcommand has value flags, each got every value.
[ "$checked" -gt 600 ] || fail "only $checked hostile runs"
echo "hostile runs: $checked"
finish
