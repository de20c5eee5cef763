"""``webperf new NAME``: a catalogue entry to start from (server.toml, Dockerfile, server.py).

The example is the smallest server the catalogue accepts: Python's standard library
on ``debian:bookworm-slim``, bound to 127.0.0.1 (or ``$BIND``, given with
``--webperf-target-bind``) on ``$PORT`` (targets run with host networking), answering
``/health`` and ``/hello``.
"""

from __future__ import annotations

from pathlib import Path

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.catalog import NAME, ServerSpec, load_spec

SERVER_TOML = """\
name = "{name}"
description = "{name}: describe the server and its version here"
kind = "http"
port_env = "PORT"        # the free loopback port the server must bind, given in $PORT
bind_env = "BIND"        # --webperf-target-bind: the address to listen on instead of 127.0.0.1
health = "/health"       # 2xx when ready; a 4xx fails the start at once, 5xx keeps waiting
startup_timeout = 60
routes = ["/hello", "/health"]
notes = \"\"\"
Made by `webperf new {name}`. Build it with `webperf --servers DIR build {name}` and load it
from a test with `webperf.server("{name}")` (a servers/ directory at the project's root
is found by itself; any other directory: pytest --webperf-servers=DIR).
\"\"\"
"""

DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \\
 && rm -rf /var/lib/apt/lists/*
COPY server.py /srv/app/server.py
USER nobody
CMD ["python3", "/srv/app/server.py"]
"""

SERVER_PY = '''\
"""{name}: an example server for pytest-webperf; replace it with yours."""

import http.server
import os

ROUTES = {{"/health": b"ok", "/hello": b"<h1>Hello World</h1>"}}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the load generator expects
    # headers and body go out as two writes: without this, Nagle holds the body back for
    # the client's delayed ACK (40 ms per request)
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        body = ROUTES.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass  # a log line per request would cost more than the request


if __name__ == "__main__":
    port = int(os.environ["PORT"])
    bind = os.environ.get("BIND", "127.0.0.1")  # remote workers reach it there
    print(f"listening on {{bind}}:{{port}}", flush=True)
    http.server.ThreadingHTTPServer((bind, port), Handler).serve_forever()
'''


def new_server(catalogue: Path, name: str) -> ServerSpec:
    """Write ``catalogue/name/`` (server.toml, Dockerfile, server.py); never overwrite."""
    if not NAME.match(name):
        raise CatalogError(f"bad server name {name!r} (lower case, digits, . _ -)")
    directory = catalogue / name
    if directory.exists():
        raise CatalogError(f"{directory} already exists; choose another name or remove it")
    directory.mkdir(parents=True)
    (directory / "server.toml").write_text(SERVER_TOML.format(name=name))
    (directory / "Dockerfile").write_text(DOCKERFILE)
    (directory / "server.py").write_text(SERVER_PY.format(name=name))
    return load_spec(directory)  # what we wrote is a catalogue entry
