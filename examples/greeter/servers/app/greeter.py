"""A small JSON service, the kind of server a pytest-webperf user guards.

Standard library only, so its image is Debian's python3 and this file. It binds
127.0.0.1 on $PORT (pytest-webperf runs targets with host networking and hands
them a free port) and answers GET /health for the readiness check.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GREETINGS = {"en": "Hello", "fr": "Bonjour", "de": "Hallo", "es": "Hola"}


class Greeter(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the load generator reuses its connections
    # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the
    # client's delayed ACK hold every response for 40 ms (pytest-webperf showed p50 = 44 ms)
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/health":
            self.reply(200, {"ok": True})
        elif path == "/hello":
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)
            lang = params.get("lang", "en")
            if lang not in GREETINGS:
                self.reply(404, {"error": f"unknown language {lang!r}"})
            else:
                self.reply(200, {"greeting": f"{GREETINGS[lang]}, {params.get('name', 'world')}"})
        else:
            self.reply(404, {"error": "not found"})

    def reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # one line per request is too many
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Greeter)
    server.daemon_threads = True
    print(f"greeter listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
