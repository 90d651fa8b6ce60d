#!/usr/bin/env bash
# `kvindex replay --tier-write through|victim` (docs/simulation.md "Tiers"): the hand-computed
# example in both modes, the default, the sample's hit rate never falling as GPU capacity grows
# under `through`, and the usage error.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
check_json() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
    || fail "JSON check failed: $2"
}
row() {  # prefix hits, per tier (gpu, cpu, disk), evictions, cpu and disk evictions of result 0
  echo "(r['prefix_hit_blocks'], r['tiers']['gpu']['prefix_hit_blocks'], r['tiers']['cpu']['prefix_hit_blocks'], r['tiers']['disk']['prefix_hit_blocks'], r['evictions'], r['cpu_evictions'], r['disk_evictions'])"
}

# The worked example of docs/simulation.md: 2 instances (round-robin), GPU 1, CPU 1, disk 2;
# requests [1] [2] [1] [2] [2] [1] (instances 0 1 0 1 0 1).
#   through: [1] GPU0{1}, CPU{1}. [2] GPU1{2}; CPU writes 2, evicts 1 -> disk{1}.
#     [1] GPU0 hit; the pool lost 1 but the disk holds it: disk refreshed, CPU writes 1, evicts 2
#     -> disk{2,1}. [2] GPU1 hit; disk refreshed, CPU writes 2, evicts 1 -> disk (refresh).
#     [2] on instance 0: a CPU hit; GPU0 evicts 1 (dropped). [1] on instance 1: a disk hit;
#     GPU1 evicts 2; CPU writes 1, evicts 2 -> disk.
#     prefix 4 (gpu 2, cpu 1, disk 1), evictions 2, CPU evictions 4, disk evictions 0.
#   victim: [1] [2] [1] [2] fill and hit the GPUs, the pool stays empty. [2] on instance 0
#     misses everywhere; GPU0's victim 1 -> CPU{1}. [1] on instance 1: a CPU hit; GPU1's victim
#     2 -> CPU, which evicts 1 -> disk. prefix 3 (gpu 2, cpu 1, disk 0), evictions 2, CPU 1.
T=$TMP/tw.jsonl
for ids in 1 2 1 2 2 1; do
  echo "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [$ids]}"
done >"$T"
run "$KVINDEX" replay "$T" --instances 2 --capacity 1 --cpu-capacity 1 --disk-capacity 2 --json -
expect_status 0 "default"
cp "$stdout_file" "$TMP/d.json"
check_json "$TMP/d.json" "[$(row) for r in d['results']] == [(4, 2, 1, 1, 2, 4, 0)]"
check_json "$TMP/d.json" "d['results'][0]['tier_write'] == 'through'"
run "$KVINDEX" replay "$T" --instances 2 --capacity 1 --cpu-capacity 1 --disk-capacity 2 \
  --tier-write through --json -
cp "$stdout_file" "$TMP/t.json"
check_json "$TMP/t.json" "[$(row) for r in d['results']] == [(4, 2, 1, 1, 2, 4, 0)]"
run "$KVINDEX" replay "$T" --instances 2 --capacity 1 --cpu-capacity 1 --disk-capacity 2 \
  --tier-write victim --json -
cp "$stdout_file" "$TMP/v.json"
check_json "$TMP/v.json" "[$(row) for r in d['results']] == [(3, 2, 1, 0, 2, 1, 0)]"
check_json "$TMP/v.json" "d['results'][0]['tier_write'] == 'victim'"

# One instance, GPU 1, CPU 2: [1] [2] [3] [1] [2] [3]. Under `through` the pool holds the two
# most recent blocks, the GPU's one among them, so a block 3 requests back is gone: no hit;
# CPU evictions 4 (2, 3, 1, 2 written into a full pool). Under `victim` (docs: the promotion
# example) prefix 2.
P=$TMP/p.jsonl
for ids in 1 2 3 1 2 3; do
  echo "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [$ids]}"
done >"$P"
run "$KVINDEX" replay "$P" --capacity 1 --cpu-capacity 2 --json -
cp "$stdout_file" "$TMP/p.json"
check_json "$TMP/p.json" "(d['results'][0]['prefix_hit_blocks'], d['results'][0]['cpu_evictions']) == (0, 4)"
run "$KVINDEX" replay "$P" --capacity 1 --cpu-capacity 2 --tier-write victim --json -
cp "$stdout_file" "$TMP/pv.json"
check_json "$TMP/pv.json" "(d['results'][0]['prefix_hit_blocks'], d['results'][0]['cpu_evictions']) == (2, 2)"

# Only a disk: `through` writes every block to it. GPU 1, disk 1, [1] [2] [1]: the disk holds
# the last block accessed, 2, so [1] misses (victim: [2]'s GPU victim 1 is on the disk: 1 hit).
D=$TMP/disk.jsonl
for ids in 1 2 1; do
  echo "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [$ids]}"
done >"$D"
run "$KVINDEX" replay "$D" --capacity 1 --disk-capacity 1 --tier-write through,victim --json -
expect_status 2 "tier-write is not a list"
run "$KVINDEX" replay "$D" --capacity 1 --disk-capacity 1 --json -
cp "$stdout_file" "$TMP/dt.json"
check_json "$TMP/dt.json" "(d['results'][0]['prefix_hit_blocks'], d['results'][0]['disk_evictions']) == (0, 2)"
run "$KVINDEX" replay "$D" --capacity 1 --disk-capacity 1 --tier-write victim --json -
cp "$stdout_file" "$TMP/dv.json"
check_json "$TMP/dv.json" "(d['results'][0]['prefix_hit_blocks'], d['results'][0]['disk_evictions']) == (1, 1)"

# The sample under `through`: the pool sees every access whatever the GPUs hold, and LRU GPUs
# only gain blocks as they grow, so the hit rate never falls with GPU capacity (4 instances,
# round-robin, a 2,000-block CPU pool, with and without an 8,000-block disk).
run "$KVINDEX" replay "$KVINDEX_SOURCE_DIR/traces/sample.jsonl" --instances 4 \
  --capacity 50,100,200,400,800,1600,3200,6400,inf --cpu-capacity 2000 --disk-capacity none,8000 \
  --json -
expect_status 0 "sample sweep"
cp "$stdout_file" "$TMP/s.json"
for disk in 0 8000; do
  check_json "$TMP/s.json" "(lambda h: len(h) == 9 and all(a <= b for a, b in zip(h, h[1:])))([r['prefix_hit_blocks'] for r in d['results'] if r['disk_capacity'] == $disk])"
  check_json "$TMP/s.json" "(lambda h: all(a <= b for a, b in zip(h, h[1:])))([r['any_hit_blocks'] for r in d['results'] if r['disk_capacity'] == $disk])"
done

# A bad mode is a usage error.
run "$KVINDEX" replay "$T" --cpu-capacity 1 --tier-write back
expect_status 2 "bad tier-write"
expect_stderr_contains "--tier-write"
finish
