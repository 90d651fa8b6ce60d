#!/usr/bin/env python3
"""The include check must fail on every kind of forbidden include (and pass on the real tree).

  check_layers_test.py LAYERS_TXT SOURCE_DIR

Copies libindex/ and tools/ to a temporary folder, adds one forbidden include at a time and
expects check_layers.py to name the file and line; also edits the layer table to widen a layer
beyond what docs/architecture.md allows.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")


def run(table, root):
    p = subprocess.run([sys.executable, CHECK, table, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    table, source = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def fresh():
            root = os.path.join(tmp, "tree")
            shutil.rmtree(root, ignore_errors=True)
            for d in ("libindex", "tools"):
                shutil.copytree(os.path.join(source, d), os.path.join(root, d))
            return root

        code, out = run(table, fresh())
        if code != 0:
            failures.append("the unchanged tree fails:\n" + out)

        cases = [
            ("libindex/src/index/prefix_index.cpp", '#include "kvindex/codec/event_codec.h"',
             "layer index may not include"),
            ("libindex/include/kvindex/index/prefix_index.h", '#include "kvindex/zmq/subscriber.h"',
             "layer index may not include"),
            ("libindex/src/sim/simulator.cpp", '#include "kvindex/http/query_server.h"',
             "layer sim may not include"),
            ("libindex/src/sim/simulator.cpp", "#include <zmq.hpp>", "belongs to layer zmq"),
            ("libindex/src/codec/framing.cpp", "#include <boost/beast/http.hpp>", "belongs to layer http"),
            ("libindex/include/kvindex/codec/event_codec.h", "#include <msgpack.hpp>",
             "in a public header"),
            ("libindex/src/query/query_json.cpp", '#include "../../../tools/kvindex/report.h"',
             "libindex includes tools/"),
            ("libindex/src/ingest/ingest.cpp", '#include "../index/flat_table.h"',
             "is not a private header of layer ingest"),
            ("tools/kvindex/main.cpp", '#include "../../libindex/src/index/flat_table.h"',
             "tools include libindex only"),
        ]
        for path, line, expected in cases:
            root = fresh()
            with open(os.path.join(root, path), "a", encoding="utf-8") as f:
                f.write("\n" + line + "\n")
            code, out = run(table, root)
            if code != 1 or expected not in out or path not in out:
                failures.append(f"{line} in {path}: exit {code}, output:\n{out}")

        root = fresh()
        os.makedirs(os.path.join(root, "libindex/src/stray"), exist_ok=True)
        open(os.path.join(root, "libindex/src/loose.cpp"), "w").close()
        code, out = run(table, root)
        if code != 1 or "not in a layer folder" not in out:
            failures.append(f"a file outside any layer folder passes: exit {code}\n{out}")

        widened = os.path.join(tmp, "layers.txt")
        with open(table, encoding="utf-8") as f:
            text = f.read().replace("index uses=core", "index uses=core,codec")
        with open(widened, "w", encoding="utf-8") as f:
            f.write(text)
        code, out = run(widened, fresh())
        if code != 1 or "layer index may not use layer codec" not in out:
            failures.append(f"a widened layer table passes: exit {code}\n{out}")

    for f in failures:
        print("FAIL:", f)
    print(f"check_layers_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
