"""What a stream swarm does (sent to the swarm child inside ``SwarmSpec.stream``): the
kind, each role's path, the message, the pace, the accounting's drain."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

WEBSOCKET, SSE = "websocket", "sse"
BYTES_FIELDS = ("message", "expect", "subscribe")  # bytes, base64 in the spec's JSON


@dataclass(frozen=True)
class StreamLoad:
    """Each user is one long-lived connection of its process's native stream loop.

    WebSocket: an echo connection sends ``message`` (after a 40-byte correlation header)
    and times its answer, in a closed loop or one per ``interval_s``; with
    ``publishers`` > 0 the first users of each process publish through
    ``publish_path`` every ``interval_s`` and the others subscribe on
    ``subscribe_path`` (fan-out); without a message the connections are idle, a ping
    every ``ping_s``. SSE: every user reads the stream at ``path``.
    """

    kind: str = WEBSOCKET
    path: str = "/"
    subscribe_path: str = ""  # fan-out: the subscribers' (default: path)
    publish_path: str = ""  # fan-out: the publishers' (default: path)
    publishers: int = 0  # fan-out: how many users publish (the rest subscribe)
    message: bytes | None = None  # the template (its header rewritten per message); None: idle
    binary: bool = False
    interval_s: float = 0.0  # 0: a closed loop (echo); the publishers' pace (fan-out)
    ping_s: float = 0.0  # idle connections: a ping this often (0: none)
    headers: tuple[tuple[str, str], ...] = ()  # the opening request's own headers
    expect: bytes | None = None  # every answer must contain these bytes
    subscribe: bytes | None = None  # a subscriber's first message, sent once it is open
    order: bool = False  # answers correlated by order, not by the echoed header
    drain_s: float = 5.0  # at the end: the longest wait for what is still owed
    quiet_s: float = 1.0  # ... nothing arrived for this long: what is missing is lost
    close_timeout_s: float = 10.0  # a close (1000) must be answered within this
    retry_s: float = 3.0  # SSE: the reconnect delay when the server gave no retry
    reconnect_every: int = 0  # SSE: leave and come back with Last-Event-ID every N events
    max_connecting: int = 256  # connects in flight at once (per generator process)
    tls: bool = False  # wss:// or https:// (verified against tls_ca when given)
    tls_ca: str | None = None
    sources: tuple[str, ...] = ()  # local IPv4 addresses to connect from, round robin
    report_path: str = ""  # where the child writes its ledger at the end

    def __post_init__(self) -> None:
        if self.kind not in (WEBSOCKET, SSE):
            raise ValueError(f"kind must be {WEBSOCKET!r} or {SSE!r}, not {self.kind!r}")
        if self.interval_s < 0 or self.ping_s < 0 or self.drain_s < 0 or self.quiet_s < 0:
            raise ValueError("interval, ping, drain and quiet are never negative")
        if self.publishers and (self.message is None or self.interval_s <= 0):
            raise ValueError("publishers need a message and an interval")
        object.__setattr__(self, "headers", tuple((str(n), str(v)) for n, v in self.headers))
        object.__setattr__(self, "sources", tuple(self.sources))

    @property
    def mode(self) -> str:
        """``echo``, ``fanout``, ``idle`` (WebSocket) or ``sse``."""
        if self.kind == SSE:
            return "sse"
        if self.publishers:
            return "fanout"
        return "idle" if self.message is None else "echo"

    def publishers_of(self, index: int, processes: int) -> int:
        """How many of generator process ``index``'s users publish: the publishers
        spread over the processes as evenly as the users are."""
        share, extra = divmod(self.publishers, max(1, processes))
        return share + (1 if index < extra else 0)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in BYTES_FIELDS:
            value = getattr(self, name)
            data[name] = None if value is None else base64.b64encode(value).decode()
        data["headers"] = [list(h) for h in self.headers]
        data["sources"] = list(self.sources)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamLoad:
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        for name in BYTES_FIELDS:
            if known.get(name) is not None:
                known[name] = base64.b64decode(known[name])
        known["headers"] = tuple(tuple(h) for h in known.get("headers", ()))
        known["sources"] = tuple(known.get("sources", ()))
        return cls(**known)
