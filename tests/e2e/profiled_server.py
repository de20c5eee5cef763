"""A lightly loaded Python server whose work per request is in named functions, and a
one-test project around it: the differential profile's end-to-end tests
(``test_profile_ab.py``) and its false-lead benchmark (``benchmarks/profile_false_leads.py``)
run the same code. ``SERVER.format(rounds=3)`` makes ``checksum()`` three times costlier.
``node_server``: a Node app in the catalogue's Node image (``test_profile_jit.py``,
``test_profile_names.py``).
"""

from pathlib import Path

CATALOGUE = Path(__file__).resolve().parents[2] / "servers"
# checksum() of the Node apps (a format template: ROUNDS walks of the page a request)
CHECKSUM_JS = """\
function checksum(data) {{
  let value = 0;
  for (let round = 0; round < ROUNDS; round++) {{
    for (let i = 0; i < data.length; i++) {{
      value = (value * 31 + data[i]) >>> 0;
    }}
  }}
  return value;
}}
"""


def node_server(repo: Path, name: str, app: str, toml: str) -> None:
    """``servers/NAME`` in ``repo``: the catalogue's Node image (its packages: the build
    is cached) running ``app``, described by ``toml``."""
    directory = repo / "servers" / name
    directory.mkdir(parents=True, exist_ok=True)
    dockerfile = (CATALOGUE / "node" / "Dockerfile").read_text()
    dockerfile = dockerfile.replace("COPY assets/ /srv/www/\n", "").replace(
        "COPY app.js store.js /srv/app/", "COPY app.js /srv/app/"
    )
    (directory / "Dockerfile").write_text(dockerfile)
    (directory / "server.toml").write_text(toml)
    (directory / "app.js").write_text(app)


SERVER = """
import os
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUNDS = {rounds}  # how many times checksum() walks the page
PAGE = bytes(range(256)) * 64


def parse_query(path):
    query = path.partition("?")[2]
    return dict(part.partition("=")[::2] for part in query.split("&") if part)


def work(n=6000):
    total = 0
    for i in range(n):
        total += i * i
    return total


def checksum(data):
    value = 0
    for _ in range(ROUNDS):
        for i in range(0, len(data), 16):
            value = (value * 31 + data[i]) & 0xFFFFFFFF
    return value


def render(value, check):
    return f"{{value}} {{check}} {{zlib.crc32(PAGE)}}\\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 65536  # one write per response (flushed after each), no delayed ACK
    disable_nagle_algorithm = True

    def do_GET(self):
        parse_query(self.path)
        body = render(work(), checksum(PAGE))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""

TEST = """
import sys


def test_work(webperf):
    target = webperf.process([sys.executable, "server.py"], name="pages")
    webperf.http(target, path="/work?page=1", interval="10ms")  # paced: lightly loaded
"""
