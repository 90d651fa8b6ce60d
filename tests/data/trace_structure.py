"""Independent checks of `kvindex replay CAPTURE --to-trace` (tests/cli/replay_to_trace.sh).

Knows only the trace format (docs/trace_format.md) and what a publisher of a known trace stores:
a request whose blocks its instance already holds stores nothing, any other stores its missing
suffix, which the derived trace must give back as the whole request.

  trace_structure.py expect ORIGINAL INSTANCES [RESTART_AFTER] > EXPECTED.jsonl
      the requests a capture of ORIGINAL published round-robin on INSTANCES unbounded caches
      must yield, in each instance's order (a restart after RESTART_AFTER requests of instance 0
      empties its cache), timestamps renumbered in that order
  trace_structure.py ordered EXPECTED DERIVED BLOCK_SIZE
      same requests in the same order under one consistent, one-to-one renaming of ids
  trace_structure.py unordered EXPECTED DERIVED BLOCK_SIZE
      the same multiset of requests as prefix trees (ids shared exactly where prefixes are)
  trace_structure.py hits A.json B.json
      two `replay --json` outputs with the same block counts row by row
"""
import json
import sys


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def expect(original, instances, restart_after=None):
    reqs = load(original)
    held = [set() for _ in range(instances)]
    served = [0] * instances
    per = [[] for _ in range(instances)]
    for i, r in enumerate(reqs):
        s = i % instances
        if s == 0 and restart_after is not None and served[0] == restart_after:
            held[0] = set()
        served[s] += 1
        ids = r["hash_ids"]
        if any(h not in held[s] for h in ids):
            per[s].append(ids)
        held[s].update(ids)
    out = [ids for p in per for ids in p] if instances > 1 else per[0]
    for k, ids in enumerate(out):
        print(json.dumps({"timestamp": k, "input_length": len(ids) * 512, "output_length": 0,
                          "hash_ids": ids}))


def common(derived, block_size):
    """Format rules every derived trace obeys; returns the problems found."""
    errors = []
    last = None
    first_seen = []
    seen = set()
    for n, r in enumerate(derived, 1):
        if set(r) != {"timestamp", "input_length", "output_length", "hash_ids"}:
            errors.append("line %d: keys %s" % (n, sorted(r)))
            continue
        if r["input_length"] != len(r["hash_ids"]) * block_size or r["output_length"] != 0:
            errors.append("line %d: lengths %r" % (n, r))
        if not r["hash_ids"]:
            errors.append("line %d: no hash_ids" % n)
        if last is not None and r["timestamp"] < last:
            errors.append("line %d: timestamp goes back" % n)
        last = r["timestamp"]
        for h in r["hash_ids"]:
            if h not in seen:
                seen.add(h)
                first_seen.append(h)
    if derived and derived[0]["timestamp"] != 0:
        errors.append("first timestamp %r, want 0" % derived[0]["timestamp"])
    if first_seen != list(range(len(first_seen))):
        errors.append("ids are not dense in first-seen order")
    return errors


def ordered(expected, derived, block_size):
    errors = common(derived, block_size)
    if len(expected) != len(derived):
        errors.append("%d requests, want %d" % (len(derived), len(expected)))
    forward, backward = {}, {}
    for n, (e, d) in enumerate(zip(expected, derived), 1):
        a, b = e["hash_ids"], d["hash_ids"]
        if len(a) != len(b):
            errors.append("request %d: %d ids, want %d" % (n, len(b), len(a)))
            continue
        for x, y in zip(a, b):
            if forward.setdefault(x, y) != y or backward.setdefault(y, x) != x:
                errors.append("request %d: id %d -> %d breaks the renaming" % (n, x, y))
                break
    return errors


def canon(requests):
    """A canonical text of the prefix tree of `requests` (children unordered, ends counted), and
    whether every id stands for one prefix only."""
    tree = {}
    prefix_of = {}
    consistent = True
    for ids in requests:
        node = tree
        for k, h in enumerate(ids):
            if prefix_of.setdefault(h, tuple(ids[:k])) != tuple(ids[:k]):
                consistent = False
            node = node.setdefault(h, {"#": 0})
        node["#"] += 1

    def text(node):
        kids = sorted(text(v) for k, v in node.items() if k != "#")
        return "(%d%s)" % (node.get("#", 0), "".join(kids))
    return text(tree), consistent


def unordered(expected, derived, block_size):
    errors = common(derived, block_size)
    a, ok_a = canon([r["hash_ids"] for r in expected])
    b, ok_b = canon([r["hash_ids"] for r in derived])
    if not ok_a:
        errors.append("the expected trace is not prefix-consistent (bad test input)")
    if not ok_b:
        errors.append("the derived trace gives one id to two different prefixes")
    if a != b:
        errors.append("prefix trees differ:\n  want %s\n  got  %s" % (a[:300], b[:300]))
    return errors


def hits(a_path, b_path):
    a = json.load(open(a_path))["results"]
    b = json.load(open(b_path))["results"]
    keys = ("policy", "capacity", "router", "instances", "requests", "blocks",
            "prefix_hit_blocks", "any_hit_blocks", "evictions")
    errors = []
    if len(a) != len(b):
        errors.append("%d rows against %d" % (len(a), len(b)))
    for x, y in zip(a, b):
        for k in keys:
            if x[k] != y[k]:
                errors.append("%s/%s/%s/%s: %s %r != %r" % (x["policy"], x["capacity"], x["router"],
                                                           x["instances"], k, x[k], y[k]))
    return errors


def main(argv):
    mode = argv[1]
    if mode == "expect":
        expect(argv[2], int(argv[3]), int(argv[4]) if len(argv) > 4 else None)
        return 0
    if mode == "hits":
        errors = hits(argv[2], argv[3])
    else:
        check = {"ordered": ordered, "unordered": unordered}[mode]
        errors = check(load(argv[2]), load(argv[3]), int(argv[4]))
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
