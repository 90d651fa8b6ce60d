#!/usr/bin/env bash
# The heavier matrix, run before a large change lands (not in CI): gcc and clang in Debug and
# Release, TSan over the concurrency, transport and HTTP tests, the format check and clang-tidy.
#   scripts/check-all.sh [--no-tidy]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/setup.sh

for compiler in g++ clang++; do
  for type in Debug Release; do
    dir=build/check-${compiler%++}-${type,,}
    echo "== $compiler $type =="
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=$type -DCMAKE_CXX_COMPILER=$compiler >/dev/null
    cmake --build "$dir" -j "$jobs"
    ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 900
  done
done

echo "== TSan (clang): unit, integration and concurrency tests =="
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DKVINDEX_SANITIZE=thread -DKVINDEX_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/tsan -j "$jobs"
TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" ctest --test-dir build/tsan -j "$jobs" --output-on-failure \
  --timeout 1800 -L 'unit|integration|concurrency'

echo "== clang-format (14) =="
git ls-files '*.h' '*.cpp' | xargs clang-format-14 --dry-run --Werror 2>/dev/null || \
  git ls-files '*.h' '*.cpp' | xargs clang-format --dry-run --Werror

if [ "${1:-}" != --no-tidy ] && [ -f .clang-tidy ]; then
  echo "== clang-tidy =="
  git ls-files 'libindex/src/*.cpp' | xargs clang-tidy -p build/check-clang-release --quiet
fi
echo "scripts/check-all.sh: all checks passed"
