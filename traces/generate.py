#!/usr/bin/python3
"""Generates kvindex's bundled sample request trace (Mooncake FAST'25 JSONL; traces/README.md).

    /usr/bin/python3 traces/generate.py [--requests N] [--seed S] > traces/sample.jsonl

The workload is a chat service with retrieval:
  * a few system prompts (Zipf-popular) open every conversation;
  * about half the conversations quote a document drawn from a Zipf-popular library (s = 1.1),
    so popular documents are shared across conversations;
  * conversations are multi-turn: each turn's prompt is the whole previous prompt, the previous
    reply and a new user message, so turn k+1 extends turn k's prefix;
  * conversations arrive as a Poisson process and users think between turns (exponential), so
    many conversations interleave.
Hash ids are prefix-chained as in the public traces: a block's id names its whole prefix (the
same content after a different prefix gets a different id); ids are numbered in order of first
appearance. Every id stands for 512 tokens; the last block of a prompt is partial.
Only the standard library is used, with a fixed seed, so the output is reproducible.
"""
import argparse
import heapq
import json
import random
import sys

BLOCK_TOKENS = 512


class PrefixIds:
    """Numbers blocks by (parent id, content): the same prefix always gets the same id."""

    def __init__(self):
        self.ids = {}

    def chain(self, contents):
        ids, parent = [], -1
        for content in contents:
            key = (parent, content)
            if key not in self.ids:
                self.ids[key] = len(self.ids)
            parent = self.ids[key]
            ids.append(parent)
        return ids


def zipf_weights(n, s):
    return [1.0 / (rank + 1) ** s for rank in range(n)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--seed", type=int, default=20251130)
    a = p.parse_args()
    rng = random.Random(a.seed)

    system_prompts = [rng.randint(2, 6) for _ in range(4)]          # blocks each
    documents = [rng.randint(2, 14) for _ in range(300)]            # blocks each
    sys_weights = zipf_weights(len(system_prompts), 1.0)
    doc_weights = zipf_weights(len(documents), 1.1)
    ids = PrefixIds()

    # Events: (time ms, order, conversation state). A conversation is (contents, turns left).
    events = []
    order = 0
    t = 0.0
    conversation = 0
    out = []
    while len(out) < a.requests:
        # Start new conversations until the next one would arrive after the earliest pending turn.
        if not events or t <= events[0][0]:
            s = rng.choices(range(len(system_prompts)), sys_weights)[0]
            contents = [("sys", s, i) for i in range(system_prompts[s])]
            if rng.random() < 0.5:
                d = rng.choices(range(len(documents)), doc_weights)[0]
                contents += [("doc", d, i) for i in range(documents[d])]
            state = {"id": conversation, "contents": contents, "turn": 0,
                     "turns": 1 + min(int(rng.expovariate(1 / 3.0)), 11)}
            conversation += 1
            heapq.heappush(events, (t, order, state))
            order += 1
            t += rng.expovariate(1 / 900.0)  # a new conversation every 0.9 s on average
            continue
        now, _, state = heapq.heappop(events)
        # The user's new message: 1-3 blocks of fresh content.
        state["contents"] = state["contents"] + [
            ("user", state["id"], state["turn"], i) for i in range(rng.randint(1, 3))]
        hash_ids = ids.chain(state["contents"])
        input_length = len(hash_ids) * BLOCK_TOKENS - rng.randrange(0, BLOCK_TOKENS)
        output_length = rng.randint(30, 700)
        out.append({"timestamp": int(now), "input_length": input_length,
                    "output_length": output_length, "hash_ids": hash_ids})
        state["turn"] += 1
        if state["turn"] < state["turns"]:
            # The reply joins the context (whole blocks of it); the user thinks for ~20 s.
            reply_blocks = max(1, output_length // BLOCK_TOKENS + (1 if rng.random() < 0.5 else 0))
            state["contents"] = state["contents"] + [
                ("reply", state["id"], state["turn"], i) for i in range(reply_blocks)]
            heapq.heappush(events, (now + 2000 + rng.expovariate(1 / 20000.0), order, state))
            order += 1
    out.sort(key=lambda r: r["timestamp"])
    for r in out:
        sys.stdout.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
