#!/usr/bin/env bash
# Regenerates every tests/data/*_vectors.json from its independent oracle script. Golden vectors
# that drift are regenerated here, never skipped; review the diff before committing it.
set -euo pipefail
cd "$(dirname "$0")/../tests/data"
for script in *_vectors.py; do
  /usr/bin/python3 "$script" >"${script%.py}.json"
  echo "regenerated ${script%.py}.json"
done
