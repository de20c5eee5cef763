"""The master's answer to ZeroMQ's authentication requests (ZAP, RFC 27): libzmq asks
it, for every CurveZMQ handshake a worker completes, whether that worker's long-term
key may join. With a secret, only the key derived from it may (``worker_key``); without
one (a master on loopback, or on a network said to be trusted) any key may."""

from __future__ import annotations

from dataclasses import dataclass

VERSION = b"1.0"
KEY_BYTES = 32


@dataclass(frozen=True)
class Answer:
    """The reply frames, and the address refused (None when admitted)."""

    reply: list[bytes]
    refused: str | None = None
    key: bytes = b""


def answer(request: list[bytes], admitted: bytes | None) -> Answer:
    """The reply to one ZAP request: ``[version, request id, domain, address, identity,
    mechanism, credentials...]``. ``admitted``: the one public key (32 bytes) that may
    join, or None for any CURVE key."""
    request_id = request[1] if len(request) > 1 else b""
    if len(request) < 7 or request[0] != VERSION:
        return Answer([VERSION, request_id, b"400", b"malformed request", b"", b""], "?")
    address = request[3].decode("utf-8", "replace") or "?"
    mechanism, key = request[5], request[6]
    if mechanism != b"CURVE" or len(key) != KEY_BYTES:
        return Answer([VERSION, request_id, b"400", b"CURVE only", b"", b""], address, key)
    if admitted is not None and key != admitted:
        why = b"not this run's secret"
        return Answer([VERSION, request_id, b"400", why, b"", b""], address, key)
    return Answer([VERSION, request_id, b"200", b"OK", b"worker", b""])
