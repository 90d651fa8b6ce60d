# Helpers for the endpoint-discovery tests (auto_source*.sh; not a .sh, so not a test itself): a
# stand-in engine HTTP server (tests/data/fake_engine_http.py). Sourced after lib.sh and
# live_lib.bash.
ENGINE=$KVINDEX_SOURCE_DIR/tests/data/fake_engine_http.py

# start_engine NAME [ARGS...]: starts the stand-in engine; sets ENGINE_URL and ENGINE_PID.
start_engine() {
  local name=$1
  shift
  rm -f "$TMP/$name.port"
  "$PY" "$ENGINE" --ready "$TMP/$name.port" "$@" >/dev/null 2>&1 &
  ENGINE_PID=$!
  PIDS+=("$ENGINE_PID")
  local i
  for i in $(seq 1 400); do
    [ -s "$TMP/$name.port" ] && break
    sleep 0.05
  done
  ENGINE_URL="http://127.0.0.1:$(cat "$TMP/$name.port")"
}

# sglang_info FILE KV_EVENTS_CONFIG_JSON [EXTRA_FIELDS_JSON]: an SGLang /server_info body (its
# server arguments, kv_events_config a string holding JSON).
sglang_info() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, kv = sys.argv[1], sys.argv[2]
extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
info = {"model_path": "org/fake-model-weights", "served_model_name": "fake-model", "page_size": 16,
        "dp_size": 1, "host": "0.0.0.0", "port": 30000, "enable_dp_attention": False,
        "kv_events_config": kv, "version": "0.5.0"}
info.update(extra)
json.dump(info, open(path, "w"))
PYEOF
}
