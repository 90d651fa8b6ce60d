#!/usr/bin/env bash
# Text that is not UTF-8, and JSON of the wrong types: names given on the command line must be
# valid UTF-8 (exit 2, one line); a capture whose events carry invalid UTF-8 dumps and answers as
# valid UTF-8 (each bad subsequence one U+FFFD); publish-fake --batches lines with a wrong type or
# a missing key are one error line (exit 1), never an abort; a server answer with members of the
# wrong type is read without one. Outputs on /dev/full exit 1 with one line.
. "$(dirname "$0")/lib.sh"
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
SRC=${KVINDEX_SOURCE_DIR:-$(dirname "$0")/../..}
BAD=$'bad\xff\xfename'

expect_one_line() { [ "$(grep -vc "^Run 'kvindex .*--help' for usage\.$" "$stderr_file")" -eq 1 ] || fail "$1: expected one error line"; }

# --- command-line names ---------------------------------------------------------------------
run "$KVINDEX" publish-fake --count 2 --out "$TMP/c.kvcap"
expect_status 0 "publish-fake --out"
for args in "--tenant" "--lora-name" "--salt" "--instance" "--model"; do
  if [ "$args" = --model ]; then
    run "$KVINDEX" query --capture "$TMP/c.kvcap" --tokens 1,2 --model "$BAD"
  else
    run "$KVINDEX" query --capture "$TMP/c.kvcap" --model fake-model --tokens 1,2 "$args" "$BAD"
  fi
  expect_status 2 "query $args not UTF-8"
  expect_stderr_contains "kvindex: $args: 'bad"
  expect_stderr_contains "' is not valid UTF-8"
  expect_one_line "query $args"
done
run "$KVINDEX" subscribe --source "$BAD=vllm@tcp://127.0.0.1:1,model=m" --duration 0.1
expect_status 2 "subscribe --source name not UTF-8"
expect_stderr_contains "is not valid UTF-8"
expect_one_line "subscribe --source"
run "$KVINDEX" record --source "a=vllm@tcp://127.0.0.1:1,model=$BAD" --out "$TMP/r.kvcap" --duration 0.1
expect_status 2 "record --source model not UTF-8"
expect_one_line "record --source"
run "$KVINDEX" publish-fake --model "$BAD" --out "$TMP/x.kvcap"
expect_status 2 "publish-fake --model not UTF-8"
expect_one_line "publish-fake --model"

# --- a capture whose events carry invalid UTF-8: the LoRA name ff fe 'QQ' (a source definition
# is JSON, so its names are valid) ---------------------------------------------------------------
"$PY" - "$SRC/tests/data" "$TMP/bad.kvcap" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import msgpack, kvcap
payload = msgpack.packb([1.5, [["BlockStored", [11, 12], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, 1,
                                "GPU", "LLLL"]], 0])
assert payload.count(b"\xa4LLLL") == 1
payload = payload.replace(b"\xa4LLLL", b"\xa4\xff\xfeQQ")
data = kvcap.file_header()
data += kvcap.record(kvcap.SOURCE, 0, 1, b'{"name": "inst-a", "format": "vllm", '
                     b'"model": "m", "block_size": 4}')
data += kvcap.message(0, 2, b"", 0, payload)
open(sys.argv[2], "wb").write(data)
PYEOF
strict_utf8() {
  "$PY" -c "import sys; sys.stdout.write(open(sys.argv[1], 'rb').read().decode('utf-8'))" "$1"
}
run "$KVINDEX" replay "$TMP/bad.kvcap" --dump
expect_status 0 "--dump of invalid UTF-8 names"
strict_utf8 "$stdout_file" >"$TMP/dump.txt" || fail "--dump is not valid UTF-8"
# By hand: ff and fe are one maximal ill-formed subpart each: two U+FFFD, then QQ.
grep -qF "\"lora_name\":\"$(printf '\xef\xbf\xbd\xef\xbf\xbdQQ')\"" "$TMP/dump.txt" ||
  fail "--dump lora_name: $(cat "$TMP/dump.txt")"
run "$KVINDEX" replay "$TMP/bad.kvcap" --json "$TMP/bad.json"
expect_status 0 "replay --json of invalid UTF-8 names"
strict_utf8 "$TMP/bad.json" >/dev/null || fail "replay --json is not valid UTF-8"
run "$KVINDEX" replay "$TMP/bad.kvcap" --to-trace "$TMP/bad.trace" --json "$TMP/bad2.json"
expect_status 0 "--to-trace of invalid UTF-8 names"
strict_utf8 "$TMP/bad2.json" >/dev/null || fail "--to-trace --json is not valid UTF-8"

# --- publish-fake --batches: wrong types and missing keys -------------------------------------
while IFS= read -r line; do
  printf '%s\n' "$line" >"$TMP/b.jsonl"
  run "$KVINDEX" publish-fake --batches "$TMP/b.jsonl" --out "$TMP/b.kvcap"
  expect_status 1 "--batches $line"
  expect_stderr_contains "b.jsonl: line 1: "
  expect_one_line "--batches $line"
  rm -f "$TMP/b.kvcap"
done <<'JSONL'
{"ts": "x", "events": []}
{"ts": 1}
{"ts": 1, "events": [5]}
{"ts": 1, "events": [{"block_hashes": [1]}]}
{"ts": 1, "events": [{"type": 7}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": "a"}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": ["a"], "block_size": 1}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [4294967296], "block_size": 1}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": -1}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "medium": 5}]}
{"ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "lora_id": "x"}]}
{"ts": 1, "dp_rank": "a", "events": []}
JSONL

# --- a server answer with members of the wrong type, invalid UTF-8 and a multi-line error ------
"$PY" - "$TMP/port" <<'PYEOF' &
import http.server, json, sys
ANSWER = json.dumps({"data": {"default": {"i": {"longest_matched": "x", "GPU": -1, "DP": {"a": "b"},
                                                "weird": [1]}}},
                     "explain": {"i": {"reason": 5, "detail": ["x"]}, "j": 3}}).encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        error = self.path == "/query_by_hash"
        body = b"line one\nline \xff two\n" if error else ANSWER
        self.send_response(500 if error else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.handle_request()
server.handle_request()
PYEOF
server_pid=$!
for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$TMP/port")"
run "$KVINDEX" query --server "$URL" --model m --tokens 1,2 --explain --json "$TMP/server.json"
expect_status 0 "--server answer of wrong types"
expect_stdout_contains "i matched nothing: ?: "
strict_utf8 "$TMP/server.json" >/dev/null || fail "--server --json is not valid UTF-8"
run "$KVINDEX" query --server "$URL" --model m --hashes 1
expect_status 1 "--server HTTP 500"
expect_stderr_contains "HTTP 500: line one line $(printf '\xef\xbf\xbd') two"
expect_stderr_lines 1
wait "$server_pid"

# --- outputs on a full device: exit 1, one line -----------------------------------------------
printf '%s\n' '{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}' >"$TMP/t.jsonl"
for args in "replay $TMP/t.jsonl --json /dev/full" "replay $TMP/t.jsonl --csv /dev/full" \
    "replay $TMP/t.jsonl --capacity 1,2 --plot /dev/full" "replay $TMP/c.kvcap --to-trace /dev/full" \
    "query --capture $TMP/c.kvcap --model fake-model --tokens 1 --json /dev/full" \
    "publish-fake --count 2 --out /dev/full" "publish-fake --count 2 --out $TMP/p1.kvcap --json /dev/full" \
    "publish-fake --count 2 --out $TMP/p2.kvcap --emit-queries /dev/full" \
    "record --source a=vllm@tcp://127.0.0.1:1 --out $TMP/r2.kvcap --duration 0.1 --json /dev/full" \
    "subscribe --source a=vllm@tcp://127.0.0.1:1,model=m --duration 0.1 --json /dev/full"; do
  # shellcheck disable=SC2086
  "$KVINDEX" $args >/dev/null 2>"$stderr_file"
  status=$?
  expect_status 1 "$args"
  grep -q "/dev/full: write failed\|/dev/full: write:" "$stderr_file" || fail "$args: $(cat "$stderr_file")"
  expect_stderr_lines 1
done

finish
