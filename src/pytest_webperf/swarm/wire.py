"""HTTP/1.1 on the wire for the lean user: requests encoded once, responses parsed incrementally.

Pure Python, no I/O and no gevent, so it is tested on its own. The parser handles
what a load generator meets: Content-Length and chunked bodies, bodies delimited
by the connection closing, responses without a body (HEAD, 204, 304), keep-alive
and ``Connection: close`` (HTTP/1.0 defaults included), and interim 1xx responses,
which are skipped. It does not decompress (no Accept-Encoding is sent), and 101
Switching Protocols is an error.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024  # a response head longer than this is not HTTP we want to measure
MAX_LINE = 4 * 1024  # chunk-size and trailer lines

# parser states
HEAD, LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, UNTIL_CLOSE, DONE = range(8)

_CONTENT_LENGTH = b"\r\ncontent-length:"
_TRANSFER_ENCODING = b"\r\ntransfer-encoding:"
_CONNECTION = b"\r\nconnection:"


class ProtocolError(Exception):
    """The peer sent something that is not an HTTP/1.x response we can frame."""


# What a failed response is called in reports: the lean parser below and the native loop
# (``hotloop.py``, which gets the offending bytes from C) word it the same.
SWITCHING_PROTOCOLS = "101 Switching Protocols is not supported"
CHUNK_WITHOUT_CRLF = "chunk data not followed by CRLF"


def client_context(
    ca_file: str | None = None, alpn: tuple[str, ...] = ("http/1.1",)
) -> ssl.SSLContext:
    """The TLS client context every client of ours uses (the lean users, health probes,
    the tests): the certificate is not verified unless ``ca_file`` names the CA to verify
    it (and the host name) against; ALPN http/1.1, or ``alpn`` (h2 for HTTP/2)."""
    context = ssl.create_default_context(cafile=ca_file)
    if ca_file is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context


def bad_status_line(head: bytes) -> str:
    return f"not an HTTP/1.x status line: {repr(head[:40])[:80]}"


def bad_content_length(value: bytes) -> str:
    return f"bad Content-Length {value!r}"


def bad_chunk_size(line: bytes) -> str:
    return f"bad chunk size {line[:40]!r}"


def too_long(what: str, limit: int) -> str:
    return f"{what} longer than {limit} bytes"


def closed_in_head(got: int) -> str:
    return f"connection closed after {got} bytes of the response head (or none)"


def closed_in_body(got: int, total: int) -> str:
    return f"connection closed after {got} of {total} body bytes"


def closed_in_chunks(got: int) -> str:
    return f"connection closed after {got} body bytes (chunked)"


def unexpected_body(status_line: str, body: bytes) -> str:
    """A response whose body failed its check: its status line and the body's first bytes."""
    return f"{status_line}: {body[:100]!r}"


def split_host(url: str) -> tuple[str, int, str]:
    """(host, port, Host header value) of an ``http://`` or ``https://`` URL (``uses_tls``
    says which)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the HTTP users speak http:// and https:// only, not {url!r}")
    if not parts.hostname:
        raise ValueError(f"no host in {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port, parts.netloc


def says_close(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether a request with ``headers`` asks for its connection to end after the
    response (``Connection: close``: the client then closes, whatever the answer says)."""
    return any(n.lower() == "connection" and "close" in v.lower() for n, v in headers)


def uses_tls(url: str) -> bool:
    """Whether the HTTP users speak TLS to ``url`` (an https:// URL)."""
    return urlsplit(url).scheme == "https"


def encode_request(
    method: str,
    path: str,
    host_header: str,
    *,
    body: bytes = b"",
    headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """The bytes of one request, sent as they are for every repetition."""
    if not path.startswith("/") and path != "*":
        raise ValueError(f"request path {path!r} must start with '/'")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header}"]
    names = set()
    for name, value in headers:
        if "\r" in name + value or "\n" in name + value:
            raise ValueError(f"header {name!r} contains a line break")
        names.add(name.lower())
        lines.append(f"{name}: {value}")
    if "host" in names:
        lines.pop(1)
    if (body or method in ("POST", "PUT", "PATCH")) and "content-length" not in names:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _header(lower: bytes, name: bytes) -> bytes | None:
    """The (stripped) value of the first header ``name`` in a lower-cased head, or None."""
    start = lower.find(name)
    if start < 0:
        return None
    start += len(name)
    end = lower.find(b"\r\n", start)
    return lower[start : end if end >= 0 else len(lower)].strip()


class ResponseParser:
    """Frames one response at a time; ``feed`` returns True when it is complete.

    After completion: ``status``, ``keep_alive``, ``body_bytes`` (payload, decoded
    from chunks), ``body`` (if asked to keep it) and ``rest`` (bytes that followed
    the response, normally none).
    """

    __slots__ = (
        "_buffer",
        "_parts",
        "_remaining",
        "_state",
        "body_bytes",
        "head_only",
        "keep_alive",
        "keep_body",
        "keep_head",
        "rest",
        "status",
        "status_line",
    )

    def __init__(self) -> None:
        self.begin()

    def begin(
        self, *, head_only: bool = False, keep_body: bool = False, keep_head: bool = False
    ) -> None:
        """Ready for the next response (``head_only``: it answers a HEAD request;
        ``keep_head``: keep its status line whatever the status, for a status check)."""
        self.head_only = head_only
        self.keep_body = keep_body
        self.keep_head = keep_head
        self.status = 0
        self.status_line = b""  # kept for error statuses (>= 400), or if asked
        self.keep_alive = True
        self.body_bytes = 0
        self.rest = b""
        self._state = HEAD
        self._buffer = b""
        self._remaining = 0
        self._parts: list[bytes] = []

    @property
    def complete(self) -> bool:
        return self._state == DONE

    @property
    def started(self) -> bool:
        """Whether any byte of the response has arrived."""
        return bool(self._buffer) or self._state != HEAD or self.status != 0

    @property
    def body(self) -> bytes:
        return b"".join(self._parts)

    def feed(self, data: bytes) -> bool:
        if self._buffer:
            data, self._buffer = self._buffer + data, b""
        pos = self._consume(data)
        if self._state == DONE:
            self.rest = data[pos:]
            return True
        return False

    def eof(self) -> bool:
        """The peer closed the connection: True if that ends the response."""
        if self._state == UNTIL_CLOSE:
            self._state = DONE
            self.keep_alive = False
            return True
        return self._state == DONE

    def closed_early(self) -> str:
        """What had arrived when the peer closed before the response was complete (an
        example for the error report; not called on the success path)."""
        if self._state == HEAD:
            return closed_in_head(len(self._buffer))
        if self._state == LENGTH:
            return closed_in_body(self.body_bytes, self.body_bytes + self._remaining)
        return closed_in_chunks(self.body_bytes)

    def _consume(self, data: bytes) -> int:
        """Advance through ``data`` as far as it goes; the position where it stopped."""
        pos = 0
        while self._state != DONE:
            pos = _STEPS[self._state](self, data, pos)
            if pos < 0:  # everything used or kept: more must arrive
                return len(data)
        return pos

    def _step_head(self, data: bytes, pos: int) -> int:
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            return self._keep(data, pos, MAX_HEAD, "response head")
        self._on_head(data[pos:end])
        return end + 4

    def _step_body(self, data: bytes, pos: int) -> int:
        """Content-Length bodies and chunk data."""
        take = min(self._remaining, len(data) - pos)
        self._on_body(data, pos, take)
        self._remaining -= take
        if self._remaining:
            return -1
        self._state = DONE if self._state == LENGTH else CHUNK_END
        return pos + take

    def _step_chunk_size(self, data: bytes, pos: int) -> int:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return self._keep(data, pos, MAX_LINE, "chunk-size line")
        self._on_chunk_size(data[pos:end])
        return end + 2

    def _step_chunk_end(self, data: bytes, pos: int) -> int:
        if len(data) - pos < 2:
            return self._keep(data, pos, 2, "chunk end")
        if data[pos : pos + 2] != b"\r\n":
            raise ProtocolError(CHUNK_WITHOUT_CRLF)
        self._state = CHUNK_SIZE
        return pos + 2

    def _step_trailer(self, data: bytes, pos: int) -> int:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return self._keep(data, pos, MAX_LINE, "trailer line")
        if end == pos:  # the empty line that ends the trailers
            self._state = DONE
        return end + 2

    def _step_until_close(self, data: bytes, pos: int) -> int:
        self._on_body(data, pos, len(data) - pos)
        return -1

    def _keep(self, data: bytes, pos: int, limit: int, what: str) -> int:
        """Hold an unfinished line until more arrives."""
        if len(data) - pos > limit:
            raise ProtocolError(too_long(what, limit))
        self._buffer = data[pos:]
        return -1

    def _on_body(self, data: bytes, pos: int, take: int) -> None:
        self.body_bytes += take
        if self.keep_body and take:
            self._parts.append(data[pos : pos + take])

    def _on_head(self, head: bytes) -> None:
        if head[:7] != b"HTTP/1." or head[8:9] != b" " or not head[9:12].isdigit():
            raise ProtocolError(bad_status_line(head))
        status = int(head[9:12])
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError(SWITCHING_PROTOCOLS)
            return  # an interim response: the real one follows
        self.status = status
        keep = status >= 400 or self.keep_head
        self.status_line = head.split(b"\r\n", 1)[0] if keep else b""
        lower = head.lower()
        connection = _header(lower, _CONNECTION)
        if head[7:8] == b"0":  # HTTP/1.0 closes unless asked to keep alive
            self.keep_alive = connection is not None and b"keep-alive" in connection
        else:
            self.keep_alive = connection is None or b"close" not in connection
        if self.head_only or status == 204 or status == 304:  # noqa: PLR1714
            self._state = DONE
            return
        coding = _header(lower, _TRANSFER_ENCODING)
        if coding is not None:
            if coding.rsplit(b",", 1)[-1].strip() == b"chunked":
                self._state = CHUNK_SIZE
            else:  # another coding last: the body ends when the connection does
                self._state = UNTIL_CLOSE
                self.keep_alive = False
            return
        length = _header(lower, _CONTENT_LENGTH)
        if length is None:
            self._state = UNTIL_CLOSE
            self.keep_alive = False
            return
        try:
            self._remaining = int(length.split(b",", 1)[0])
        except ValueError:
            raise ProtocolError(bad_content_length(length)) from None
        if self._remaining < 0:
            raise ProtocolError(bad_content_length(length))
        self._state = LENGTH if self._remaining else DONE

    def _on_chunk_size(self, line: bytes) -> None:
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(bad_chunk_size(line)) from None
        if size < 0:
            raise ProtocolError(bad_chunk_size(line))
        if size == 0:
            self._state = TRAILERS
        else:
            self._remaining = size
            self._state = CHUNK_DATA


_STEPS = {
    HEAD: ResponseParser._step_head,
    LENGTH: ResponseParser._step_body,
    CHUNK_SIZE: ResponseParser._step_chunk_size,
    CHUNK_DATA: ResponseParser._step_body,
    CHUNK_END: ResponseParser._step_chunk_end,
    TRAILERS: ResponseParser._step_trailer,
    UNTIL_CLOSE: ResponseParser._step_until_close,
}
