"""Per-interval request bookkeeping inside a swarm process (no Locust import).

User classes either call ``record``/``record_error`` directly (cheap), record
into a per-request-name ``Channel`` (cheaper still, and what feeds Locust's own
stats once per interval), or the child feeds Locust's request events through
``on_request``.
"""

from __future__ import annotations

import errno
import os
import socket
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.models.http2 import Http2Figures
from pytest_webperf.stats.histogram import Histogram

TIMEOUT = "timeout"
CONNECT = "connect"
CLOSED = "closed"  # the server closed the connection before the response was complete
PROTOCOL = "protocol"  # a response we could not frame
USER_EXCEPTION = "user_exception"  # an exception raised in a user's own task
UNEXPECTED_STATUS = "unexpected_status"  # a status the request's expect_status does not allow
UNEXPECTED_BODY = "unexpected_body"  # a body without the request's expect_body
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
    # a run of several request names (a mix's entries): what each (method, name) did,
    # the parts of this interval's figures (``Recorder.roll`` fills it, merge adds it)
    endpoints: dict[tuple[str, str], Interval] = field(default_factory=dict)
    # a new connection per request (keepalive=False) only: each connection's TCP connect
    # time (from the request's start), and its TLS handshake's (from connected)
    connect: Histogram | None = None
    handshake: Histogram | None = None
    # HTTP/2 only: per stream, the time to its response headers (TTFB) and the time its
    # request body waited for the server's flow-control window (the bodies that did);
    # the connections' figures
    ttfb: Histogram | None = None
    stall: Histogram | None = None
    http2: Http2Figures | None = None

    def record_setup(self, connect_us: int, handshake_us: int | None = None) -> None:
        """A new connection's connect time, and its TLS handshake's (https)."""
        if self.connect is None:
            self.connect = Histogram()
        self.connect.record(max(0, connect_us))
        if handshake_us is not None:
            if self.handshake is None:
                self.handshake = Histogram()
            self.handshake.record(max(0, handshake_us))

    def record_ttfb(self, ttfb_us: int) -> None:
        """An HTTP/2 stream's time to its response headers."""
        if self.ttfb is None:
            self.ttfb = Histogram()
        self.ttfb.record(max(0, ttfb_us))

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
        for key, part in other.endpoints.items():
            self.endpoints.setdefault(key, Interval()).merge(part)
        if other.connect is not None:
            if self.connect is None:
                self.connect = Histogram()
            self.connect += other.connect
        if other.handshake is not None:
            if self.handshake is None:
                self.handshake = Histogram()
            self.handshake += other.handshake
        self.ttfb = _merged(self.ttfb, other.ttfb)
        self.stall = _merged(self.stall, other.stall)
        if other.http2 is not None:
            self.http2 = other.http2 if self.http2 is None else self.http2.merge(other.http2)

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
            **(
                {
                    "endpoints": [
                        {"method": method, "name": name, **part.to_dict()}
                        for (method, name), part in sorted(self.endpoints.items())
                    ]
                }
                if self.endpoints
                else {}
            ),
            **({"connect": self.connect.to_dict()} if self.connect is not None else {}),
            **({"handshake": self.handshake.to_dict()} if self.handshake is not None else {}),
            **({"ttfb": self.ttfb.to_dict()} if self.ttfb is not None else {}),
            **({"stall": self.stall.to_dict()} if self.stall is not None else {}),
            **({"http2": self.http2.to_dict()} if self.http2 is not None else {}),
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
            endpoints={
                (str(part["method"]), str(part["name"])): cls.from_dict(part)
                for part in data.get("endpoints", ())
            },
            connect=Histogram.from_dict(data["connect"]) if "connect" in data else None,
            handshake=Histogram.from_dict(data["handshake"]) if "handshake" in data else None,
            ttfb=Histogram.from_dict(data["ttfb"]) if "ttfb" in data else None,
            stall=Histogram.from_dict(data["stall"]) if "stall" in data else None,
            http2=Http2Figures.from_dict(data["http2"]) if "http2" in data else None,
        )


def _merged(mine: Histogram | None, theirs: Histogram | None) -> Histogram | None:
    """Two optional histograms as one (None if neither)."""
    if theirs is None:
        return mine
    merged = Histogram() if mine is None else mine
    merged += theirs
    return merged


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


def where(exception: BaseException, files: Iterable[str] = ()) -> str:
    """``file.py:LINE`` of the innermost frame of ``exception``'s traceback inside
    ``files`` (the user's own code), else of the innermost frame; "" without one."""
    frames = traceback.extract_tb(exception.__traceback__)
    wanted = {os.path.realpath(f) for f in files}
    mine = [f for f in frames if os.path.realpath(f.filename) in wanted]
    if not frames:
        return ""
    frame = (mine or frames)[-1]
    return f"{os.path.basename(frame.filename)}:{frame.lineno}"


def describe_exception(exception: BaseException, files: Iterable[str] = ()) -> str:
    """``Kind: message (file.py:LINE)`` (``where``), within ``EXAMPLE_CHARS``."""
    at = where(exception, files)
    at = f" ({at})" if at else ""
    message = str(exception).splitlines()[0] if str(exception) else ""
    head = f"{type(exception).__name__}: {message}" if message else type(exception).__name__
    room = EXAMPLE_CHARS - len(at)
    if len(head) > room:
        head = head[: room - 3] + "..."
    return head + at


class Channel:
    """The hot-path accumulator of one request name (method, name) in one process.

    ``sources`` are recorders outside Python's reach (the native loop's thread): each
    hands over what it completed since it was last asked, at every ``take``."""

    __slots__ = ("current", "locust_logged", "method", "name", "sources")

    def __init__(self, method: str, name: str) -> None:
        self.method = method
        self.name = name
        self.current = Interval()
        self.sources: list[Callable[[], Interval]] = []
        self.locust_logged = False  # fed from Locust's request events: its stats have them

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
    Locust stats feed) what each request name did in the interval. With two or more
    channels (or ``split`` set: a request mix, whatever its size) the interval also
    carries each channel's part in ``endpoints``.
    """

    def __init__(self) -> None:
        self.current = Interval()
        self.channels: dict[tuple[str, str], Channel] = {}
        self.split = False  # every channel an endpoint, even a single one (a mix)
        self.roll_listeners: list[RollListener] = []
        self.rolled_requests = 0  # every request ever handed over, for consistency checks
        # a user's own paced users (``swarm/child/locustfile.py``): how late the task of the
        # request being recorded started (us), given its response time; None: not paced
        self.pacing: Callable[[int], int | None] | None = None
        self.user_files: tuple[str, ...] = ()  # where a user's own classes are defined

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
        *,
        request_type: str = "",
        name: str = "",
        response_time: float = 0.0,
        response_length: int | None = None,
        exception: BaseException | str | None = None,
        response: Any = None,
        **_: Any,
    ) -> None:
        """A Locust ``request`` event listener (response_time in ms): recorded in the
        channel of its request name, so a locustfile's names are the run's endpoints.
        A paced user's request counts its latency from its task's intended start
        (``pacing``), with its service time and lag beside it."""
        channel = self.channel(str(request_type), str(name))
        channel.locust_logged = True
        interval = channel.current
        status = getattr(response, "status_code", None)
        service_us = int(response_time * 1000)
        kind = None
        if exception is not None:
            kind = classify(exception, status if isinstance(status, int) and status else None)
        answered = kind is None or kind.startswith("http_")
        latency_us = service_us
        if answered and self.pacing is not None:
            lag_us = self.pacing(service_us)
            if lag_us is not None:
                interval.record_schedule(service_us, lag_us)
                latency_us += lag_us
        if kind is None:
            interval.record(latency_us, response_length or 0)
            return
        example = None
        if interval.wants_example(kind):
            reason = getattr(response, "reason", None) or ""
            example = f"HTTP {status} {reason}".strip() if kind.startswith("http_") else None
            example = example or repr(exception)
        interval.record_error(kind, latency_us if answered else None, response_length or 0, example)

    def on_user_error(self, exception: BaseException, tb: Any = None, **_: Any) -> None:
        """A Locust ``user_error`` event listener: an exception raised in a user's task
        counts as a failed request of kind ``user_exception``, the first of each interval
        kept as the example (``AttributeError: ... (locustfile.py:12)``)."""
        example = None
        if self.current.wants_example(USER_EXCEPTION):
            example = describe_exception(exception, self.user_files)
        self.record_error(USER_EXCEPTION, example=example)

    def roll(self) -> Interval:
        interval, self.current = self.current, Interval()
        split = self.split or len(self.channels) > 1
        for channel in self.channels.values():
            part = channel.take()
            if not part.requests:
                if part.users_busy:  # users took requests none of which completed yet
                    interval.merge(part)
                continue
            interval.merge(part)
            if split:
                interval.endpoints[(channel.method, channel.name)] = part
            if channel.locust_logged:
                continue  # Locust's stats logged each of these requests already
            for listener in self.roll_listeners:
                listener(channel.method, channel.name, part)
        self.rolled_requests += interval.requests
        return interval
