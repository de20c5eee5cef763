"""The process-target end-to-end tests' server, as the source of a ``server.py``: a
threaded ``http.server`` answering every GET with a small page, keep-alive, at $PORT on
$BIND (default 127.0.0.1: where --webperf-target-bind asks it to listen)."""

HELLO_SERVER = """
import http.server, os

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"<h1>Hello World</h1>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

# BIND: where --webperf-target-bind asks it to listen (test_remote_workers.py)
address = (os.environ.get("BIND", "127.0.0.1"), int(os.environ["PORT"]))
http.server.ThreadingHTTPServer(address, Handler).serve_forever()
"""


def work_server(prelude: str, work: str) -> str:
    """The source of a threaded ``http.server`` at $PORT on 127.0.0.1 answering every GET
    with ``ok`` (keep-alive, no Nagle); GET /work first runs ``work`` (statements, one a
    line); ``prelude`` is its module-level set-up (imports beyond http.server and os, the
    knobs it reads)."""
    body = "\n".join(f"            {line}" for line in work.strip().splitlines())
    return f"""
import http.server, os
from pathlib import Path
{prelude.strip()}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/work":
{body}
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


def hashing_server(rounds: str, *, ageing: bool = False, seeded: bool = False) -> str:
    """A ``work_server`` whose GET /work hashes 1 KiB ``rounds`` times (a Python
    expression: a number, or a file read). ``ageing``: the rounds double every 2 s of the
    instance's age, up to 8x, so instances disagree by a factor ~2 whatever the code.
    ``seeded``: the rounds are multiplied by 2 ** (hash("instance") % 10), 1 to 512 by the
    process's hash seed: each instance of a timed run costs its own (random seeds), while
    a counted one, whose runtime is pinned (PYTHONHASHSEED=0: 4x), costs the same every
    time (the process-instance bias of a real runtime, made large)."""
    count = (
        "int(ROUNDS * min(8.0, 2 ** ((time.monotonic() - BORN) / 2)))"
        if ageing
        else 'ROUNDS * 2 ** (hash("instance") % 10)'
        if seeded
        else "ROUNDS"
    )
    prelude = (
        f"import hashlib, time\nROUNDS = {rounds}\nBLOCK = bytes(1024)\nBORN = time.monotonic()"
    )
    work = f"""
digest = b""
for _ in range({count}):
    digest = hashlib.sha256(digest + BLOCK).digest()
"""
    return work_server(prelude, work)
