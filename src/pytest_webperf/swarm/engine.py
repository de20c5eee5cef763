"""The native engine's Python face (no gevent, no Locust: safe anywhere): the C extension
loaded, or why it is not built here; ``NativeEngine``, one generator process's engine
speaking one session's protocol; what every session's figures share (the histograms it
hands over, a connection's failures named, the tally of an interval's failures).

The engine is one C extension (``swarm/native/``: ``engine.c`` and ``python.c``, with a
file per protocol behind one seam) built with the package where a C compiler and
Python's headers are found (Linux: epoll); where it is not, each protocol's module says
why, once, and the run falls back to a pure-Python user where there is one. Each
protocol's options are a small value object (a ``Session``): ``hotloop.Http1`` and
``Http2``, ``mqttloop.Mqtt``, ``streamloop.WebSocket`` and ``Sse``; it gives the C side
its options and names what the C side counted.
"""

from __future__ import annotations

import errno
import importlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.recorder import CONNECT, TLS, Interval, classify

# the C side's kinds of failure (native/engine.h: K_*), each with a key
(
    K_CONNECT_ERRNO,
    K_IO_ERRNO,
    K_CONNECT_TIMEOUT,
    K_TIMEOUT,
    K_TLS,
    K_HTTP,
    K_CLOSED,
    K_PROTOCOL,
    K_UNEXPECTED_STATUS,
    K_UNEXPECTED_BODY,
    K_RST,
    K_GOAWAY,
    K_GRPC,
    K_WS_HANDSHAKE,
    K_WS_CLOSE,
    K_WS_ABNORMAL,
    K_WS_CLOSE_TIMEOUT,
    K_SSE_TYPE,
    K_UNMATCHED,
    K_CONNACK,
    K_REFUSED,
) = range(1, 22)
KINDS = 21  # the C side says how many it has (``_hotloop.KINDS``): a unit test compares

Failure = tuple[int, int, int, int, int, bytes]  # kind, key, count, a, b, example


@dataclass(frozen=True)
class Extension:
    """The native engine as built here: its module, or None and why."""

    module: Any | None
    why: str = ""

    def unavailable(self, what: str) -> str | None:
        """Why ``what`` (``the native request loop``) cannot run here, or None."""
        return None if self.module is not None else f"{what} is not built here ({self.why})"

    @property
    def tls(self) -> bool:
        """Whether it speaks TLS here (built with OpenSSL's headers)."""
        return self.module is not None and bool(getattr(self.module, "TLS", 0))

    @property
    def h2(self) -> bool:
        """Whether it speaks HTTP/2 here (built with libnghttp2's headers)."""
        return self.module is not None and bool(getattr(self.module, "H2", 0))

    def bucket_index(self, value_us: int) -> int:
        """The C side's histogram bucket of ``value_us`` (the same as ``Histogram``'s)."""
        if self.module is None:
            raise RuntimeError("the native engine is not built here")
        return int(self.module.bucket_index(value_us))


def extension(name: str = "_hotloop") -> Extension:
    """``pytest_webperf.swarm.<name>``, or why it cannot be imported."""
    try:
        return Extension(importlib.import_module(f"pytest_webperf.swarm.{name}"))
    except ImportError as exc:  # not built here (no compiler, not Linux)
        return Extension(None, str(exc))


ENGINE = extension()


def histogram_from(data: tuple[int, int, int, int, list[tuple[int, int]]]) -> Histogram:
    """A histogram as the C side hands it over: count, total, min, max, buckets."""
    count, total, minimum, maximum, pairs = data
    histogram = Histogram()
    histogram.counts = dict(pairs)
    histogram.count, histogram.total = count, total
    histogram.minimum, histogram.maximum = minimum, maximum
    return histogram


def transport_failure(kind: int, key: int, raw: bytes) -> tuple[str, str] | None:
    """(error kind, example) of a failure of the connection itself, whatever its protocol
    (a socket error, TLS), named as the HTTP users name them; None: the session's."""
    if kind in (K_CONNECT_ERRNO, K_IO_ERRNO):
        error = OSError(key, os.strerror(key))
        if kind == K_CONNECT_ERRNO:
            return ("emfile" if key == errno.EMFILE else CONNECT), str(error)
        return classify(error), str(error)
    if kind == K_TLS:
        return TLS, raw.decode("utf-8", "replace") or "TLS failed"
    return None


@dataclass
class Tally:
    """An interval's failures by kind, with the first example of each (cut to ``chars``)."""

    chars: int | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, n: int, example: str | None = None) -> None:
        if n:
            self.kinds[kind] = self.kinds.get(kind, 0) + n
            if example is not None:
                self.examples.setdefault(kind, example[: self.chars])

    def interval(self, data: dict[str, Any]) -> Interval:
        """The interval of one ``take()`` part with these failures."""
        errors = sum(self.kinds.values())
        return Interval(
            requests=data["ok"] + errors,
            errors=errors,
            bytes=data["bytes"],
            histogram=histogram_from(data["latency"]),
            error_kinds=self.kinds,
            error_examples=self.examples,
        )


class Session(Protocol):
    """A protocol's options (a small frozen value object): what the C side is given, and
    how what it counted is named."""

    protocol: ClassVar[str]  # the C side's session (native/python.c: SESSIONS)

    def options(self) -> dict[str, Any]: ...

    def name(self, failure: Failure, timeout_s: float) -> tuple[str, str]:
        """(error kind, example) of one of the C side's failures."""
        ...

    def interval(self, data: dict[str, Any], timeout_s: float) -> Interval:
        """One entry's part of a ``take()``: an Interval, every failure named."""
        ...


Namer = Callable[[Failure, float], tuple[str, str]]


def named_interval(
    name: Namer, data: dict[str, Any], timeout_s: float, chars: int | None
) -> Interval:
    """A ``take()`` part as an Interval, each failure named by ``name``."""
    tally = Tally(chars)
    for failure in data["fails"]:
        kind, example = name(failure, timeout_s)
        tally.add(kind, failure[2], example)
    return tally.interval(data)


class NativeEngine:
    """One generator process's native engine: connections added and removed by Locust's
    users, every byte sent, read and timed by its C thread outside the GIL, in the
    protocol of ``session``."""

    def __init__(
        self,
        host: str,
        port: int,
        session: Session,
        *,
        timeout_s: float = 10.0,
        tls: bool = False,
        tls_ca: str | None = None,
        tls_resume: bool = False,
        server_name: str = "",
        sources: Sequence[str] = (),
    ) -> None:
        if ENGINE.module is None:
            raise RuntimeError(ENGINE.unavailable("the native engine"))
        address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0][4][0]
        self.session = session
        self.timeout_s = timeout_s
        self.engine = ENGINE.module.Engine(
            session.protocol, address, port, timeout_s, session.options()
        )
        if sources:  # local addresses, round robin: past one address's ephemeral ports
            self.engine.bind_sources(b"".join(socket.inet_aton(source) for source in sources))
        if tls:  # the C side's own OpenSSL client (unverified without a CA)
            self.use_tls(server_name or host, tls_ca, tls_resume)
        self.sent = self.received = 0
        # at each take: (monotonic time, messages sent, answered) so far, so that what was
        # sent within the measured phase can be told from the rest (``longlived.accounting``)
        self.rolls: list[tuple[float, int, int]] = []

    def use_tls(self, server_name: str, ca_file: str | None = None, resume: bool = False) -> None:
        """Every connection speaks TLS (SNI ``server_name``, the session's ALPN), verified
        against ``ca_file`` if given (host name included); ``resume``: a new connection
        resumes the last session of its user. Before the first ``add``."""
        self.engine.use_tls(server_name, ca_file, resume)

    def add(self, fraction: float = 0.0, ident: int = 0, role: int = 0) -> int:
        """A new connection (a user) in ``role``, under the number ``ident``; paced: its
        first request or message at ``fraction`` of a period from now."""
        return int(self.engine.add(fraction, ident, role))

    def remove(self, handle: int) -> None:
        self.engine.remove(handle)

    def go(self) -> None:
        """The publishers start (every subscriber of the run is open)."""
        self.engine.go()

    def stop_sending(self) -> None:
        """Nothing is sent after this returns (what is in flight completes)."""
        self.engine.stop_sending()

    def open(self, count: int) -> None:
        """A fixed count: exactly ``count`` requests from now (``pacing.Tickets.open``)."""
        self.engine.open_tickets(count)

    @property
    def finished(self) -> bool:
        return bool(self.engine.tickets_finished())

    def state(self) -> dict[str, Any]:
        """The run so far: connections added, tried, open; what the session still owes."""
        return dict(self.engine.state())

    def take(self) -> list[Interval]:
        """What each entry completed since the last take (one entry without a mix)."""
        parts = self.engine.take()
        self.sent += int(parts[0]["sent"])
        self.received += int(parts[0]["received"])
        self.rolls.append((time.monotonic(), self.sent, self.received))
        return [self.session.interval(data, self.timeout_s) for data in parts]

    def finish(self) -> dict[str, Any]:
        """Close every connection (politely, where the protocol says how), stop the
        thread: the whole run's ledger."""
        return dict(self.engine.finish())

    def close(self) -> None:
        """Stop the thread, close every connection at once."""
        self.engine.close()


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return ENGINE.bucket_index(value_us)
