#!/usr/bin/env bash
# The test command (README.md; .ci/run calls it): installs what is missing, builds kvindex with
# gcc in Release with warnings as errors, runs every ctest, then builds the unit, fuzz-regression
# and CLI tests (with the kvindex binary they run) with ASan+UBSan (clang) and runs them. After
# each ctest stage it prints how many tests were skipped and fails unless none was. Exits non-zero
# on any failure.
#   scripts/test.sh            everything
#   KVINDEX_SKIP_ASAN=1 ...    skip the sanitizer build (local iteration only)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
jobs=$(nproc)

# skipped_tests STAGE JUNIT: prints the number of skipped tests in ctest's JUnit report JUNIT and
# fails when it is not 0. Counted from what ran: tests ctest did not run or has disabled, doctest's
# "N skipped" test cases, and output lines saying "skipping"/"skipped" (alone or as a doctest
# MESSAGE), which is how a test that returns early for want of something shows.
skipped_tests() {
  /usr/bin/python3 - "$1" "$2" <<'PYEOF'
import re, sys
import xml.etree.ElementTree as ET
stage, junit = sys.argv[1], sys.argv[2]
doctest_skipped = re.compile(r"\[doctest\] test cases:.*\|\s*(\d+) skipped")
says_skipped = re.compile(r"^\s*(?:.*MESSAGE: )?skip(?:ping|ped)\b", re.IGNORECASE)
skipped = []
for case in ET.parse(junit).getroot().iter("testcase"):
    name = case.get("name")
    if case.get("status") in ("notrun", "disabled") or case.find("skipped") is not None:
        skipped.append(f"{name}: {case.get('status')} by ctest")
    for line in (case.findtext("system-out") or "").splitlines():
        m = doctest_skipped.search(line)
        if m and int(m.group(1)) != 0:
            skipped.append(f"{name}: {m.group(1)} doctest case(s) skipped")
        elif says_skipped.search(line):
            skipped.append(f"{name}: {line.strip()}")
print(f"skipped tests ({stage}): {len(skipped)}")
for s in skipped:
    print(f"  {s}")
sys.exit(1 if skipped else 0)
PYEOF
}

scripts/setup.sh

echo "== Release build (gcc) =="
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ \
  -DKVINDEX_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/ci -j "$jobs"
echo "== ctest (Release) =="
ctest --test-dir build/ci -j "$jobs" --output-on-failure --timeout 600 \
  --output-junit junit.xml --test-output-size-passed 16777216 --test-output-size-failed 16777216
skipped_tests Release build/ci/junit.xml

if [ "${KVINDEX_SKIP_ASAN:-0}" != 1 ]; then
  echo "== ASan+UBSan build (clang): unit, fuzz-regression and CLI tests =="
  asan_start=$(date +%s)
  # Line tables are all a sanitizer report needs; full debug info only costs build time.
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DKVINDEX_SANITIZE=address,undefined -DKVINDEX_BUILD_BENCHMARKS=OFF \
    -DKVINDEX_BUILD_INTEGRATION_TESTS=OFF >/dev/null
  cmake --build build/asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -j "$jobs" --output-on-failure --timeout 900 -L 'unit|fuzz-regress|cli' \
    --output-junit junit.xml --test-output-size-passed 16777216 --test-output-size-failed 16777216
  skipped_tests ASan+UBSan build/asan/junit.xml
  echo "ASan+UBSan stage: $(( $(date +%s) - asan_start )) s"
fi

echo "scripts/test.sh: all tests passed in $(( $(date +%s) - start )) s"
