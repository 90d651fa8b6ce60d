#!/usr/bin/env bash
# A replay reply that arrives after its publisher restarted must not answer the new run's
# request (docs/sequence-rules.md "Duplicates"). The independent Python publisher holds its
# replies back: the old run (seqs 0-6, 5 not sent live) asks from 5; the publisher restarts
# (new blocks, seqs 0-3, 2 not sent live) and the new run asks from 2; then both held replies are
# sent, the old one (5, 6 of the old run) first. Expected by hand: the old run loses 5 and 6 at
# the restart (2 lost), the new run recovers 2 from its own reply (1 recovered), and the index
# holds the new run's 4 blocks only. Taking the old reply for the new request would apply the
# old run's 5 and 6 to the new run and lose its 2 and 4.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"

"$PY" - "$TMP/plan.json" <<'PYEOF'
import json, sys
def run(base, seqs, skip):
    steps = []
    for s in seqs:
        parent = None if s == 0 else base + s - 1
        step = {"seq": s, "blocks": [[base + s, parent, list(range(base + 4 * s, base + 4 * s + 4))]]}
        if s == skip:
            step["skip"] = True
        steps.append(step)
    return steps
steps = [{"wait_sub": True}, {"wait_served": 1}, {"hold_replies": True}]
steps += run(1000, range(7), 5) + [{"wait_served": 2}, {"clear_ring": True}]
steps += run(2000, range(4), 2) + [{"wait_served": 3}, {"send_held": True}, {"sleep": 30}]
json.dump({"steps": steps}, open(sys.argv[1], "w"))
PYEOF
start_pub p "$TMP/plan.json" --replay 'tcp://127.0.0.1:*'
run timeout 30 "$KVINDEX" subscribe --source "a=vllm@$PUB_EP,model=m,replay=$REPLAY_EP" \
  --replay-timeout 10 --stats-interval 0 --duration 4 --json "$TMP/s.json"
expect_status 0 "subscribe"
"$PY" - "$TMP/s.json" <<'PYEOF' || fail "the old run's late reply answered the new run's request"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["total"]
assert t["restarts"] == 1, t
assert t["lost"] == 2 and t["recovered"] == 1, t
assert j["index"]["blocks"] == 4 and j["index"]["orphans"] == 0, j["index"]
PYEOF
finish
