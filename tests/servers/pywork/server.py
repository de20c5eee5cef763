"""pywork: the kind of server users write, stdlib only (ThreadingHTTPServer).

GET /work hashes a small buffer WORK times with sha256 (CPU, never a sleep: WORK x 1.1
is a server that does 10 % more work per request); /hello and /health answer at once.
HTTP/1.1 keep-alive with Content-Length; binds 127.0.0.1:$PORT.
"""

import hashlib
import http.server
import os

WORK = int(os.environ.get("WORK", "120"))
BUFFER = bytes(range(256)) * 4  # 1 KiB
HELLO = b"<h1>Hello World</h1>"


def work(rounds: int) -> bytes:
    digest = BUFFER
    for _ in range(rounds):
        digest = hashlib.sha256(digest + BUFFER).digest()
    return digest


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the load generator expects
    # headers and body are two writes: without TCP_NODELAY Nagle holds the body back
    # until the client's delayed ACK (40 ms), and the server idles at ~180 req/s
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        if self.path == "/work":
            body = work(WORK).hex().encode()
        elif self.path == "/hello":
            body = HELLO
        elif self.path == "/health":
            body = b"ok"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass  # a log line per request would cost more than the request


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


if __name__ == "__main__":
    port = int(os.environ["PORT"])
    print(f"pywork: WORK={WORK}, listening on 127.0.0.1:{port}", flush=True)
    Server(("127.0.0.1", port), Handler).serve_forever()
