#!/usr/bin/env bash
# The test command (README.md; .ci/run calls it): installs what is missing, builds kvindex with
# gcc in Release with warnings as errors, runs every ctest, then builds the unit and fuzz-regression
# tests with ASan+UBSan (clang) and runs them. Exits non-zero on any failure.
#   scripts/test.sh            everything
#   KVINDEX_SKIP_ASAN=1 ...    skip the sanitizer build (local iteration only)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
jobs=$(nproc)

scripts/setup.sh

echo "== Release build (gcc) =="
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ \
  -DKVINDEX_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/ci -j "$jobs"
echo "== ctest (Release) =="
ctest --test-dir build/ci -j "$jobs" --output-on-failure --timeout 600

if [ "${KVINDEX_SKIP_ASAN:-0}" != 1 ]; then
  echo "== ASan+UBSan build (clang): unit and fuzz-regression tests =="
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DKVINDEX_SANITIZE=address,undefined -DKVINDEX_BUILD_BENCHMARKS=OFF \
    -DKVINDEX_BUILD_TOOLS=OFF >/dev/null
  cmake --build build/asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -j "$jobs" --output-on-failure --timeout 900 -L 'unit|fuzz-regress'
fi

echo "scripts/test.sh: all tests passed in $(( $(date +%s) - start )) s"
