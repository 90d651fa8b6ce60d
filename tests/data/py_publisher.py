#!/usr/bin/python3
"""An independent KV-event publisher for the live-path tests (python3-zmq + python3-msgpack).

It publishes vLLM array-era batches (`[ts, [events], dp_rank]`, events
`["BlockStored", [hash], parent, token_ids, block_size, None, "GPU", None]`) as
`[topic, seq_be8, payload]` on an XPUB, keeps every batch it "published" in a replay ring served
by a ROUTER in the chosen reply layout, and applies the faults a plan asks for. Written from
docs/wire-formats.md ("Messages", "Replay") alone; it shares no code with kvindex.

Usage: py_publisher.py --pub EP [--connect] [--replay EP] [--style vllm|vllm-topic|mooncake]
                       [--ring N] [--topic T] --plan FILE [--ready FILE] [--serve S]

The plan is JSON: {"steps": [step...]}; steps run in order:
  {"seq": n, "blocks": [[hash, parent|null, [tokens...]], ...]}   one batch (block size = tokens)
     optional: "skip": true      not sent live (still in the ring: a drop)
               "dup": true       sent twice
               "corrupt": true   the live copy's payload is garbage (the ring keeps the good one)
               "ring": false     not kept in the ring (a batch the ring has lost)
  {"frames": ["hex", ...]}       a raw live message (e.g. a bad frame count); not in the ring
  {"wait_sub": true}             wait (<= 20 s) until a subscriber has subscribed
  {"wait_subs": n}               wait (<= 20 s) until n subscriptions have arrived in all (a
                                 subscriber that reconnects subscribes again)
  {"wait_request": true}         wait (<= 20 s) until one replay request has been served
  {"wait_served": n}             wait (<= 20 s) until n replay requests have been served in all
                                 (counting those served before this step: a race-free wait)
  {"sleep": s}
  {"clear_ring": true}           forget the ring (a publisher restart)
  {"hold_replies": true}         from now on, each replay reply is made from the ring when its
                                 request arrives but held back (a slow publisher)
  {"send_held": true}            send the held replies, oldest first, each to the socket that
                                 asked (a closed one gets nothing), and stop holding
  {"ready": true}                write the --ready file now (default: before the first step)
After the steps it keeps serving replay requests for --serve seconds (default 20), or until
stdin reaches EOF when --serve is 0. --ready FILE is written once the sockets are bound.
"""
import argparse
import json
import sys
import time

import msgpack
import zmq

END = b"\xff" * 8


def payload_of(step):
    events = []
    for block in step["blocks"]:
        h, parent, tokens = block
        events.append(["BlockStored", [h], parent, tokens, len(tokens), None, "GPU", None])
    return msgpack.packb([float(step["seq"]), events, 0], use_bin_type=True)


class Publisher:
    def __init__(self, args):
        self.args = args
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.SNDHWM, 1000000)
        self.pub.setsockopt(zmq.LINGER, 2000)
        if args.connect:
            self.pub.connect(args.pub)
        else:
            self.pub.bind(args.pub)
        self.router = None
        if args.replay:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 2000)
            self.router.setsockopt(zmq.SNDHWM, 1000000)
            self.router.bind(args.replay)
        self.topic = args.topic.encode()
        self.ring = []  # (seq, payload)
        self.subscriptions = 0
        self.served = 0
        self.held = None  # replies held back (hold_replies), or None
        self.subscribed = False
        self.log = open(args.log, "w") if args.log else None

    def write_ready(self):
        if self.args.ready:
            info = {"pub": self.pub.getsockopt(zmq.LAST_ENDPOINT).decode()}
            if self.router is not None:
                info["replay"] = self.router.getsockopt(zmq.LAST_ENDPOINT).decode()
            with open(self.args.ready + ".tmp", "w") as f:
                json.dump(info, f)
            import os
            os.rename(self.args.ready + ".tmp", self.args.ready)

    def poll(self, timeout_ms):
        poller = zmq.Poller()
        poller.register(self.pub, zmq.POLLIN)
        if self.router is not None:
            poller.register(self.router, zmq.POLLIN)
        for sock, _ in poller.poll(timeout_ms):
            if sock is self.pub:
                msg = self.pub.recv()
                if msg[:1] == b"\x01":
                    self.subscribed = True
                    self.subscriptions += 1
            else:
                self.serve_one()

    def serve_one(self):
        frames = self.router.recv_multipart()
        if len(frames) != 3 or frames[1] != b"" or len(frames[2]) != 8:
            return  # as vLLM: an invalid request gets no reply
        identity, start = frames[0], int.from_bytes(frames[2], "big")
        self.served += 1
        if self.args.mute_replay:
            return
        style = self.args.style
        reply = []
        for seq, payload in self.ring[-self.args.ring:]:
            if seq < start:
                continue
            seq8 = seq.to_bytes(8, "big")
            if style == "vllm-topic":
                reply.append([identity, b"", self.topic, seq8, payload])
            else:
                reply.append([identity, b"", seq8, payload])
        if style == "vllm-topic":
            reply.append([identity, b"", b"", END, b""])
        elif style == "mooncake":
            reply.append([identity, b"", b"", END])
        else:
            reply.append([identity, b"", END, b""])
        if self.held is not None:
            self.held.append(reply)
            return
        for frames in reply:
            self.router.send_multipart(frames)

    def wait(self, predicate, what):
        deadline = time.time() + 20
        while not predicate():
            if time.time() > deadline:
                sys.exit("py_publisher: timed out waiting for " + what)
            self.poll(20)

    def send(self, frames):
        self.pub.send_multipart(frames)
        if self.log is not None:
            self.log.write(json.dumps([f.hex() for f in frames]) + "\n")
            self.log.flush()

    def run(self, steps):
        for step in steps:
            self.poll(0)
            if "seq" in step:
                payload = payload_of(step)
                seq8 = step["seq"].to_bytes(8, "big")
                if step.get("ring", True):
                    self.ring.append((step["seq"], payload))
                if step.get("skip"):
                    continue
                live = b"\xc1garbage" if step.get("corrupt") else payload
                self.send([self.topic, seq8, live])
                if step.get("dup"):
                    self.send([self.topic, seq8, live])
            elif "frames" in step:
                self.send([bytes.fromhex(f) for f in step["frames"]])
            elif step.get("wait_sub"):
                self.wait(lambda: self.subscribed, "a subscriber")
            elif "wait_subs" in step:
                target = step["wait_subs"]
                self.wait(lambda: self.subscriptions >= target, "subscriptions")
            elif step.get("wait_request"):
                target = self.served + 1
                self.wait(lambda: self.served >= target, "a replay request")
            elif "wait_served" in step:
                target = step["wait_served"]
                self.wait(lambda: self.served >= target, "replay requests")
            elif "sleep" in step:
                end = time.time() + step["sleep"]
                while time.time() < end:
                    self.poll(10)
            elif step.get("clear_ring"):
                self.ring = []
            elif step.get("hold_replies"):
                self.held = []
            elif step.get("send_held"):
                held, self.held = self.held or [], None
                for reply in held:
                    for frames in reply:
                        self.router.send_multipart(frames)
            elif step.get("ready"):
                self.write_ready()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pub", required=True)
    parser.add_argument("--connect", action="store_true")
    parser.add_argument("--replay")
    parser.add_argument("--style", default="vllm", choices=["vllm", "vllm-topic", "mooncake"])
    parser.add_argument("--ring", type=int, default=10000)
    parser.add_argument("--topic", default="")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--ready")
    parser.add_argument("--serve", type=float, default=20)
    parser.add_argument("--mute-replay", action="store_true", help="never answer replay requests")
    parser.add_argument("--log", help="write every live message sent, as JSON lines of hex frames")
    args = parser.parse_args()
    with open(args.plan) as f:
        steps = json.load(f)["steps"]
    publisher = Publisher(args)
    if not any(step.get("ready") for step in steps):
        publisher.write_ready()
    publisher.run(steps)
    if args.serve > 0:
        end = time.time() + args.serve
        while time.time() < end:
            publisher.poll(50)
    else:
        import select
        while True:
            ready, _, _ = select.select([sys.stdin], [], [], 0.02)
            if ready and not sys.stdin.buffer.read1(4096):
                break
            publisher.poll(0)


if __name__ == "__main__":
    main()
