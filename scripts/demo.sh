#!/usr/bin/env bash
# The main job on a fresh machine (README.md, the first of the two commands): installs what is
# missing (scripts/setup.sh), builds kvindex in Release, then replays the bundled sample trace
# (traces/sample.jsonl) through a simulated 4-instance cluster: 3 eviction policies × 3 cache
# sizes (blocks per instance) × 2 routers, all in parallel, and prints the hit-rate table.
#   scripts/demo.sh [extra kvindex replay flags, e.g. --json -]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVINDEX_BUILD_TESTS=OFF \
  -DKVINDEX_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/release -j "$(nproc)" --target kvindex_cli >/dev/null

echo "== kvindex replay traces/sample.jsonl: 4 instances, policies × capacities × routers =="
build/release/tools/kvindex/kvindex replay traces/sample.jsonl \
  --instances 4 --policy lru,lfu,prefix-lru --capacity 200,1000,inf \
  --router round-robin,cache-aware "$@"
