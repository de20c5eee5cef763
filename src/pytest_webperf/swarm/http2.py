"""HTTP/2 on the wire for both users (no Locust): a request's header list, the names of
the protocol's error codes and the failure kinds they make, and whether a server speaks
HTTP/2 at all (``probe``), or only HTTP/2 (``http1_refusal``), asked once before any load
is sent.

Kinds: a stream the server resets is ``h2_rst_<CODE>``, a GOAWAY with an error
``h2_goaway_<CODE>``, the code as RFC 9113 spells it (``h2_rst_INTERNAL_ERROR``), as
``http_503`` is a status as HTTP spells it and ``grpc_UNAVAILABLE`` a status as gRPC
does (``grpcwire.error_kind``). A GOAWAY with NO_ERROR is the server retiring a
connection (nginx after ``keepalive_requests``): not a failure.

The probe refuses a server that does not speak HTTP/2 in one line, the same line the
native loop would give (``native/h2.c``: ALPN, the preface's answer):

- ``https://``: TLS with ALPN ``["h2"]``; the server must choose ``h2`` (nginx without
  ``http2`` on the listener refuses with a no_application_protocol alert);
- ``http://`` (h2c, prior knowledge; nginx has no h2c Upgrade): the client preface and an
  empty SETTINGS frame; the server's first frame must be SETTINGS. An HTTP/1.1 server
  answers ``HTTP/1.1 400 Bad Request``, others something else or nothing.

And the other way round, before an HTTP/1.1 load (``http1_refusal``): a listener that
speaks HTTP/2 only is refused in one line naming ``http2=True``, never loaded until every
request has failed on "closed":

- ``http://``: the first byte of an HTTP/1.1 request line; an h2c-only listener (nginx
  1.22's ``listen ... http2`` without ssl) answers it with its SETTINGS frame, an HTTP/1.1
  one waits for the rest;
- ``https://``: TLS with ALPN ``["http/1.1"]``; a server that speaks h2 only refuses it
  with a no_application_protocol alert.

Anything else (an HTTP status line, no answer, no ALPN at all) lets the load go on: the
question is only whether the server said it speaks HTTP/2 alone.
"""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit

from pytest_webperf.models.workload import Request

# RFC 9113 section 7, by code (0x0-0xd); the last two slots: 0xe, and any other code
ERROR_NAMES: tuple[str, ...] = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
    "CODE_0xe",
    "CODE_OTHER",
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type 4, no flags, stream 0
SETTINGS = 0x4
WINDOW = 2**30 - 1  # the users' stream and connection windows: the server never waits for us

# headers HTTP/2 forbids (RFC 9113 8.2.2): the connection's, not the request's
CONNECTION_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"}
)


def error_name(code: int) -> str:
    """An HTTP/2 error code's name (``INTERNAL_ERROR``)."""
    return ERROR_NAMES[code] if 0 <= code < len(ERROR_NAMES) - 1 else f"CODE_{code:#x}"


def rst_kind(slot: int) -> str:
    """The failure kind of a stream reset with the code in ``slot`` (the C side's key:
    the code, or 15 for one above 0xe)."""
    return f"h2_rst_{ERROR_NAMES[min(slot, len(ERROR_NAMES) - 1)]}"


def goaway_kind(slot: int) -> str:
    """The failure kind of the streams a GOAWAY with an error ended."""
    return f"h2_goaway_{ERROR_NAMES[min(slot, len(ERROR_NAMES) - 1)]}"


def header_list(entry: Request, authority: str, scheme: str = "http") -> list[tuple[bytes, bytes]]:
    """An entry's request as HTTP/2 header fields: the pseudo-headers first, then its own
    headers with lower-case names (those of the connection left out, ``te`` kept only as
    ``trailers``), and a body's ``content-length`` (not gRPC's: its framing says)."""
    fields = [
        (":method", entry.method),
        (":scheme", scheme),
        (":authority", authority),
        (":path", entry.path),
    ]
    names = set()
    for name, value in entry.headers:
        lower = name.lower()
        if lower in CONNECTION_HEADERS or (lower == "te" and value.lower() != "trailers"):
            continue
        names.add(lower)
        fields.append((lower, value))
    sends_body = entry.body or entry.method in ("POST", "PUT", "PATCH")
    if sends_body and not entry.grpc and "content-length" not in names:
        fields.append(("content-length", str(len(entry.body))))
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields]


def request_body(entry: Request) -> bytes | None:
    """What follows the headers: None for no body (END_STREAM on the HEADERS)."""
    return entry.body if entry.body or entry.method in ("POST", "PUT", "PATCH") else None


# ---- does it speak HTTP/2?


def _address(url: str) -> tuple[bool, str, int]:
    """(TLS, host, port) of ``url``."""
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    return tls, parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80)


def probe(url: str, timeout_s: float = 3.0) -> str | None:
    """None if the server at ``url`` speaks HTTP/2 (h2 by ALPN, or h2c), else why not."""
    tls, host, port = _address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            if not tls:
                return _prior_knowledge(raw, url)
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # this asks about the protocol, not trust
            context.set_alpn_protocols(["h2"])
            try:
                with context.wrap_socket(raw, server_hostname=host) as conn:
                    chosen = conn.selected_alpn_protocol()
                    if chosen == "h2":
                        return _prior_knowledge(conn, url)
                    return (
                        f"{url} does not speak HTTP/2 over TLS: ALPN "
                        + (f'chose "{chosen}"' if chosen else "negotiated no protocol")
                        + " (h2 offered)"
                    )
            except ssl.SSLError as exc:
                said = f"{exc.reason} {exc}".upper().replace(" ", "_")
                if "NO_APPLICATION_PROTOCOL" in said:
                    return f"{url} does not speak HTTP/2 over TLS: it refused ALPN h2"
                if "WRONG_VERSION_NUMBER" in said or "RECORD_LAYER" in said:
                    return f"{url} does not speak TLS: is it http://?"
                return f"{url}: the TLS handshake failed: {exc.reason or exc}"
    except OSError as exc:
        return f"{url}: cannot connect: {exc.strerror or exc}"


def http1_refusal(url: str, timeout_s: float = 3.0, quiet_s: float = 0.2) -> str | None:
    """Why an HTTP/1.1 load cannot go to ``url`` (the server speaks HTTP/2 only), else None.
    Nothing is requested: one byte of a request line is sent (``G``). An h2c listener
    answers the first byte it reads with its SETTINGS frame (its connection preface:
    nginx sends nothing before), an HTTP/1.1 one waits for the rest of the request, so
    ``quiet_s`` of silence says HTTP/1.1 (a server counting its requests sees none)."""
    tls, host, port = _address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            if tls:
                return _refuses_http1_alpn(raw, host, url)
            raw.sendall(b"G")
            raw.settimeout(quiet_s)
            head = _head(raw, 9)
    except TimeoutError:
        return None  # quiet: it waits for a request, as HTTP/1.1 does
    except OSError:
        return None  # not ours to judge: the load says what a dead server does
    if len(head) >= 9 and head[3] == SETTINGS and head[5:9] == b"\x00\x00\x00\x00":
        return (
            f"{url} speaks HTTP/2 only (h2c, prior knowledge): it answered the first byte "
            "of an HTTP/1.1 request with a SETTINGS frame"
        )
    return None


def _head(conn: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes, fewer when the peer closes; TimeoutError when it goes quiet."""
    head = b""
    while len(head) < size:
        chunk = conn.recv(size - len(head))
        if not chunk:
            break
        head += chunk
    return head


def _refuses_http1_alpn(raw: socket.socket, host: str, url: str) -> str | None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # this asks about the protocol, not trust
    context.set_alpn_protocols(["http/1.1"])
    try:
        with context.wrap_socket(raw, server_hostname=host):
            return None
    except ssl.SSLError as exc:
        said = f"{exc.reason} {exc}".upper().replace(" ", "_")
        if "NO_APPLICATION_PROTOCOL" in said:
            return f"{url} speaks HTTP/2 only over TLS: it refused ALPN http/1.1"
        return None


def _prior_knowledge(conn: socket.socket, url: str) -> str | None:
    conn.sendall(PREFACE + EMPTY_SETTINGS)
    try:
        head = _head(conn, 9)
    except TimeoutError:
        return f"{url} does not speak HTTP/2: no answer to the preface"
    except OSError as exc:
        return f"{url} does not speak HTTP/2: the preface met {exc.strerror or exc}"
    if len(head) >= 4 and head[3] == SETTINGS and head[5:9] == b"\x00\x00\x00\x00":
        return None
    if head.startswith(b"HTTP/"):
        line = (head + _rest(conn)).split(b"\r\n", 1)[0].decode("latin-1")
        return (
            f"{url} does not speak HTTP/2 with prior knowledge (h2c): it answered the "
            f'preface with "{line}"'
        )
    if head.startswith(b"\x15\x03"):
        return f"{url} speaks TLS: is it https://?"
    if not head:
        return f"{url} does not speak HTTP/2: it closed the connection after the preface"
    said = head + _rest(conn)
    text = said.split(b"\n", 1)[0][:40]
    shown = (
        f'"{text.decode("latin-1").strip()}"'
        if text.isascii() and text.strip()
        else said[:16].hex()
    )
    return f"{url} does not speak HTTP/2: its first bytes are not a SETTINGS frame ({shown})"


def _rest(conn: socket.socket) -> bytes:
    try:
        return conn.recv(120)
    except OSError:
        return b""
