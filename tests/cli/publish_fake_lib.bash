# Helpers for the publish-fake CLI tests (sourced after lib.sh; not a test itself).
PY=${KVINDEX_PYTHON:-/usr/bin/python3}
SUB="$PY ${KVINDEX_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/fake_subscriber.py"

# Prints a base port with `span` consecutive free TCP ports on 127.0.0.1 (random, below the
# kernel's ephemeral range 32768+ so outgoing connections never take them; parallel tests rarely
# collide; each candidate is checked by binding it).
free_ports() {
  local span=$1
  "$PY" - "$span" <<'PYEOF'
import random, socket, sys
span = int(sys.argv[1])
for _ in range(500):
    base = random.randint(20000, 32000 - span)
    socks = []
    try:
        for p in range(base, base + span):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))
            socks.append(s)
        print(base)
        sys.exit(0)
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
sys.exit(1)
PYEOF
}

# Tests here run most commands in the background, not through `run`: give fail() its files.
: >"$stdout_file"
: >"$stderr_file"
