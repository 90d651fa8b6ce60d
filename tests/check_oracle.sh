#!/usr/bin/env bash
# check_oracle.sh SCRIPT EXPECTED.json: runs an independent oracle script and fails if its output
# differs from the checked-in vectors. Regenerate with: scripts/regen-vectors.sh
set -euo pipefail
script=$1 expected=$2
python=${KVINDEX_PYTHON:-/usr/bin/python3}
if ! actual=$("$python" "$script"); then
  echo "oracle $script failed to run (are Debian's python3-xxhash / python3-msgpack installed?)" >&2
  exit 1
fi
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "checked-in vectors $expected drifted from $script; run scripts/regen-vectors.sh" >&2
  exit 1
fi
echo "oracle $(basename "$script"): vectors match"
