#!/usr/bin/env python3
"""A small HTTP/1.1 keep-alive server for tests/bench/http_load.sh (an independent peer, not
kvindex): it answers every request with 200 and a short JSON body, stalls every connection for
200 ms after every 20th request (so that, at 40 requests/s, all of a client's 3 connections are
busy at once), and closes a connection that stays idle for 0.3 s (a short keep-alive timeout). It prints its port,
then counts the requests it answered into COUNT_FILE on SIGTERM.

Usage: idle_closing_server.py COUNT_FILE"""
import signal
import socket
import sys
import threading
import time

count_file = sys.argv[1]
lock = threading.Lock()
answered = 0


def serve(conn):
    global answered
    conn.settimeout(0.3)
    buffer = b""
    try:
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)  # socket.timeout after 0.3 s idle: close
                if not chunk:
                    return
                buffer += chunk
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            conn.settimeout(5)
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            conn.settimeout(0.3)
            buffer = rest[length:]
            with lock:  # held through the stall: every connection waits
                answered += 1
                if answered % 20 == 0:
                    time.sleep(0.2)
            body = b'{"ok":true}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
    except (socket.timeout, OSError):
        return
    finally:
        conn.close()


def stop(*_):
    with lock:
        with open(count_file, "w") as f:
            f.write("%d\n" % answered)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
