#!/usr/bin/python3
"""Differential test: `kvindex replay --json` against tests/data/sim_reference.py.

  sim_compare.py KVINDEX WORKDIR [MOONCAKE_TRACES_DIR]

Writes seeded random traces (Mooncake and Bailian, with shared prefixes, repeated ids inside a
request, equal and out-of-order timestamps) into WORKDIR, runs both simulators over a grid of
every policy, router and several capacities and instance counts, and compares every count of every
row and every instance exactly; then the head of both public Mooncake traces (from
MOONCAKE_TRACES_DIR, by default traces/mooncake/ of the checkout).
Exits 1 listing the differences (and the seed / trace / configuration).
"""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "sim_reference.py")
MOONCAKE_TRACES = os.path.join(HERE, "..", "..", "traces", "mooncake")
COUNTS = ["requests", "blocks", "prefix_hit_blocks", "any_hit_blocks", "evictions",
          "input_tokens", "prefix_hit_tokens", "resident_blocks"]
TIER_COUNTS = ["cpu_evictions", "disk_evictions"] + [
    f"{kind}_hit_{t}" for kind in ("prefix", "any") for t in ("gpu", "cpu", "disk")]
ALL_POLICIES = "lru,lfu,fifo,prefix-lru"
ALL_ROUTERS = "round-robin,random,least-loaded,cache-aware,session"


def random_mooncake(rng, path, n):
    docs = [[rng.randrange(0, 40) for _ in range(rng.randrange(1, 6))] for _ in range(6)]
    lines = []
    for i in range(n):
        ids = list(rng.choice(docs)) if rng.random() < 0.7 else []
        ids += [rng.randrange(0, 120) for _ in range(rng.randrange(0, 8))]
        if ids and rng.random() < 0.1:
            ids.append(ids[rng.randrange(len(ids))])  # a repeated id inside the request
        ts = rng.randrange(0, n // 3 + 1)             # ties, and not in file order
        lines.append({"timestamp": ts, "input_length": rng.randrange(0, 512 * len(ids) + 600),
                      "output_length": rng.randrange(1, 50), "hash_ids": ids})
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def random_bailian(rng, path, n):
    lines = []
    chats = []
    for i in range(n):
        chat = 1000 + i
        if chats and rng.random() < 0.6:
            parent = rng.choice(chats)
            base = list(parent[1])
            turn = parent[2] + 1
            parent_id = parent[0]
        else:
            base = [rng.randrange(0, 10)]
            turn = 1
            parent_id = -1 if rng.random() < 0.8 else 99999  # an unknown parent
        ids = base + [rng.randrange(0, 300) for _ in range(rng.randrange(1, 5))]
        chats.append((chat, ids, turn))
        lines.append({"chat_id": chat, "parent_chat_id": parent_id,
                      "timestamp": round(i * 0.25 + rng.random(), 3),
                      "input_length": 16 * len(ids) - rng.randrange(0, 16),
                      "output_length": rng.randrange(1, 40), "type": "text", "turn": turn,
                      "hash_ids": ids})
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def run_both(kvindex, trace, args):
    out = subprocess.run([kvindex, "replay", trace, "--json", "-"] + args,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"kvindex failed on {trace} {args}: {out.stderr.strip()}")
    ref = subprocess.run([sys.executable, REFERENCE, trace] + args, capture_output=True, text=True)
    if ref.returncode != 0:
        raise SystemExit(f"reference failed on {trace} {args}: {ref.stderr.strip()}")
    return json.loads(out.stdout)["results"], json.loads(ref.stdout)["results"]


def flatten_tiers(row):
    """kvindex nests per-tier counts ({"tiers": {"gpu": {...}}}); the reference keeps them flat."""
    for t, counts in row.get("tiers", {}).items():
        row[f"prefix_hit_{t}"] = counts["prefix_hit_blocks"]
        row[f"any_hit_{t}"] = counts["any_hit_blocks"]
    for inst in row.get("per_instance", []):
        flatten_tiers(inst)


def compare(label, ours, theirs):
    problems = []
    for row in ours:
        flatten_tiers(row)
    if len(ours) != len(theirs):
        return [f"{label}: {len(ours)} rows vs reference {len(theirs)}"]
    for a, b in zip(ours, theirs):
        config = f"{a['policy']}/{a['capacity']}/{a['router']}/{a['instances']}"
        for key in ("policy", "capacity", "router", "instances"):
            if a[key] != b[key]:
                problems.append(f"{label} {config}: {key} {a[key]} vs reference {b[key]}")
        for key in COUNTS + TIER_COUNTS:
            if a[key] != b[key]:
                problems.append(f"{label} {config}: {key} {a[key]} vs reference {b[key]}")
        for ia, ib in zip(a["per_instance"], b["per_instance"]):
            for key in COUNTS + TIER_COUNTS:
                if ia[key] != ib[key]:
                    problems.append(f"{label} {config} instance {ia['instance']}: {key} "
                                    f"{ia[key]} vs reference {ib[key]}")
        if len(a["per_instance"]) != len(b["per_instance"]):
            problems.append(f"{label} {config}: per_instance length differs")
    return problems


def main():
    kvindex, work = sys.argv[1], sys.argv[2]
    traces = sys.argv[3] if len(sys.argv) > 3 else MOONCAKE_TRACES
    problems = []
    rows = 0
    for seed in (1, 2):
        rng = random.Random(seed)
        for kind, maker, n in (("mooncake", random_mooncake, 250), ("bailian", random_bailian, 250)):
            path = os.path.join(work, f"random_{kind}_{seed}.jsonl")
            maker(rng, path, n)
            args = ["--policy", ALL_POLICIES, "--router", ALL_ROUTERS, "--capacity", "1,3,17,inf",
                    "--instances", "1,3", "--seed", str(seed * 7)]
            ours, theirs = run_both(kvindex, path, args)
            rows += len(ours)
            problems += compare(f"seed {seed} {kind}", ours, theirs)
            # Tiers: a small GPU over a shared CPU pool and disk, each alone and both.
            for tiers in (["--cpu-capacity", "5"], ["--disk-capacity", "7"],
                          ["--cpu-capacity", "4", "--disk-capacity", "9"],
                          ["--cpu-capacity", "3", "--disk-capacity", "inf"],
                          ["--cpu-capacity", "5", "--tier-write", "victim"],
                          ["--disk-capacity", "7", "--tier-write", "victim"],
                          ["--cpu-capacity", "4", "--disk-capacity", "9", "--tier-write", "victim"],
                          ["--cpu-capacity", "3", "--disk-capacity", "inf", "--tier-write",
                           "victim"]):
                args = ["--policy", ALL_POLICIES, "--router", "cache-aware,random",
                        "--capacity", "1,3", "--instances", "1,3",
                        "--seed", str(seed * 7)] + tiers
                ours, theirs = run_both(kvindex, path, args)
                rows += len(ours)
                problems += compare(f"seed {seed} {kind} {' '.join(tiers)}", ours, theirs)
    for name in ("conversation_trace.jsonl", "synthetic_trace.jsonl"):
        path = os.path.join(traces, name)
        args = ["--max-requests", "200", "--policy", ALL_POLICIES,
                "--router", "round-robin,cache-aware", "--capacity", "256",
                "--instances", "2"]
        ours, theirs = run_both(kvindex, path, args)
        rows += len(ours)
        problems += compare(name, ours, theirs)
        for mode in ("victim", "through"):
            ours, theirs = run_both(kvindex, path, ["--max-requests", "300", "--capacity", "64",
                                                    "--cpu-capacity", "128", "--disk-capacity",
                                                    "256", "--instances", "2", "--tier-write",
                                                    mode])
            rows += len(ours)
            problems += compare(f"{name} tiers {mode}", ours, theirs)
        ours, theirs = run_both(kvindex, path, ["--max-requests", "1000", "--router",
                                                "random,least-loaded", "--instances", "3"])
        rows += len(ours)
        problems += compare(name + " inf", ours, theirs)
    for p in problems[:50]:
        print("DIFF", p)
    if problems:
        print(f"{len(problems)} difference(s)")
        return 1
    print(f"{rows} configurations agree with the reference simulator")
    return 0


if __name__ == "__main__":
    sys.exit(main())
