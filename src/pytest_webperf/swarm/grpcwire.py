"""gRPC on the wire: length-prefixed messages, a unary call's headers, its status words,
and the few protobuf bytes a health check needs (no protobuf dependency).

A gRPC message on an HTTP/2 stream is a 5-byte prefix (a compressed flag, then the
length, 4 bytes big-endian) and the message; DATA frames split and join these freely,
so a reader decodes incrementally (``Decoder``). A unary call is one message each way;
its outcome is ``grpc-status`` (and ``grpc-message``, percent-encoded) in the trailers,
or in the headers of a trailers-only response.

The native loop frames each request once (``encode``, in ``fixture/grpc.py``) and reads
the response's framing in C (``native/h2.c``); this module is the lean user's, the health
check's and the tests' side of the same rules, and the words of a failure:
``error_kind`` is ``grpc_`` and the status's name as gRPC spells it
(``grpc_UNAVAILABLE``), as ``http_503`` is the status as HTTP spells it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

PREFIX = 5
MAX_MESSAGE = 4 * 1024 * 1024  # gRPC's default receive limit (grpc-go, grpc-java)

# the status codes (grpc/doc/statuscodes.md), by number
CODE_NAMES: tuple[str, ...] = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
UNKNOWN = 2

# grpc.health.v1.HealthCheckResponse.ServingStatus
SERVING = 1
SERVING_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


class FramingError(ValueError):
    """Bytes that are not a sequence of length-prefixed gRPC messages."""


@dataclass(frozen=True)
class Message:
    data: bytes
    compressed: bool = False


def encode(data: bytes, *, compressed: bool = False) -> bytes:
    """One message with its prefix (``compressed``: the payload is already compressed
    with the call's grpc-encoding; the flag only says so)."""
    if len(data) > 0xFFFFFFFF:
        raise FramingError(f"a gRPC message has at most 2^32-1 bytes, not {len(data)}")
    return struct.pack(">BI", 1 if compressed else 0, len(data)) + data


class Decoder:
    """Messages out of a stream's DATA, fed in whatever pieces they arrive."""

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self.max_message = max_message
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        """The messages completed by ``data`` (none, one or several)."""
        self._buffer += data
        return list(self._take())

    def _take(self) -> Iterator[Message]:
        while len(self._buffer) >= PREFIX:
            flag, length = struct.unpack_from(">BI", self._buffer)
            if flag not in (0, 1):
                raise FramingError(f"bad compressed flag {flag} (0 or 1)")
            if length > self.max_message:
                raise FramingError(
                    f"a {length}-byte message is over the {self.max_message}-byte limit"
                )
            if len(self._buffer) < PREFIX + length:
                return
            data = bytes(self._buffer[PREFIX : PREFIX + length])
            del self._buffer[: PREFIX + length]
            yield Message(data, compressed=flag == 1)

    @property
    def pending(self) -> int:
        """Bytes of an unfinished message (0 between messages)."""
        return len(self._buffer)

    def close(self) -> None:
        """The stream ended: an unfinished message is a framing error."""
        if self._buffer:
            raise FramingError(
                f"the stream ended inside a message ({len(self._buffer)} bytes of it)"
            )


def decode_all(data: bytes) -> list[Message]:
    """Every message in a whole body (a framing error if it ends inside one)."""
    decoder = Decoder(max_message=0xFFFFFFFF)
    messages = decoder.feed(data)
    decoder.close()
    return messages


def code_name(code: int) -> str:
    """A status code's name (``UNAVAILABLE``); one gRPC does not define is ``CODE_N``."""
    return CODE_NAMES[code] if 0 <= code < len(CODE_NAMES) else f"CODE_{code}"


def error_kind(code: int) -> str:
    """The failure kind of a non-OK status: ``grpc_UNAVAILABLE`` (the native loop's too)."""
    return f"grpc_{code_name(code)}"


def parse_status(value: str | bytes | None) -> int:
    """grpc-status as a code: absent or malformed is UNKNOWN (2), as clients treat it."""
    if value is None:
        return UNKNOWN
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    return int(text) if text.isdigit() and len(text) <= 4 else UNKNOWN


def decode_message(value: str | bytes) -> str:
    """grpc-message, percent-decoded (the spec's encoding of UTF-8 text)."""
    raw = value if isinstance(value, bytes) else value.encode("ascii", "replace")
    return unquote_to_bytes(raw).decode("utf-8", "replace")


def parse_method(method: object) -> str:
    """``method`` if it is a gRPC method path (``/package.Service/Method``), else a
    ValueError saying what is."""
    if not isinstance(method, str):
        raise ValueError(f"{method!r}: a gRPC method is a str, '/package.Service/Method'")
    parts = method.split("/")
    if (
        len(parts) != 3
        or parts[0]
        or not parts[1]
        or not parts[2]
        or any(c.isspace() or ord(c) < 32 for c in method)
    ):
        raise ValueError(
            f"{method!r}: a gRPC method is '/package.Service/Method' (e.g. '/echo.Echo/Echo')"
        )
    return method


def method_name(method: str) -> str:
    """The method's own name (``/pkg.Service/GetUser`` -> ``GetUser``): its endpoint."""
    return method.rsplit("/", 1)[-1]


def timeout_header(seconds: float) -> str:
    """grpc-timeout for ``seconds``: at most 8 digits and a unit (milliseconds here)."""
    return f"{max(1, min(99_999_999, round(seconds * 1000)))}m"


def request_headers(
    method: str,
    metadata: tuple[tuple[str, str], ...] = (),
    *,
    timeout_s: float | None = None,
) -> tuple[tuple[str, str], ...]:
    """A unary call's headers after the pseudo-headers: its content type, ``te:
    trailers`` (an HTTP/2 proxy keeps the trailers), its deadline, its metadata."""
    parse_method(method)
    headers = [("content-type", "application/grpc"), ("te", "trailers")]
    if timeout_s is not None:
        headers.append(("grpc-timeout", timeout_header(timeout_s)))
    return (*headers, *((k.lower(), v) for k, v in metadata))


# ---- the health service's messages (grpc/health/v1/health.proto)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise FramingError("a protobuf varint runs off the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def health_request(service: str = "") -> bytes:
    """HealthCheckRequest{service}: empty for the server as a whole."""
    raw = service.encode()
    return b"" if not raw else b"\x0a" + _varint(len(raw)) + raw


def health_status(message: bytes) -> int:
    """HealthCheckResponse's status (field 1, an enum); unknown fields skipped, an
    absent field is UNKNOWN (0) as proto3 says."""
    pos, status = 0, 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(message, pos)
            if field == 1:
                status = value
        elif wire == 2:
            length, pos = _read_varint(message, pos)
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise FramingError(f"protobuf wire type {wire} is not expected here")
        if pos > len(message):
            raise FramingError("a protobuf field runs off the end")
    return status
