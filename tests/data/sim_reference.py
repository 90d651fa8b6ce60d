#!/usr/bin/python3
"""A deliberately naive reference simulator for `kvindex replay` (docs/simulation.md).

Written separately from the C++ simulator, from the definitions alone, with plain lists and dicts
and linear scans: every eviction searches all resident blocks for the victim. It is slow on
purpose (obviously right beats fast here); tests/cli/replay_reference.sh compares every count it
reports with the C++ one.

  sim_reference.py TRACE [--capacity LIST] [--policy LIST] [--router LIST] [--instances LIST]
                   [--seed N] [--block-tokens N] [--max-requests N]
                   [--cpu-capacity N|inf] [--disk-capacity N|inf] [--tier-write through|victim]

Tiers (docs/simulation.md "Tiers"): each instance's cache is its GPU tier; an optional shared CPU
pool and shared disk, both LRU and inclusive. Lookup: a block is served by the instance's GPU, else
the pool, else the disk. Access of a block missing from the GPU: first refresh its copy in the
highest shared tier that holds it, then insert it into the GPU; a GPU victim is written to the CPU
pool (or to the disk when there is no pool), a CPU victim to the disk, a disk victim is dropped.
That is --tier-write victim. With --tier-write through (the default, as kvindex's), every access
also writes the block into the CPU pool (or the disk when there is no pool), first refreshing a
disk copy of a block the pool does not hold; GPU victims are dropped, CPU victims go to the disk.

prints {"results": [row, ...]} on stdout, rows in the same grid order as kvindex
(policy, capacity, router, instances).
"""
import argparse
import json
import sys

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def read_trace(path, max_requests):
    requests = []
    bailian = False
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "chat_id" in r:
                bailian = True
            requests.append(r)
            if max_requests and len(requests) >= max_requests:
                break
    for r in requests:
        r["ts_ms"] = r["timestamp"] * 1000.0 if bailian else float(r["timestamp"])
    requests.sort(key=lambda r: r["ts_ms"])  # Python's sort is stable
    return requests, bailian


class Cache:
    """One instance's cache: a list of resident blocks plus per-block facts."""

    def __init__(self, policy, capacity):
        self.policy = policy
        self.capacity = capacity  # None = infinite
        self.resident = []        # blocks, any order
        self.last_access = {}     # block -> time of its last access
        self.inserted = {}        # block -> time of its insert
        self.freq = {}            # block -> accesses since insert
        self.parent = {}          # block -> parent block (prefix-lru) or None
        self.evictions = 0

    def has(self, block):
        return block in self.last_access  # a dict: the same set as self.resident

    def pick_victim(self):
        if self.policy == "lru":
            return min(self.resident, key=lambda b: self.last_access[b])
        if self.policy == "fifo":
            return min(self.resident, key=lambda b: self.inserted[b])
        if self.policy == "lfu":
            return min(self.resident, key=lambda b: (self.freq[b], self.last_access[b]))
        if self.policy == "prefix-lru":
            has_child = set()
            for b in self.resident:
                if self.parent[b] is not None:
                    has_child.add(self.parent[b])
            leaves = [b for b in self.resident if b not in has_child]
            return min(leaves, key=lambda b: self.last_access[b])
        raise ValueError(self.policy)

    def access(self, block, previous, now):
        """Touches block; returns the evicted block or None."""
        victim = None
        if self.has(block):
            self.last_access[block] = now
            self.freq[block] += 1
            return None
        if self.capacity is not None and len(self.resident) >= self.capacity:
            victim = self.pick_victim()
            self.resident.remove(victim)
            del self.last_access[victim], self.inserted[victim], self.freq[victim]
            del self.parent[victim]
            self.evictions += 1
        self.resident.append(block)
        self.last_access[block] = now
        self.inserted[block] = now
        self.freq[block] = 1
        if previous is not None and previous != block and previous in self.resident:
            self.parent[block] = previous
        else:
            self.parent[block] = None
        return victim


TIERS = ["gpu", "cpu", "disk"]


def simulate(requests, policy, capacity, router, n, seed, block_tokens, cpu_cap=0, disk_cap=0,
             through=False):
    caches = [Cache(policy, capacity) for _ in range(n)]
    cpu = Cache("lru", cpu_cap) if cpu_cap != 0 else None   # cpu_cap None = infinite
    disk = Cache("lru", disk_cap) if disk_cap != 0 else None
    shared_evictions = [dict(cpu_evictions=0, disk_evictions=0) for _ in range(n)]
    load = [0] * n
    stats = [dict(requests=0, blocks=0, prefix_hit_blocks=0, any_hit_blocks=0,
                  input_tokens=0, prefix_hit_tokens=0,
                  **{f"prefix_hit_{t}": 0 for t in TIERS}, **{f"any_hit_{t}": 0 for t in TIERS})
             for _ in range(n)]
    rng = SplitMix64(seed)
    session = {}
    now = 0

    def tier_of(cache, b):
        if cache.has(b):
            return "gpu"
        if cpu is not None and cpu.has(b):
            return "cpu"
        if disk is not None and disk.has(b):
            return "disk"
        return None

    def prefix_of(cache, ids):
        k = 0
        while k < len(ids) and tier_of(cache, ids[k]) is not None:
            k += 1
        return k

    def least_loaded():
        return min(range(n), key=lambda k: (load[k], k))

    for i, r in enumerate(requests):
        ids = r["hash_ids"]
        if router == "round-robin":
            inst = i % n
        elif router == "random":
            inst = rng.next() % n
        elif router == "least-loaded":
            inst = least_loaded()
        elif router == "cache-aware":
            def tokens(k):
                return min(prefix_of(caches[k], ids) * block_tokens, r["input_length"])
            inst = min(range(n), key=lambda k: (-tokens(k), load[k], k))
        elif router == "session":
            parent = r.get("parent_chat_id", -1)
            if parent is not None and parent >= 0 and parent in session:
                inst = session[parent]
            else:
                inst = least_loaded()
        else:
            raise ValueError(router)
        cache = caches[inst]
        s = stats[inst]
        prefix = prefix_of(cache, ids)
        anyhit = 0
        for k, b in enumerate(ids):
            t = tier_of(cache, b)
            if t is not None:
                anyhit += 1
                s[f"any_hit_{t}"] += 1
                if k < prefix:
                    s[f"prefix_hit_{t}"] += 1
        previous = None
        for b in ids:
            now += 1
            if through and (cpu is not None or disk is not None):
                cache.access(b, previous, now)  # the GPU victim is dropped
                pool = cpu if cpu is not None else disk
                if pool is cpu and disk is not None and not cpu.has(b) and disk.has(b):
                    now += 1
                    disk.access(b, None, now)
                now += 1
                victim = pool.access(b, None, now)
                if victim is not None:
                    key = "cpu_evictions" if pool is cpu else "disk_evictions"
                    shared_evictions[inst][key] += 1
                    if pool is cpu and disk is not None:
                        now += 1
                        if disk.access(victim, None, now) is not None:
                            shared_evictions[inst]["disk_evictions"] += 1
                previous = b
                continue
            # Every access of any tier gets its own time, so recency never ties.
            if not cache.has(b):
                if cpu is not None and cpu.has(b):
                    cpu.access(b, None, now)
                elif disk is not None and disk.has(b):
                    disk.access(b, None, now)
            now += 1
            victim = cache.access(b, previous, now)
            if victim is not None and cpu is not None:
                now += 1
                victim = cpu.access(victim, None, now)
                if victim is not None:
                    shared_evictions[inst]["cpu_evictions"] += 1
            if victim is not None and disk is not None:
                now += 1
                if disk.access(victim, None, now) is not None:
                    shared_evictions[inst]["disk_evictions"] += 1
            previous = b
        s["requests"] += 1
        s["blocks"] += len(ids)
        s["prefix_hit_blocks"] += prefix
        s["any_hit_blocks"] += anyhit
        s["input_tokens"] += r["input_length"]
        s["prefix_hit_tokens"] += min(prefix * block_tokens, r["input_length"])
        load[inst] += len(ids)
        if r.get("chat_id", -1) >= 0:
            session[r["chat_id"]] = inst
    for k in range(n):
        stats[k]["evictions"] = caches[k].evictions
        stats[k]["resident_blocks"] = len(caches[k].resident)
        stats[k].update(shared_evictions[k])
    total = {key: sum(s[key] for s in stats) for key in stats[0]}
    row = dict(policy=policy, capacity=capacity, router=router, instances=n, **total)
    row["per_instance"] = [dict(instance=k, **stats[k]) for k in range(n)]
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--capacity", default="inf")
    p.add_argument("--policy", default="lru")
    p.add_argument("--router", default="round-robin")
    p.add_argument("--instances", default="1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-tokens", type=int, default=0)
    p.add_argument("--max-requests", type=int, default=0)
    p.add_argument("--cpu-capacity", default="")
    p.add_argument("--disk-capacity", default="")
    p.add_argument("--tier-write", default="through", choices=["through", "victim"])
    a = p.parse_args()
    requests, bailian = read_trace(a.trace, a.max_requests)
    block_tokens = a.block_tokens or (16 if bailian else 512)
    def tier_cap(text):
        return 0 if text == "" else (None if text == "inf" else int(text))
    cpu_cap, disk_cap = tier_cap(a.cpu_capacity), tier_cap(a.disk_capacity)
    rows = []
    for policy in a.policy.split(","):
        for cap in a.capacity.split(","):
            capacity = None if cap == "inf" else int(cap)
            for router in a.router.split(","):
                for n in a.instances.split(","):
                    rows.append(simulate(requests, policy, capacity, router, int(n), a.seed,
                                         block_tokens, cpu_cap, disk_cap,
                                         a.tier_write == "through"))
    json.dump({"results": rows}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
