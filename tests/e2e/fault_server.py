"""A tiny misbehaving HTTP server for the fault suite (stdlib only, run as a target).

``python fault_server.py MODE`` listens on 127.0.0.1:$PORT. ``/health`` always answers
200 on a keep-alive connection; ``/hello`` misbehaves as MODE says:

    ok           a correct response (the control)
    500          500 Internal Server Error to every request
    garbage      bytes that are not HTTP
    short-body   Content-Length: 100, 10 bytes sent, connection closed
    bad-chunk    chunked, with a chunk size that is not hex
    silent       reads the request and never answers
    huge         a 50 MB body
    exit         answers, and exits (code 3) 1.5 s after the first /hello
    slow-accept  accepts one connection every 2 s, answers once per connection
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

MODE = sys.argv[1]
HELLO = b"<h1>Hello World</h1>"
HUGE = 50 * 1024 * 1024
_first_hello: list[float] = []


def response(status: str, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def read_head(conn: socket.socket, buffer: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    del buffer[:end]
    return head


def hello(conn: socket.socket) -> bool:
    """Answer /hello as MODE says; False when the connection must close."""
    if MODE == "500":
        conn.sendall(response("500 Internal Server Error", b"oops"))
    elif MODE == "garbage":
        conn.sendall(b"\x00\x01garbage, not HTTP at all\r\n\r\n")
        return False
    elif MODE == "short-body":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
        return False
    elif MODE == "bad-chunk":
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        conn.sendall(head + b"zz\r\nhello\r\n0\r\n\r\n")
        return False
    elif MODE == "silent":
        time.sleep(3600)
    elif MODE == "huge":
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n".encode())
        chunk = b"x" * (1024 * 1024)
        for _ in range(HUGE // len(chunk)):
            conn.sendall(chunk)
    elif MODE == "slow-accept":
        conn.sendall(response("200 OK", HELLO, "Connection: close"))
        return False
    else:  # ok, exit
        if MODE == "exit" and not _first_hello:
            _first_hello.append(time.monotonic())
            threading.Timer(1.5, os._exit, (3,)).start()
        conn.sendall(response("200 OK", HELLO))
    return True


def serve(conn: socket.socket) -> None:
    buffer = bytearray()
    with conn:
        try:
            while (head := read_head(conn, buffer)) is not None:
                if head.split(b" ", 2)[1] == b"/health":
                    conn.sendall(response("200 OK", b"ok"))
                elif not hello(conn):
                    return
        except OSError:
            pass


def main() -> None:
    listener = socket.create_server(("127.0.0.1", int(os.environ["PORT"])), backlog=64)
    print(f"fault server ({MODE}) listening", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
        if MODE == "slow-accept" and _first_hello:
            time.sleep(2)
        elif MODE == "slow-accept":
            _first_hello.append(time.monotonic())  # the health probe's connection is quick


if __name__ == "__main__":
    main()
