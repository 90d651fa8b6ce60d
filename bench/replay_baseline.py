#!/usr/bin/python3
"""The Python baseline of scripts/bench-replay.sh: a straightforward single-instance simulator of
docs/simulation.md (the one a capacity planner would write first), timed over the same sweep as
kvindex.

    replay_baseline.py TRACE --policy lru,lfu,fifo --capacity 1000,10000,inf

It uses the idiomatic efficient structures, not naive scans (that is tests/data/sim_reference.py,
the correctness oracle): collections.OrderedDict for lru and fifo, and frequency buckets of
OrderedDicts for lfu, all O(1) per access. It reads the trace with the json module, sorts by
timestamp, and prints one JSON row per configuration with the counts, so the run is checked
against kvindex's numbers as well as timed.
"""
import argparse
import json
import sys
from collections import OrderedDict, defaultdict


def simulate(requests, policy, capacity):
    prefix_hits = any_hits = evictions = blocks = 0
    if policy in ("lru", "fifo"):
        cache = OrderedDict()
        for ids in requests:
            k = 0
            while k < len(ids) and ids[k] in cache:
                k += 1
            prefix_hits += k
            any_hits += k + sum(1 for b in ids[k:] if b in cache)
            blocks += len(ids)
            for b in ids:
                if b in cache:
                    if policy == "lru":
                        cache.move_to_end(b)
                    continue
                if capacity is not None and len(cache) >= capacity:
                    cache.popitem(last=False)
                    evictions += 1
                cache[b] = True
    elif policy == "lfu":
        freq = {}
        buckets = defaultdict(OrderedDict)  # frequency -> blocks, least recently accessed first
        min_freq = 0
        for ids in requests:
            k = 0
            while k < len(ids) and ids[k] in freq:
                k += 1
            prefix_hits += k
            any_hits += k + sum(1 for b in ids[k:] if b in freq)
            blocks += len(ids)
            for b in ids:
                f = freq.get(b)
                if f is not None:
                    del buckets[f][b]
                    if not buckets[f]:
                        del buckets[f]
                        if min_freq == f:
                            min_freq = f + 1
                    freq[b] = f + 1
                    buckets[f + 1][b] = True
                    continue
                if capacity is not None and len(freq) >= capacity:
                    victim, _ = buckets[min_freq].popitem(last=False)
                    if not buckets[min_freq]:
                        del buckets[min_freq]
                    del freq[victim]
                    evictions += 1
                freq[b] = 1
                buckets[1][b] = True
                min_freq = 1
    else:
        raise ValueError(policy)
    return dict(policy=policy, capacity=capacity, blocks=blocks, prefix_hit_blocks=prefix_hits,
                any_hit_blocks=any_hits, evictions=evictions)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--policy", default="lru,lfu,fifo")
    p.add_argument("--capacity", default="1000,10000,inf")
    a = p.parse_args()
    with open(a.trace) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows.sort(key=lambda r: r["timestamp"])
    requests = [r["hash_ids"] for r in rows]
    out = []
    for policy in a.policy.split(","):
        for cap in a.capacity.split(","):
            out.append(simulate(requests, policy, None if cap == "inf" else int(cap)))
    json.dump({"results": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
