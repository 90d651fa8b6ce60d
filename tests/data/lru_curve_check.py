#!/usr/bin/python3
"""Checks `kvindex replay TRACE --curve` (docs/simulation.md "Hit-rate curves") at 20+ capacities.

  lru_curve_check.py KVINDEX TRACE [--instances N] [--router R] [--max-requests N] [--no-reference]

1. The curve (--json) is a step function: capacities ascending from 1, counts never falling, a
   row only where a count changes; its "reach" capacities are the first reaching each share.
2. At 24 capacities (steps, the capacity just below a step, log-spaced ones, the working set and
   beyond) its counts equal a plain `kvindex replay --capacity C` simulation, one grid run.
3. With round-robin (unless --no-reference), they equal this file's own plain LRU simulator: an
   OrderedDict per instance, run once per capacity, written from the definitions only (lookup
   counts resident blocks and the resident prefix, then each block is accessed in order).
Exit 0 when everything agrees, else 1 with the differences.
"""
import argparse
import collections
import json
import math
import subprocess
import sys


def kvindex_json(kvindex, trace, args):
    out = subprocess.run([kvindex, "replay", trace, "--json", "-"] + args, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"kvindex failed ({args}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def read_requests(path, max_requests):
    requests = []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                requests.append((float(r["timestamp"]), r["hash_ids"]))
                if max_requests and len(requests) >= max_requests:
                    break
    requests.sort(key=lambda r: r[0])  # stable: equal timestamps keep file order
    return [ids for _, ids in requests]


def plain_lru(requests, capacity, instances):
    """(prefix hit blocks, any hit blocks) of round-robin over `instances` LRU caches."""
    caches = [collections.OrderedDict() for _ in range(instances)]
    prefix_hits = any_hits = 0
    for i, ids in enumerate(requests):
        cache = caches[i % instances]
        k = 0
        while k < len(ids) and ids[k] in cache:
            k += 1
        prefix_hits += k
        any_hits += sum(1 for b in ids if b in cache)
        for b in ids:
            if b in cache:
                cache.move_to_end(b)
            else:
                cache[b] = None
                if len(cache) > capacity:
                    cache.popitem(last=False)
    return prefix_hits, any_hits


def at(steps, capacity):
    best = (0, 0)
    for s in steps:
        if s["capacity"] <= capacity:
            best = (s["prefix_hit_blocks"], s["any_hit_blocks"])
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kvindex")
    p.add_argument("trace")
    p.add_argument("--instances", default="1")
    p.add_argument("--router", default="round-robin")
    p.add_argument("--max-requests", type=int, default=0)
    p.add_argument("--no-reference", action="store_true")
    a = p.parse_args()
    common = ["--instances", a.instances, "--router", a.router]
    if a.max_requests:
        common += ["--max-requests", str(a.max_requests)]
    problems = []
    doc = kvindex_json(a.kvindex, a.trace, ["--curve"] + common)
    steps = doc["curve"]
    caps = [s["capacity"] for s in steps]
    if not steps or caps[0] != 1 or caps != sorted(set(caps)):
        problems.append(f"capacities not ascending from 1: {caps[:10]}")
    for prev, cur in zip(steps, steps[1:]):
        if (cur["prefix_hit_blocks"] < prev["prefix_hit_blocks"]
                or cur["any_hit_blocks"] < prev["any_hit_blocks"]):
            problems.append(f"count falls at capacity {cur['capacity']}")
        if (cur["prefix_hit_blocks"], cur["any_hit_blocks"]) == (prev["prefix_hit_blocks"],
                                                                 prev["any_hit_blocks"]):
            problems.append(f"row without a change at capacity {cur['capacity']}")
    reach = doc["reach"][0]
    working_set = reach["working_set"]
    final = (steps[-1]["prefix_hit_blocks"], steps[-1]["any_hit_blocks"])
    for target in reach["targets"]:
        for key, idx in (("prefix_capacity", 0), ("any_capacity", 1)):
            want = next((s["capacity"] for s in steps
                         if (s["prefix_hit_blocks"], s["any_hit_blocks"])[idx] * 100
                         >= final[idx] * round(target["share"] * 100)), None) if final[idx] else None
            if target[key] != want:
                problems.append(f"reach {target['share']} {key}: {target[key]} != {want}")

    # 24 capacities: every kind of point of a step function.
    chosen = {1, working_set, working_set + 100}
    for k in range(1, 8):
        chosen.add(steps[(len(steps) - 1) * k // 8]["capacity"])
        chosen.add(max(1, steps[(len(steps) - 1) * k // 8]["capacity"] - 1))
    k = 0
    while len(chosen) < 24 and k < 64:
        chosen.add(max(1, round(math.exp(math.log(max(2, working_set)) * k / 15))))
        k += 1
    chosen = sorted(chosen)
    if len(chosen) < 20:
        problems.append(f"only {len(chosen)} distinct capacities to check")
    grid = kvindex_json(a.kvindex, a.trace,
                        ["--capacity", ",".join(map(str, chosen)), "--threads", "2"] + common)
    sim = {r["capacity"]: (r["prefix_hit_blocks"], r["any_hit_blocks"]) for r in grid["results"]}
    requests = None
    if a.router == "round-robin" and not a.no_reference:
        requests = read_requests(a.trace, a.max_requests)
    for c in chosen:
        mine = at(steps, c)
        if sim[c] != mine:
            problems.append(f"capacity {c}: curve {mine} != simulation {sim[c]}")
        if requests is not None:
            ref = plain_lru(requests, c, int(a.instances))
            if ref != mine:
                problems.append(f"capacity {c}: curve {mine} != reference {ref}")
    for p_ in problems[:30]:
        print("DIFF", p_)
    if problems:
        return 1
    print(f"{a.trace} x{a.instances} {a.router}: {len(steps)} steps, working set {working_set}; "
          f"{len(chosen)} capacities agree" + ("" if requests is None else " (and the reference)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
