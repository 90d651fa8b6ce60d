#!/usr/bin/python3
"""A stand-in for an engine's HTTP server in the endpoint-discovery tests (python3 http.server).

It answers GET requests from files: each --route PATH=FILE serves FILE's bytes as JSON with
status 200; any other path is a 404. --slow accepts connections and never answers. Written from
docs/wire-formats.md ("Endpoint discovery") alone; it shares no code with kvindex.

Usage: fake_engine_http.py [--port N] [--ready FILE] [--route PATH=FILE ...] [--slow]
       [--serve S]
--port 0 (the default) lets the OS pick the port; --ready FILE receives it once listening.
It serves for --serve seconds (default 25), then exits.
"""
import argparse
import http.server
import socket
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready")
    ap.add_argument("--route", action="append", default=[])
    ap.add_argument("--slow", action="store_true")
    ap.add_argument("--serve", type=float, default=25)
    args = ap.parse_args()

    routes = {}
    for r in args.route:
        path, _, file = r.partition("=")
        with open(file, "rb") as f:
            routes[path] = f.read()

    if args.slow:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.port))
        sock.listen(16)
        port = sock.getsockname()[1]
        held = []

        def accept():
            while True:
                conn, _ = sock.accept()
                held.append(conn)  # read nothing, answer nothing

        threading.Thread(target=accept, daemon=True).start()
    else:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = routes.get(self.path.split("?")[0])
                if body is None:
                    self.send_response(404)
                    body = b'{"detail":"Not Found"}'
                else:
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()

    if args.ready:
        with open(args.ready + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(args.ready + ".tmp", args.ready)
    time.sleep(args.serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
