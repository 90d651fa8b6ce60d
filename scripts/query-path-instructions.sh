#!/usr/bin/env bash
# Instructions per /query request under callgrind (deterministic on a loaded machine), split into
# parse (ParseQueryRequest), match (PrefixIndex::MatchTokens) and render (RenderQueryAnswer), at
# 512, 2,048 and 8,192 token ids against the 64-instance index of bench/query_path_bench.cpp.
# Each size runs BM_QueryServer_Handle twice, with A and B fixed iterations, collecting only inside
# QueryServer::Handle; (cost at B - cost at A) / (B - A) is the steady-state cost of one request,
# first-request setup excluded.
# HANDLE=service measures BM_QueryService_Handle (QueryService::Handle into a reused answer)
# instead of BM_QueryServer_Handle.
# Usage: scripts/query-path-instructions.sh [BENCH_BINARY] [SIZES...]
set -euo pipefail
bench=${1:-build/rel/bench/query_path_bench}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(512 2048 8192)
a=${A:-16}
b=${B:-80}
if [ "${HANDLE:-server}" = service ]; then
  bench_name=BM_QueryService_Handle
  toggle='kvindex::QueryService::Handle*ServiceAnswer&)'
  top='kvindex::QueryService::Handle.*ServiceAnswer&'
else
  bench_name=BM_QueryServer_Handle
  toggle='kvindex::QueryServer::Handle*'
  top='kvindex::QueryServer::Handle'
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cost() {  # cost FILE FUNCTION-PATTERN: inclusive Ir of the first matching function
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    grep -E "$2" | head -1 | awk '{gsub(",", "", $1); print $1}'
}
printf '%-6s %12s %12s %12s %12s\n' tokens handle parse match render
for n in "${sizes[@]}"; do
  for it in "$a" "$b"; do
    QUERY_PATH_ITERATIONS=$it valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n.$it" \
      --collect-atstart=no --toggle-collect="$toggle" \
      "$bench" --benchmark_filter="$bench_name/$n/" >/dev/null 2>&1
  done
  row=()
  for f in "$top" 'kvindex::ParseQueryRequest' \
           'kvindex::PrefixIndex::MatchTokens' 'kvindex::RenderQueryAnswer'; do
    ca=$(cost "$out/cg.$n.$a" "$f")
    cb=$(cost "$out/cg.$n.$b" "$f")
    row+=($(( (${cb:-0} - ${ca:-0}) / (b - a) )))
  done
  printf '%-6s %12s %12s %12s %12s\n' "$n" "${row[@]}"
done
