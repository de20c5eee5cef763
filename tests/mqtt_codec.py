"""MQTT 3.1.1 packets as bytes and back (the tests' and the fault broker's; the native
engine has its own in C, ``swarm/native/mqtt.c``).

A packet is a fixed header (type << 4 | flags, then the remaining length as a
variable-length integer: 1 to 4 bytes, 7 bits each, at most 268,435,455) and a body.
``decode`` takes one whole packet from the front of a buffer and refuses a malformed
one with ``MalformedPacket``; ``None`` means more bytes are needed.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_REMAINING = 268_435_455  # 0xFF 0xFF 0xFF 0x7F
CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT = range(8, 15)
# the fixed header's flags each type must carry (3.1.1, 2.2.2); PUBLISH's are its own
FLAGS = {PUBREL: 2, SUBSCRIBE: 2, UNSUBSCRIBE: 2}
ACKS = (PUBACK, PUBREC, PUBREL, PUBCOMP, UNSUBACK)  # a packet id and nothing else


class MalformedPacket(ValueError):
    """Bytes that are not an MQTT 3.1.1 packet."""


def encode_varint(n: int) -> bytes:
    """The remaining length ``n`` as 1 to 4 bytes."""
    if not 0 <= n <= MAX_REMAINING:
        raise ValueError(f"a remaining length is 0 to {MAX_REMAINING}, not {n}")
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (128 if n else 0))
        if not n:
            return bytes(out)


def decode_varint(data: bytes, start: int = 0) -> tuple[int, int] | None:
    """(value, bytes used) of the variable-length integer at ``start``; None: incomplete."""
    value = 0
    for i in range(4):
        if start + i >= len(data):
            return None
        byte = data[start + i]
        value += (byte & 127) << (7 * i)
        if not byte & 128:
            if i and byte == 0:  # a longer encoding than needed (0x80 0x00)
                raise MalformedPacket("a remaining length in more bytes than it needs")
            return value, i + 1
    raise MalformedPacket("a remaining length longer than 4 bytes")


def _string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > 65535:
        raise ValueError("an MQTT string is at most 65,535 bytes")
    return len(raw).to_bytes(2, "big") + raw


@dataclass(frozen=True)
class Packet:
    """One packet: its type, fixed-header flags and the fields it has."""

    type: int
    flags: int = 0
    packet_id: int = 0
    topic: str = ""
    payload: bytes = b""
    client_id: str = ""
    keepalive: int = 0
    clean_session: bool = True
    return_code: int = 0
    session_present: bool = False
    filters: tuple[tuple[str, int], ...] = ()  # SUBSCRIBE: (filter, qos); SUBACK: ("", code)

    @property
    def qos(self) -> int:
        return (self.flags >> 1) & 3 if self.type == PUBLISH else 0

    @property
    def dup(self) -> bool:
        return self.type == PUBLISH and bool(self.flags & 8)


def publish(
    topic: str, payload: bytes, qos: int = 0, packet_id: int = 0, dup: bool = False
) -> Packet:
    return Packet(PUBLISH, (8 if dup else 0) | qos << 1, packet_id, topic, payload)


def _body(p: Packet) -> bytes:
    if p.type == CONNECT:
        flags = 2 if p.clean_session else 0
        head = _string("MQTT") + bytes([4, flags]) + p.keepalive.to_bytes(2, "big")
        return head + _string(p.client_id)
    if p.type == CONNACK:
        return bytes([1 if p.session_present else 0, p.return_code])
    if p.type == PUBLISH:
        pid = p.packet_id.to_bytes(2, "big") if p.qos else b""
        return _string(p.topic) + pid + p.payload
    if p.type in ACKS:
        return p.packet_id.to_bytes(2, "big")
    if p.type == SUBSCRIBE:
        subs = b"".join(_string(f) + bytes([q]) for f, q in p.filters)
        return p.packet_id.to_bytes(2, "big") + subs
    if p.type == SUBACK:
        return p.packet_id.to_bytes(2, "big") + bytes(code for _, code in p.filters)
    return b""  # PINGREQ, PINGRESP, DISCONNECT


def encode(p: Packet) -> bytes:
    if not 1 <= p.type <= 14:
        raise ValueError(f"packet type 1 to 14, not {p.type}")
    flags = p.flags if p.type == PUBLISH else FLAGS.get(p.type, 0)
    body = _body(p)
    return bytes([p.type << 4 | flags]) + encode_varint(len(body)) + body


def _need(body: bytes, at: int, n: int, what: str) -> None:
    if at + n > len(body):
        raise MalformedPacket(f"{what}: the packet ends early")


def _read_string(body: bytes, at: int, what: str) -> tuple[str, int]:
    _need(body, at, 2, what)
    n = int.from_bytes(body[at : at + 2], "big")
    _need(body, at + 2, n, what)
    try:
        return body[at + 2 : at + 2 + n].decode(), at + 2 + n
    except UnicodeDecodeError:
        raise MalformedPacket(f"{what}: not UTF-8") from None


def _parse_publish(flags: int, body: bytes) -> Packet:
    qos = (flags >> 1) & 3
    if qos == 3:
        raise MalformedPacket("PUBLISH with QoS 3")
    topic, at = _read_string(body, 0, "PUBLISH topic")
    pid = 0
    if qos:
        _need(body, at, 2, "PUBLISH packet id")
        pid = int.from_bytes(body[at : at + 2], "big")
        if pid == 0:
            raise MalformedPacket("PUBLISH with packet id 0")
        at += 2
    return Packet(PUBLISH, flags, pid, topic, body[at:])


def _parse_connect(body: bytes) -> Packet:
    name, at = _read_string(body, 0, "CONNECT protocol name")
    _need(body, at, 4, "CONNECT")
    level, connect_flags = body[at], body[at + 1]
    if name != "MQTT" or level != 4:
        raise MalformedPacket(f"CONNECT: protocol {name!r} level {level}, not MQTT 4")
    if connect_flags & 1:
        raise MalformedPacket("CONNECT: reserved flag set")
    keepalive = int.from_bytes(body[at + 2 : at + 4], "big")
    client_id, at = _read_string(body, at + 4, "CONNECT client id")
    return Packet(
        CONNECT, client_id=client_id, keepalive=keepalive, clean_session=bool(connect_flags & 2)
    )


def _parse_subscriptions(kind: int, body: bytes) -> Packet:
    _need(body, 0, 3, "SUBSCRIBE/SUBACK")
    pid = int.from_bytes(body[:2], "big")
    if kind == SUBACK:
        return Packet(SUBACK, packet_id=pid, filters=tuple(("", c) for c in body[2:]))
    filters, at = [], 2
    while at < len(body):
        name, at = _read_string(body, at, "SUBSCRIBE filter")
        _need(body, at, 1, "SUBSCRIBE qos")
        if body[at] > 2:
            raise MalformedPacket("SUBSCRIBE qos above 2")
        filters.append((name, body[at]))
        at += 1
    return Packet(SUBSCRIBE, 2, pid, filters=tuple(filters))


def _parse(kind: int, flags: int, body: bytes) -> Packet:
    if kind == PUBLISH:
        return _parse_publish(flags, body)
    if flags != FLAGS.get(kind, 0):
        raise MalformedPacket(f"packet type {kind} with flags {flags}")
    if kind == CONNECT:
        return _parse_connect(body)
    if kind == CONNACK:
        if len(body) != 2 or body[0] > 1:
            raise MalformedPacket("CONNACK is 2 bytes, its first 0 or 1")
        return Packet(CONNACK, session_present=bool(body[0]), return_code=body[1])
    if kind in ACKS:
        if len(body) != 2:
            raise MalformedPacket(f"packet type {kind} is 2 bytes (a packet id)")
        return Packet(kind, FLAGS.get(kind, 0), int.from_bytes(body, "big"))
    if kind in (SUBSCRIBE, SUBACK):
        return _parse_subscriptions(kind, body)
    if kind in (PINGREQ, PINGRESP, DISCONNECT):
        if body:
            raise MalformedPacket(f"packet type {kind} has no body")
        return Packet(kind)
    raise MalformedPacket(f"packet type {kind} is not MQTT 3.1.1's")


def decode(data: bytes) -> tuple[Packet, int] | None:
    """The packet at the front of ``data`` and its length; None: not all here yet."""
    if not data:
        return None
    kind, flags = data[0] >> 4, data[0] & 15
    if kind in (0, 15):
        raise MalformedPacket(f"packet type {kind} is reserved")
    length = decode_varint(data, 1)
    if length is None:
        return None
    remaining, used = length
    end = 1 + used + remaining
    if len(data) < end:
        return None
    return _parse(kind, flags, bytes(data[1 + used : end])), end
