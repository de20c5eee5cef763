"""Per-interval request bookkeeping inside a swarm process (no Locust import).

User classes either call ``record``/``record_error`` directly (cheap), record
into a per-request-name ``Channel`` (cheaper still, and what feeds Locust's own
stats once per interval), or the child feeds Locust's request events through
``on_request``.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.histogram import Histogram

TIMEOUT = "timeout"
CONNECT = "connect"
CLOSED = "closed"  # the server closed the connection before the response was complete
PROTOCOL = "protocol"  # a response we could not frame
TLS = "tls"  # the TLS handshake failed or the certificate was refused (https targets)
EXAMPLE_CHARS = 120  # an example of a failed response is a hint, not a log


@dataclass
class Interval:
    """What completed in one interval."""

    requests: int = 0
    errors: int = 0
    bytes: int = 0
    histogram: Histogram = field(default_factory=Histogram)
    error_kinds: dict[str, int] = field(default_factory=dict)
    error_examples: dict[str, str] = field(default_factory=dict)  # kind -> one failed response
    # paced users only (``histogram`` then holds latency from each request's intended
    # start, coordinated omission corrected): the time from the actual send to the
    # response, and how late each send was behind its schedule
    service: Histogram | None = None
    lag: Histogram | None = None
    # arrival-rate users only, per generator process (its id -> count): the most users
    # busy at once, and how many ever took a request (opened a connection), so far.
    # Merged by maximum per process, intervals and processes alike: a run's figure is
    # the sum over its processes (of peaks: at most what was busy at once)
    users_busy: dict[str, int] = field(default_factory=dict)
    users_opened: dict[str, int] = field(default_factory=dict)
    # a new connection per request (keepalive=False) only: each connection's TCP connect
    # time (from the request's start), and its TLS handshake's (from connected)
    connect: Histogram | None = None
    handshake: Histogram | None = None

    def record_setup(self, connect_us: int, handshake_us: int | None = None) -> None:
        """A new connection's connect time, and its TLS handshake's (https)."""
        if self.connect is None:
            self.connect = Histogram()
        self.connect.record(max(0, connect_us))
        if handshake_us is not None:
            if self.handshake is None:
                self.handshake = Histogram()
            self.handshake.record(max(0, handshake_us))

    def note_users(self, process: str, busy: int, opened: int) -> None:
        """How many of the process's arrival-rate users are busy, and have ever been."""
        if busy > self.users_busy.get(process, 0):
            self.users_busy[process] = busy
        if opened > self.users_opened.get(process, 0):
            self.users_opened[process] = opened

    def record_schedule(self, service_us: int, lag_us: int) -> None:
        """A paced request's service time and how late it was sent."""
        if self.service is None:
            self.service, self.lag = Histogram(), Histogram()
        assert self.lag is not None
        self.service.record(service_us)
        self.lag.record(max(0, lag_us))

    def record(self, latency_us: int, nbytes: int) -> None:
        self.requests += 1
        self.bytes += nbytes
        self.histogram.record(latency_us)

    def record_error(
        self, kind: str, latency_us: int | None = None, nbytes: int = 0, example: str | None = None
    ) -> None:
        """A failed request; HTTP errors carry a latency (a response came), others do not.
        ``example`` shows what failed (kept for the first error of each kind); callers on a
        hot path check ``wants_example(kind)`` before building one."""
        if example is not None and kind not in self.error_examples:
            self.error_examples[kind] = example[:EXAMPLE_CHARS]
        self.requests += 1
        self.errors += 1
        self.bytes += nbytes
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
        if latency_us is not None:
            self.histogram.record(latency_us)

    def wants_example(self, kind: str) -> bool:
        return kind not in self.error_examples

    def merge(self, other: Interval) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.bytes += other.bytes
        self.histogram += other.histogram
        for kind, n in other.error_kinds.items():
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + n
        for kind, example in other.error_examples.items():
            self.error_examples.setdefault(kind, example)
        if other.service is not None and other.lag is not None:
            if self.service is None or self.lag is None:
                self.service, self.lag = Histogram(), Histogram()
            self.service += other.service
            self.lag += other.lag
        for mine, theirs in (
            (self.users_busy, other.users_busy),
            (self.users_opened, other.users_opened),
        ):
            for process, n in theirs.items():
                mine[process] = max(n, mine.get(process, 0))
        if other.connect is not None:
            if self.connect is None:
                self.connect = Histogram()
            self.connect += other.connect
        if other.handshake is not None:
            if self.handshake is None:
                self.handshake = Histogram()
            self.handshake += other.handshake

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "bytes": self.bytes,
            "error_kinds": dict(self.error_kinds),
            "error_examples": dict(self.error_examples),
            "histogram": self.histogram.to_dict(),
            **(
                {"service": self.service.to_dict(), "lag": self.lag.to_dict()}
                if self.service is not None and self.lag is not None
                else {}
            ),
            **(
                {"users_busy": dict(self.users_busy), "users_opened": dict(self.users_opened)}
                if self.users_busy or self.users_opened
                else {}
            ),
            **({"connect": self.connect.to_dict()} if self.connect is not None else {}),
            **({"handshake": self.handshake.to_dict()} if self.handshake is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Interval:
        return cls(
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            bytes=int(data["bytes"]),
            histogram=Histogram.from_dict(data["histogram"]),
            error_kinds={str(k): int(v) for k, v in data.get("error_kinds", {}).items()},
            error_examples={str(k): str(v) for k, v in data.get("error_examples", {}).items()},
            service=Histogram.from_dict(data["service"]) if "service" in data else None,
            lag=Histogram.from_dict(data["lag"]) if "lag" in data else None,
            users_busy={str(k): int(v) for k, v in data.get("users_busy", {}).items()},
            users_opened={str(k): int(v) for k, v in data.get("users_opened", {}).items()},
            connect=Histogram.from_dict(data["connect"]) if "connect" in data else None,
            handshake=Histogram.from_dict(data["handshake"]) if "handshake" in data else None,
        )


def classify(exception: BaseException | str | None, status: int | None = None) -> str:
    """A short, stable name for why a request failed."""
    if status is not None and status >= 400:
        return f"http_{status}"
    if isinstance(exception, ConnectionRefusedError):
        return CONNECT
    if isinstance(exception, (TimeoutError, socket.timeout)) or type(exception).__name__ in (
        "Timeout",
        "ConnectionTimeout",
        "NetworkTimeout",
    ):
        return TIMEOUT
    if isinstance(exception, ConnectionResetError | BrokenPipeError):
        return "reset"
    if isinstance(exception, OSError) and exception.errno == errno.EMFILE:
        return "emfile"
    if isinstance(exception, OSError):
        return "socket"
    if isinstance(exception, str):
        return "failure"
    return type(exception).__name__ if exception is not None else "failure"


class Channel:
    """The hot-path accumulator of one request name (method, name) in one process.

    ``sources`` are recorders outside Python's reach (the native loop's thread): each
    hands over what it completed since it was last asked, at every ``take``."""

    __slots__ = ("current", "method", "name", "sources")

    def __init__(self, method: str, name: str) -> None:
        self.method = method
        self.name = name
        self.current = Interval()
        self.sources: list[Callable[[], Interval]] = []

    def record(self, latency_us: int, nbytes: int) -> None:
        self.current.record(latency_us, nbytes)

    def record_error(
        self, kind: str, latency_us: int | None = None, nbytes: int = 0, example: str | None = None
    ) -> None:
        self.current.record_error(kind, latency_us, nbytes, example)

    def take(self) -> Interval:
        interval, self.current = self.current, Interval()
        for source in self.sources:
            interval.merge(source())
        return interval


RollListener = Callable[[str, str, Interval], None]  # (method, name, what that name did)


class Recorder:
    """Counts completions; ``roll()`` hands over the interval and starts a new one.

    ``roll()`` also folds every channel in and tells the roll listeners (the
    Locust stats feed) what each request name did in the interval.
    """

    def __init__(self) -> None:
        self.current = Interval()
        self.channels: dict[tuple[str, str], Channel] = {}
        self.roll_listeners: list[RollListener] = []
        self.rolled_requests = 0  # every request ever handed over, for consistency checks

    def channel(self, method: str, name: str) -> Channel:
        key = (method, name)
        found = self.channels.get(key)
        if found is None:
            found = self.channels[key] = Channel(method, name)
        return found

    def record(self, latency_us: int, nbytes: int) -> None:
        self.current.record(latency_us, nbytes)

    def record_error(
        self, kind: str, latency_us: int | None = None, nbytes: int = 0, example: str | None = None
    ) -> None:
        self.current.record_error(kind, latency_us, nbytes, example)

    def on_request(
        self,
        response_time: float,
        response_length: int | None,
        exception: BaseException | str | None = None,
        response: Any = None,
        **_: Any,
    ) -> None:
        """A Locust ``request`` event listener (response_time in ms)."""
        status = getattr(response, "status_code", None)
        if exception is None:
            self.record(int(response_time * 1000), response_length or 0)
            return
        kind = classify(exception, status if isinstance(status, int) and status else None)
        latency = int(response_time * 1000) if kind.startswith("http_") else None
        example = None
        if self.current.wants_example(kind):
            reason = getattr(response, "reason", None) or ""
            example = f"HTTP {status} {reason}".strip() if kind.startswith("http_") else None
            example = example or repr(exception)
        self.record_error(kind, latency, response_length or 0, example)

    def roll(self) -> Interval:
        interval, self.current = self.current, Interval()
        for channel in self.channels.values():
            part = channel.take()
            if not part.requests:
                if part.users_busy:  # users took requests none of which completed yet
                    interval.merge(part)
                continue
            interval.merge(part)
            for listener in self.roll_listeners:
                listener(channel.method, channel.name, part)
        self.rolled_requests += interval.requests
        return interval
