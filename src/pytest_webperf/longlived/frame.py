"""WebSocket frames (RFC 6455 section 5) as bytes and back, pure Python: the reference
the native engine's own framing is checked against (``swarm/native/ws.c``: the C side has
its own), and the framing of the tests' WebSocket servers.

``encode`` makes one frame (masked when given a key: a client's frames always are);
``FrameDecoder`` takes bytes in any pieces and gives whole frames, checking what a client
must refuse (a masked frame from a server, reserved bits without an extension, an unknown
opcode, a long or fragmented control frame, a 64-bit length with its top bit set);
``Assembler`` joins a fragmented message while control frames pass through between its
fragments; ``accept_key`` is the handshake's Sec-WebSocket-Accept.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from dataclasses import dataclass
from enum import IntEnum

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_CONTROL = 125


class Opcode(IntEnum):
    CONTINUATION = 0
    TEXT = 1
    BINARY = 2
    CLOSE = 8
    PING = 9
    PONG = 10


class ProtocolError(ValueError):
    """A frame the peer must not have sent; ``code`` is the close code to answer with."""

    def __init__(self, reason: str, code: int = 1002) -> None:
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class Frame:
    opcode: int
    payload: bytes
    fin: bool = True
    rsv: int = 0  # the three reserved bits, as a number 0..7

    @property
    def is_control(self) -> bool:
        return self.opcode >= 8


@dataclass(frozen=True)
class Message:
    opcode: int  # TEXT or BINARY
    payload: bytes

    def text(self) -> str:
        return self.payload.decode("utf-8")


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 section 4.2.2)."""
    digest = hashlib.sha1((key + GUID).encode("ascii")).digest()
    return base64.b64encode(digest).decode("ascii")


def mask(payload: bytes, key: bytes) -> bytes:
    """XOR with the 4-byte key repeated (its own inverse): one big-integer XOR, not a
    Python loop per byte."""
    if len(key) != 4:
        raise ValueError("a masking key has 4 bytes")
    n = len(payload)
    if not n:
        return b""
    repeated = (key * (n // 4 + 1))[:n]
    value = int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")
    return value.to_bytes(n, "big")


def header_size(length: int, masked: bool) -> int:
    """Bytes before the payload: 2, +2 from 126, +8 from 65536, +4 when masked."""
    extra = 0 if length < 126 else 2 if length < 65536 else 8
    return 2 + extra + (4 if masked else 0)


def encode(frame: Frame, mask_key: bytes | None = None) -> bytes:
    """One frame on the wire; ``mask_key``: masked with it (a client's frame)."""
    if frame.is_control and (len(frame.payload) > MAX_CONTROL or not frame.fin):
        raise ValueError("a control frame is whole and carries at most 125 bytes")
    if not 0 <= frame.rsv <= 7 or not 0 <= frame.opcode <= 15:
        raise ValueError("rsv is 0..7 and an opcode 0..15")
    first = (0x80 if frame.fin else 0) | frame.rsv << 4 | frame.opcode
    n = len(frame.payload)
    bit = 0x80 if mask_key is not None else 0
    if n < 126:
        head = struct.pack("!BB", first, bit | n)
    elif n < 65536:
        head = struct.pack("!BBH", first, bit | 126, n)
    else:
        head = struct.pack("!BBQ", first, bit | 127, n)
    if mask_key is None:
        return head + frame.payload
    return head + mask_key + mask(frame.payload, mask_key)


def fragment(opcode: int, payload: bytes, sizes: list[int]) -> list[Frame]:
    """A message as frames of the given sizes (the last takes what is left; empty sizes:
    one frame): the first has the opcode, the others CONTINUATION, FIN on the last."""
    pieces: list[bytes] = []
    at = 0
    for size in sizes:
        if at >= len(payload):
            break
        pieces.append(payload[at : at + size])
        at += size
    if at < len(payload) or not pieces:
        pieces.append(payload[at:])
    return [
        Frame(opcode if i == 0 else Opcode.CONTINUATION, piece, fin=i == len(pieces) - 1)
        for i, piece in enumerate(pieces)
    ]


def close_payload(code: int | None, reason: str = "") -> bytes:
    """A CLOSE frame's payload: the code (none: empty) and the UTF-8 reason."""
    if code is None:
        return b""
    data = struct.pack("!H", code) + reason.encode("utf-8")
    if len(data) > MAX_CONTROL:
        raise ValueError("a close reason has at most 123 bytes")
    return data


def parse_close(payload: bytes) -> tuple[int, str]:
    """(code, reason) of a CLOSE frame; an empty one is 1005 (no status received)."""
    if not payload:
        return 1005, ""
    if len(payload) == 1:
        raise ProtocolError("a close payload of one byte")
    (code,) = struct.unpack("!H", payload[:2])
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("a close reason that is not UTF-8", 1007) from exc
    return code, reason


class FrameDecoder:
    """Frames from bytes that arrive in pieces of any size. ``masked``: whether the
    peer's frames must be masked (True on a server, False on a client, as RFC 6455
    requires of each); ``max_size``: the largest payload accepted (1009 beyond)."""

    def __init__(self, *, masked: bool = False, max_size: int = 1 << 26) -> None:
        self.masked = masked
        self.max_size = max_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        while True:
            frame = self._next()
            if frame is None:
                return frames
            frames.append(frame)

    def _next(self) -> Frame | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        first, second = buf[0], buf[1]
        is_masked = bool(second & 0x80)
        fin, opcode = bool(first & 0x80), first & 0x0F
        self._check_head(first, is_masked)
        length, at = self._length(second & 0x7F)
        if length is None:
            return None
        if opcode >= 8 and (length > MAX_CONTROL or not fin):
            raise ProtocolError("a control frame fragmented or longer than 125 bytes")
        if length > self.max_size:
            raise ProtocolError(f"a frame of {length} bytes", 1009)
        key = b""
        if is_masked:
            if len(buf) < at + 4:
                return None
            key = bytes(buf[at : at + 4])
            at += 4
        if len(buf) < at + length:
            return None
        payload = bytes(buf[at : at + length])
        del buf[: at + length]
        if is_masked:
            payload = mask(payload, key)
        return Frame(opcode, payload, fin=fin)

    def _check_head(self, first: int, is_masked: bool) -> None:
        if is_masked != self.masked:
            raise ProtocolError(
                "a masked frame from a server" if is_masked else "an unmasked client frame"
            )
        if (first >> 4) & 7:
            raise ProtocolError("reserved bits set without an extension")
        if first & 0x0F not in Opcode.__members__.values():
            raise ProtocolError(f"unknown opcode {first & 0x0F}")

    def _length(self, length: int) -> tuple[int | None, int]:
        """The payload's length and where the bytes after it start (None: not all here)."""
        buf = self._buf
        if length == 126:
            if len(buf) < 4:
                return None, 0
            return struct.unpack_from("!H", buf, 2)[0], 4
        if length == 127:
            if len(buf) < 10:
                return None, 0
            (long,) = struct.unpack_from("!Q", buf, 2)
            if long >> 63:
                raise ProtocolError("a 64-bit length with its top bit set")
            return long, 10
        return length, 2


class Assembler:
    """Whole messages from frames: fragments joined, control frames handed back at once
    (they may come between a message's fragments)."""

    def __init__(self, max_size: int = 1 << 26) -> None:
        self.max_size = max_size
        self._opcode: int | None = None
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, frame: Frame) -> Message | Frame | None:
        """A complete message, a control frame, or None (a fragment kept)."""
        if frame.is_control:
            return frame
        if frame.opcode == Opcode.CONTINUATION:
            if self._opcode is None:
                raise ProtocolError("a continuation frame with no message begun")
        else:
            if self._opcode is not None:
                raise ProtocolError("a new message inside a fragmented one")
            self._opcode = frame.opcode
        self._size += len(frame.payload)
        if self._size > self.max_size:
            raise ProtocolError(f"a message over {self.max_size} bytes", 1009)
        self._parts.append(frame.payload)
        if not frame.fin:
            return None
        message = Message(int(self._opcode), b"".join(self._parts))
        self._opcode, self._parts, self._size = None, [], 0
        if message.opcode == Opcode.TEXT:
            try:
                message.payload.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ProtocolError("a text message that is not UTF-8", 1007) from exc
        return message
