#!/usr/bin/env bash
# `kvindex query --server URL [--explain]`: publish-fake -> subscribe --http on loopback -> query
# --server, checked against publish-fake's own expected answers (--emit-queries; its model never
# links the index); an upstream-conductor-shaped answer from a tiny Python server; --explain for
# every reason, over HTTP and from a capture (query --capture --explain).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/live_lib.bash"
. "$(dirname "$0")/publish_fake_lib.bash"

# Usage errors (exit 2) and help.
run "$KVINDEX" query --model m --tokens 1
expect_status 2 "neither --capture nor --server"
run "$KVINDEX" query --server http://127.0.0.1:1 --capture x.kvcap --model m --tokens 1
expect_status 2 "--server with --capture"
for bad in ftp://127.0.0.1:1 http://:80 "127.0.0.1" "http://127.0.0.1:99999" "http://127.0.0.1:x"; do
  run "$KVINDEX" query --server "$bad" --model m --tokens 1
  expect_status 2 "bad URL $bad"
  expect_stderr_contains "--server"
done
run "$KVINDEX" query --help
for flag in --server --explain --capture --json; do expect_stdout_contains "$flag"; done

# Connection refused: exit 1, one line naming the URL.
port=$(free_ports 1)
run "$KVINDEX" query --server "http://127.0.0.1:$port" --model m --tokens 1,2,3
expect_status 1 "connection refused"
expect_stderr_contains "http://127.0.0.1:$port/query"
expect_stderr_lines 1

# --- publish-fake (2 instances x 2 DP ranks, block size 16) -> subscribe --http -> query --server.
pub=$(free_ports 4)
http=$(free_ports 1)
"$KVINDEX" subscribe \
  --source "fake-0=vllm@tcp://127.0.0.1:$pub,model=fake-model,block-size=16,dp-size=2" \
  --source "fake-1=vllm@tcp://127.0.0.1:$((pub + 2)),model=fake-model,block-size=16,dp-size=2" \
  --http "127.0.0.1:$http" --stats-interval 0 >"$TMP/sub.out" 2>"$TMP/sub.err" &
sub=$!
PIDS+=("$sub")
run timeout 30 "$KVINDEX" publish-fake --format vllm --instances 2 --dp-ranks 2 --port "$pub" \
  --count 40 --rate 2000 --wait-subscribers 1 --wait-timeout 20 --linger 1 \
  --emit-queries "$TMP/q.jsonl"
expect_status 0 "publish-fake"
URL="http://127.0.0.1:$http"

# Every final query (no `after`), through the CLI: --json equals the expected answer; the table
# has one row per instance with its longest_matched. The ingest thread may still be applying the
# last batches when publish-fake exits: retry each query for a few seconds.
"$PY" - "$KVINDEX" "$URL" "$TMP" <<'PYEOF' || fail "query --server answers differ from publish-fake's expected answers"
import json, subprocess, sys, time
kv, url, tmp = sys.argv[1:4]
queries = [json.loads(l) for l in open(tmp + "/q.jsonl")]
final = [q for q in queries if "after" not in q]
assert len(final) >= 3, "too few final queries"
checked = 0
for q in final:
    # publish-fake's answers, plus the trust state: the stream is lossless ("exact").
    q["expect"] = {n: dict(v, state="exact") for n, v in q["expect"].items()}
    tokens = tmp + "/tokens.txt"
    with open(tokens, "w") as f:
        f.write(",".join(map(str, q["query"]["token_ids"])))
    deadline = time.time() + 10
    while True:
        out = tmp + "/answer.json"
        r = subprocess.run([kv, "query", "--server", url, "--model", q["query"]["model"],
                            "--tokens-file", tokens, "--json", out], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = json.load(open(out))["data"].get("default", {})
        if got == q["expect"] or time.time() > deadline:
            break
        time.sleep(0.2)
    assert got == q["expect"], (q["id"], got, q["expect"])
    # The readable table: a header, then one row per instance: name, block "-", longest, GPU.
    r = subprocess.run([kv, "query", "--server", url, "--model", q["query"]["model"],
                        "--tokens-file", tokens], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["instance", "block", "longest", "GPU"], lines
    rows = {l.split()[0]: l.split() for l in lines[1:] if l.strip() and not set(l.strip()) <= set("-+ ")}
    for name, e in q["expect"].items():
        assert rows[name][2] == str(e["longest_matched"]) and rows[name][3] == str(e["GPU"]), (rows, e)
        dp = " ".join("%s:%d" % (k, v) for k, v in sorted(e["DP"].items(), key=lambda kv: int(kv[0])))
        assert " ".join(rows[name][7:-1]) == (dp or "-") and rows[name][-1] == "exact", (rows[name], dp)
    checked += 1
print(checked, "queries checked")
PYEOF

# A prompt every instance holds (from the expected answers), for the --explain cases.
"$PY" - "$TMP" <<'PYEOF' || fail "no final query that both instances match"
import json, sys
tmp = sys.argv[1]
for l in open(tmp + "/q.jsonl"):
    q = json.loads(l)
    if "after" not in q and all(e["longest_matched"] >= 32 for e in q["expect"].values()):
        open(tmp + "/held.txt", "w").write(",".join(map(str, q["query"]["token_ids"])))
        break
else:
    sys.exit(1)
PYEOF
held=$TMP/held.txt

# --explain, one reason each (the fake publishes unsalted, LoRA-less blocks of 16 tokens).
explain() {  # explain REASON ARGS...: every line of the explanation names REASON
  local reason=$1
  shift
  run "$KVINDEX" query --server "$URL" --explain "$@"
  expect_status 0 "--explain $reason"
  grep -q "matched nothing: $reason: " "$stdout_file" || fail "--explain: no '$reason' line"
  if grep "matched nothing: " "$stdout_file" | grep -vq "matched nothing: $reason: "; then
    fail "--explain: a reason other than $reason"
  fi
}
explain unknown-scope --model other-model --tokens-file "$held"
expect_stdout_contains "fake-0 matched nothing: unknown-scope"
expect_stdout_contains "fake-1 matched nothing: unknown-scope"
expect_stdout_contains "'fake-model'"  # the configured model is named
explain block-size --model fake-model --tokens-file "$held" --block-size 8
expect_stdout_contains "block_size is 8 but the instance's blocks are 16 tokens"
explain salt --model fake-model --tokens-file "$held" --salt s1
explain lora --model fake-model --tokens-file "$held" --lora-name adapter-a
explain short-prompt --model fake-model --tokens 1,2,3
explain first-block-absent --model fake-model --tokens "$(seq -s, 900001 900032)"
explain unknown-instance --model fake-model --tokens-file "$held" --instance nope
explain first-block-absent --model fake-model --hashes 12345
expect_stdout_contains "block_hash[0] = 0x0000000000003039"
# An instance that matches is not explained.
run "$KVINDEX" query --server "$URL" --explain --model fake-model --tokens-file "$held"
expect_status 0 "--explain on a held prompt"
grep -q "matched nothing" "$stdout_file" && fail "--explain explained a matching instance"
# --json carries the server's explain member.
run "$KVINDEX" query --server "$URL" --explain --model fake-model --tokens-file "$held" \
  --block-size 8 --json "$TMP/e.json"
"$PY" -c '
import json, sys
e = json.load(open(sys.argv[1]))["explain"]
assert set(e) == {"fake-0", "fake-1"} and all(v["reason"] == "block-size" for v in e.values()), e
' "$TMP/e.json" || fail "--json explain member"
kill -TERM "$sub"
wait "$sub"
[ $? -eq 0 ] || fail "subscribe exit after SIGTERM"

# --- The upstream conductor's shape: no "data" wrapper, DP before GPU, Go's trailing newline.
up=$(free_ports 1)
"$PY" - "$up" "$TMP/up.ready" <<'PYEOF' &
import http.server, json, sys
port, ready = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("model") != "m" or body.get("token_ids") != [1, 2, 3, 4, 5, 6, 7, 8]:
            self.send_response(400); self.end_headers(); self.wfile.write(b"Invalid JSON\n"); return
        out = ('{"default":{"vllm-1":{"longest_matched":0,"DP":{"0":0},"GPU":0,"CPU":0,"DISK":0},'
               '"vllm-0":{"longest_matched":8,"DP":{"1":4,"0":8},"GPU":8,"CPU":4,"DISK":0}}}\n')
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out.encode())
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", port), H)
open(ready, "w").write("ok")
s.timeout = 20
for _ in range(4): s.handle_request()
PYEOF
PIDS+=($!)
for i in $(seq 1 100); do [ -s "$TMP/up.ready" ] && break; sleep 0.05; done
run "$KVINDEX" query --server "127.0.0.1:$up" --model m --tokens 1,2,3,4,5,6,7,8
expect_status 0 "query an upstream-shaped server"
"$PY" -c '
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("vllm-")]
assert rows == [["vllm-0", "-", "8", "8", "4", "0", "-", "0:8", "1:4", "-"],
                ["vllm-1", "-", "0", "0", "0", "0", "-", "0:0", "-"]], rows  # no state upstream
' "$stdout_file" || fail "table from the upstream shape"
run "$KVINDEX" query --server "http://127.0.0.1:$up/" --model m --tokens 1,2,3,4,5,6,7,8 --json -
expect_status 0 "--json - from the upstream shape"
"$PY" -c '
import json, sys
got = json.load(open(sys.argv[1]))
assert got == {"data": {"default": {
    "vllm-0": {"longest_matched": 8, "DP": {"0": 8, "1": 4}, "GPU": 8, "CPU": 4, "DISK": 0},
    "vllm-1": {"longest_matched": 0, "DP": {"0": 0}, "GPU": 0, "CPU": 0, "DISK": 0}}}}, got
' "$stdout_file" || fail "--json from the upstream shape"
run "$KVINDEX" query --server "127.0.0.1:$up" --model m --tokens 1,2,3,4,5,6,7,8 --explain
expect_status 0 "--explain against the upstream conductor"
expect_stderr_contains "gave no explanation"
# The upstream's text error (400 "Invalid JSON"): exit 1 with its message.
run "$KVINDEX" query --server "127.0.0.1:$up" --model m --tokens 1
expect_status 1 "an HTTP 400"
expect_stderr_contains "HTTP 400: Invalid JSON"

# --- query --capture --explain: the same reasons from an offline index.
run "$KVINDEX" publish-fake --format vllm --instances 2 --count 20 --out "$TMP/f.kvcap" \
  --emit-queries "$TMP/fq.jsonl"
expect_status 0 "publish-fake --out"
"$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    q = json.loads(l)
    if "after" not in q and all(e["longest_matched"] >= 16 for e in q["expect"].values()):
        open(sys.argv[2], "w").write(",".join(map(str, q["query"]["token_ids"]))); break
else:
    sys.exit(1)
' "$TMP/fq.jsonl" "$TMP/fheld.txt" || fail "no held prompt in the offline queries"
run "$KVINDEX" query --capture "$TMP/f.kvcap" --model fake-model --tokens-file "$TMP/fheld.txt" \
  --block-size 4 --explain --json "$TMP/ce.json"
expect_status 0 "query --capture --explain"
expect_stdout_contains "fake-0 matched nothing: block-size"
"$PY" -c '
import json, sys
e = json.load(open(sys.argv[1]))["explain"]
assert set(e) == {"fake-0", "fake-1"} and all(v["reason"] == "block-size" for v in e.values()), e
' "$TMP/ce.json" || fail "query --capture --explain --json"
run "$KVINDEX" query --capture "$TMP/f.kvcap" --model fake-model --tokens-file "$TMP/fheld.txt" \
  --salt x --explain
expect_stdout_contains "fake-1 matched nothing: salt"
finish
