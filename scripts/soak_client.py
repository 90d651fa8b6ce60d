#!/usr/bin/env python3
"""The HTTP side of scripts/soak.sh, against `kvindex subscribe --http`.

  soak_client.py load --port P --stop FILE --queries-dir DIR [--qps N]
      A steady /query load (plus /instances and /metrics now and then) until FILE exists. Prompts
      come from the query files publish-fake wrote in DIR (round-*.queries.jsonl), so queries walk
      real chains, plus random ones. Every answer must be 200 with the documented JSON shape.
      Prints "load: N requests (R/s), F failed"; exits 1 when any failed or none ran.

  soak_client.py check --port P --queries FILE [--wait S]
      Sends every query of FILE that has no "after" (publish-fake's final queries) to /query and
      compares each instance its "expect" lists exactly, as `kvindex replay --queries` does.
      Retries for up to S seconds while the subscriber may still be applying the stream. Prints
      "N final answers exact"; exits 1 listing the differences otherwise.
"""
import argparse
import glob
import http.client
import json
import os
import random
import sys
import time


class Client:
    def __init__(self, port):
        self.port = port
        self.conn = None

    def request(self, method, path, body=None):
        for attempt in range(2):  # one reconnect: the server closes idle keep-alive connections
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                data = None if body is None else json.dumps(body)
                headers = {} if body is None else {"Content-Type": "application/json"}
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read().decode("utf-8")
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")


def final_queries(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                if q.get("after") is None:
                    out.append(q)
    return out


def load(args):
    client = Client(args.port)
    rng = random.Random(1)
    prompts = []
    seen_files = set()
    requests = failed = 0
    start = time.time()
    last_error = ""
    while not os.path.exists(args.stop):
        for path in sorted(glob.glob(os.path.join(args.queries_dir, "round-*.queries.jsonl"))):
            if path not in seen_files:
                try:
                    prompts += [q["query"]["token_ids"] for q in final_queries(path)]
                    seen_files.add(path)
                except (OSError, ValueError, KeyError):
                    pass  # still being written: read it next time
        if prompts and rng.random() < 0.8:
            tokens = rng.choice(prompts)
        else:
            tokens = [rng.randrange(50000) for _ in range(128)]
        try:
            if requests % 100 == 99:
                path = "/metrics" if requests % 200 == 199 else "/instances"
                status, body = client.request("GET", path)
                ok = status == 200 and (path == "/metrics" or isinstance(json.loads(body), dict))
            else:
                body = {"model": "fake-model", "token_ids": tokens}
                status, body = client.request("POST", "/query", body)
                answer = json.loads(body)
                ok = status == 200 and isinstance(answer.get("data"), dict)
            if not ok:
                last_error = "status %d: %s" % (status, body[:200])
        except (OSError, ValueError, http.client.HTTPException) as e:
            ok = False
            last_error = repr(e)
        requests += 1
        if not ok:
            failed += 1
            print("load: request %d failed: %s" % (requests, last_error), file=sys.stderr)
        # Pace to --qps on average.
        ahead = requests / args.qps - (time.time() - start)
        if ahead > 0:
            time.sleep(ahead)
    seconds = max(time.time() - start, 1e-9)
    print("load: %d requests (%.0f/s), %d failed" % (requests, requests / seconds, failed))
    return 1 if failed or requests == 0 else 0


def differences(client, queries):
    out = []
    for q in queries:
        status, body = client.request("POST", "/query", q["query"])
        if status != 200:
            out.append("%s: status %d: %s" % (q.get("id"), status, body[:200]))
            continue
        data = json.loads(body)["data"]
        tenant = str(q["query"].get("tenant_id", "default"))
        got = data.get(tenant, {})
        for instance, want in q["expect"].items():
            have = got.get(instance)
            if have is None or any(have.get(k) != v for k, v in want.items()):
                out.append("%s: %s: expected %s, got %s" % (q.get("id"), instance, want, have))
    return out


def check(args):
    client = Client(args.port)
    queries = [q for q in final_queries(args.queries) if q.get("expect") is not None]
    if not queries:
        print("check: %s has no final query with an expectation" % args.queries)
        return 1
    deadline = time.time() + args.wait
    while True:
        diffs = differences(client, queries)
        if not diffs or time.time() > deadline:
            break
        time.sleep(0.5)
    if diffs:
        for d in diffs:
            print("check: " + d)
        print("check: %d of %d final answers differ" % (len(diffs), len(queries)))
        return 1
    print("%d final answers exact" % len(queries))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("load")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--queries-dir", required=True)
    p.add_argument("--qps", type=float, default=200)
    p = sub.add_parser("check")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--wait", type=float, default=60)
    args = parser.parse_args()
    return load(args) if args.command == "load" else check(args)


if __name__ == "__main__":
    sys.exit(main())
