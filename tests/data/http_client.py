"""A tiny HTTP client for the CLI tests of `subscribe --http` (imported by their Python parts)."""
import json
import time
import urllib.error
import urllib.request


class Server:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%s" % port

    def call(self, path, body=None, method=None):
        """(status, text) of one request; a JSON body for `body` (bytes are sent as they are)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, path, body=None):
        """The JSON answer of a request that must answer 200."""
        code, text = self.call(path, body)
        assert code == 200, (path, code, text)
        return json.loads(text)


def wait_for(check, what, timeout=20):
    """Calls check() until it returns a true value (connection errors count as false) and returns
    it; exits the test naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        if time.time() > deadline:
            raise SystemExit("timed out waiting for " + what)
        time.sleep(0.05)
