#!/usr/bin/env python3
"""Checks every #include of libindex and tools/ against the layer table CMake writes.

  check_layers.py LAYERS_TXT SOURCE_DIR

LAYERS_TXT is `kvindex_layers.txt` from the build folder: one line per layer,
`NAME uses=A,B includes=PREFIX,...` (libindex/CMakeLists.txt, kvindex_layer()). A layer may
include its own headers and those of the layers it uses, directly or through them; the
third-party headers listed under `includes=` only in that layer's .cpp files. The table itself
must keep the directions docs/architecture.md ("Layers") promises, so that widening a layer's
USES to allow a forbidden include fails here too. Prints one line per violation
(`path:line: ...`) and exits 1 when there is any.
"""
import os
import re
import sys

# Directions the project promises whatever the table says (docs/architecture.md "Layers").
FORBIDDEN = {
    "core": {"snapshot", "index", "json", "codec", "files", "ingest", "query", "sim", "zmq", "http", "nats"},
    "json": {"snapshot", "index", "codec", "files", "ingest", "query", "sim", "zmq", "http", "nats"},
    "index": {"snapshot", "codec", "files", "ingest", "query", "sim", "zmq", "http", "nats"},
    "codec": {"snapshot", "index", "ingest", "query", "sim", "zmq", "http", "nats"},
    "files": {"snapshot", "index", "codec", "ingest", "query", "sim", "zmq", "http", "nats"},
    "sim": {"snapshot", "zmq", "http", "ingest", "query", "nats"},
    "query": {"snapshot", "zmq", "http", "nats"},
    "zmq": {"http", "nats"},
    "nats": {"zmq", "http"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def read_table(path):
    layers = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            fields = dict(p.split("=", 1) for p in parts[1:])
            layers[parts[0]] = {
                "uses": [u for u in fields.get("uses", "").split(",") if u],
                "includes": [i for i in fields.get("includes", "").split(",") if i],
            }
    return layers


def closure(layers, name, stack=()):
    if name in stack:
        raise ValueError("layer cycle: " + " -> ".join(stack + (name,)))
    out = set()
    for use in layers[name]["uses"]:
        if use not in layers:
            raise ValueError(f"layer {name} uses unknown layer {use}")
        out.add(use)
        out |= closure(layers, use, stack + (name,))
    return out


def includes_of(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1), m.group(2)


def third_party_owner(header, layers):
    for name, layer in layers.items():
        for prefix in layer["includes"]:
            if header.startswith(prefix):
                return name
    return None


def check(table_path, root):
    problems = []
    root = os.path.abspath(root)
    layers = read_table(table_path)
    allowed = {}
    for name in layers:
        try:
            allowed[name] = closure(layers, name) | {name}
        except ValueError as e:
            problems.append(f"{table_path}: {e}")
            allowed[name] = {name}
        for bad in sorted(FORBIDDEN.get(name, set()) & allowed[name]):
            problems.append(f"{table_path}: layer {name} may not use layer {bad}")

    lib = os.path.join(root, "libindex")
    for kind in ("include/kvindex", "src"):
        base = os.path.join(lib, kind)
        for dirpath, _, files in os.walk(base):
            for fname in sorted(files):
                if not fname.endswith((".h", ".cpp")):
                    continue
                path = os.path.join(dirpath, fname)
                rel = os.path.relpath(path, root)
                sub = os.path.relpath(dirpath, base)
                layer = sub.split(os.sep)[0]
                if sub == "." or layer not in layers:
                    problems.append(f"{rel}: not in a layer folder ({', '.join(layers)})")
                    continue
                public = kind.startswith("include")
                for line, style, header in includes_of(path):
                    where = f"{rel}:{line}"
                    if style == '"':
                        if header.startswith("kvindex/"):
                            parts = header.split("/")
                            target = parts[1] if len(parts) > 2 else None
                            if target not in layers:
                                problems.append(f"{where}: \"{header}\" is not a layer's header")
                            elif target not in allowed[layer]:
                                problems.append(
                                    f"{where}: layer {layer} may not include \"{header}\" "
                                    f"(layer {target})")
                            elif not os.path.exists(os.path.join(lib, "include", header)):
                                problems.append(f"{where}: \"{header}\" does not exist")
                        elif public:
                            problems.append(f"{where}: a public header includes only \"kvindex/...\"")
                        else:
                            resolved = os.path.normpath(os.path.join(dirpath, header))
                            own = os.path.join(lib, "src", layer)
                            if os.path.dirname(resolved) != own or not os.path.exists(resolved):
                                problems.append(
                                    f"{where}: \"{header}\" is not a private header of layer {layer}")
                    else:
                        owner = third_party_owner(header, layers)
                        if owner is None:
                            continue
                        if public:
                            problems.append(f"{where}: <{header}> in a public header")
                        elif not any(header.startswith(p) for p in layers[layer]["includes"]):
                            problems.append(
                                f"{where}: <{header}> belongs to layer {owner}, not {layer}")

    tools = os.path.join(root, "tools")
    for dirpath, _, files in os.walk(tools):
        for fname in sorted(files):
            if not fname.endswith((".h", ".cpp")):
                continue
            path = os.path.join(dirpath, fname)
            rel = os.path.relpath(path, root)
            for line, style, header in includes_of(path):
                if style != '"':
                    continue
                where = f"{rel}:{line}"
                if header.startswith("kvindex/"):
                    parts = header.split("/")
                    if len(parts) < 3 or parts[1] not in layers:
                        problems.append(f"{where}: \"{header}\" is not a layer's header")
                    continue
                resolved = os.path.normpath(os.path.join(dirpath, header))
                if not resolved.startswith(tools + os.sep):
                    problems.append(f"{where}: tools include libindex only as \"kvindex/...\"")

    for dirpath, _, files in os.walk(lib):
        for fname in files:
            if not fname.endswith((".h", ".cpp")):
                continue
            path = os.path.join(dirpath, fname)
            for line, style, header in includes_of(path):
                if "tools/" in header:
                    problems.append(f"{os.path.relpath(path, root)}:{line}: libindex includes tools/")
    return problems


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    problems = check(sys.argv[1], sys.argv[2])
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layer rules", file=sys.stderr)
        return 1
    print("check_layers: every include keeps the layer rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
