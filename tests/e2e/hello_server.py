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
