"""The native request loop's Python face: whether it is built, which user a run gets,
and its figures as the recorder's ``Interval`` (no gevent, no Locust: safe anywhere).

``_hotloop`` is a C extension (``_hotloop.c``) built with the package where a C
compiler and Python's headers are found (Linux: epoll); where it is not, the plugin
falls back to the pure-Python lean user and says so once (``fallback_note``). Built with
libnghttp2's headers it speaks HTTP/2 too (``_h2.c``, ``h2_unavailable``); HTTP/2 has no
silent fallback: the lean user's ``h2`` package costs 20 to 90 times the CPU per request,
which would change what is measured.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

from pytest_webperf.errors import OptionError
from pytest_webperf.models.http2 import NO_WINDOW, Http2Figures
from pytest_webperf.models.workload import Request, Workload
from pytest_webperf.swarm import grpcwire, http2, wire
from pytest_webperf.swarm.extension import Tally, extension, histogram_from, socket_error
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    EXAMPLE_CHARS,
    PROTOCOL,
    TIMEOUT,
    TLS,
    UNEXPECTED_BODY,
    UNEXPECTED_STATUS,
    Interval,
    classify,
)

LOOP = extension("_hotloop")
_hotloop = LOOP.module

# the C side's kinds of failure and codes (_hotloop.c: K_*, E_*, C_*)
K_HTTP, K_CLOSED, K_PROTOCOL = 1, 2, 3
K_UNEXPECTED_STATUS, K_UNEXPECTED_BODY = 8, 9
K_TLS = 20  # the example is the SSL error's words
K_RST, K_GOAWAY, K_GRPC = 21, 22, 23  # HTTP/2 (_h2.c), keyed by the error or status code
E_H2 = 20  # K_PROTOCOL's key from HTTP/2: the example is the words
C_H2 = 10  # K_CLOSED's key from HTTP/2: likewise
PROTOCOL_MESSAGES: dict[int, Callable[[bytes], str]] = {
    1: wire.bad_status_line,
    2: lambda raw: wire.SWITCHING_PROTOCOLS,
    3: lambda raw: wire.too_long("response head", wire.MAX_HEAD),
    4: lambda raw: wire.bad_content_length(raw.lower()),
    5: wire.bad_chunk_size,
    6: lambda raw: wire.CHUNK_WITHOUT_CRLF,
    7: lambda raw: wire.too_long("chunk-size line", wire.MAX_LINE),
    8: lambda raw: wire.too_long("trailer line", wire.MAX_LINE),
}
USERS = ("auto", "native", "lean", "fast")


def unavailable() -> str | None:
    """Why the native loop cannot run here, or None."""
    return LOOP.unavailable("the native request loop")


def h2_unavailable() -> str | None:
    """Why the native loop cannot speak HTTP/2 here, or None."""
    why = unavailable()
    if why is not None:
        return why
    if not getattr(_hotloop, "H2", 0):
        return (
            "the native loop is built without HTTP/2 (libnghttp2's headers were not found): "
            "apt-get install libnghttp2-dev, then reinstall pytest-webperf"
        )
    return None


def tls_built() -> bool:
    """Whether the native loop speaks TLS here (built with OpenSSL's headers)."""
    return LOOP.tls


def user_for_url(user_class: str, url: str) -> str:
    """The user a resolved ``user_class`` becomes for ``url``: https:// with a native loop
    built without TLS is the lean user's (``fallback_note`` said so)."""
    if user_class == "native" and wire.uses_tls(url) and not tls_built():
        return "lean"
    return user_class


def fallback_note(requested: str) -> str | None:
    """The one line a run prints when ``auto`` falls back to the lean user (or, for
    https targets, when the native loop is built without TLS)."""
    why = unavailable()
    if why is None and requested in ("auto", "native") and not tls_built():
        return (
            "webperf: the native request loop is built without TLS (OpenSSL's headers were "
            "not found): https targets get the lean user (pure Python); reinstall with "
            "libssl-dev for native HTTPS"
        )
    if requested != "auto" or why is None:
        return None
    return (
        f"webperf: {why}: the lean user (pure Python) generates the load; "
        "reinstall with a C compiler and Python's headers for the native one"
    )


def resolve_user(requested: str) -> str:
    """The HTTP user a run gets: ``auto`` is the native loop where it is built, else
    lean; ``native`` where it is not built is an error."""
    if requested == "native":
        why = unavailable()
        if why is not None:
            raise OptionError(f"--webperf-user=native: {why}; use lean")
        return "native"
    if requested == "auto":
        return "lean" if unavailable() else "native"
    return requested


def resolve_http2_user(requested: str, url: str) -> str:
    """The user of an HTTP/2 run: the native loop built with HTTP/2 for ``auto`` and
    ``native`` (an ``OptionError`` saying what to install where it is not: no silent
    fallback to a generator 20 to 90 times costlier), else what was asked (``lean``: the
    ``h2`` package; ``fast`` or a user's own class are refused by the workload's check)."""
    if requested not in ("auto", "native"):
        return requested
    why = h2_unavailable()
    if why is not None:
        raise OptionError(
            f"http2=True: {why}; or user='lean' (HTTP/2 in pure Python with the h2 package, "
            "20 to 90 times the generator's CPU per request)"
        )
    if wire.uses_tls(url) and not tls_built():
        raise OptionError(
            f"http2=True: {url} is https:// and the native loop is built without TLS "
            "(OpenSSL's headers were not found): apt-get install libssl-dev, then reinstall "
            "pytest-webperf; or user='lean'"
        )
    return "native"


def example_of(kind: int, key: int, a: int, b: int, raw: bytes) -> tuple[str, str] | None:
    """(error kind, example) of one of the C side's examples, as the lean user words it."""
    if kind == K_HTTP:
        return f"http_{key}", raw.decode("latin-1")
    if kind == K_CLOSED:
        return CLOSED, raw.decode("latin-1") if key == C_H2 else closed_message(key, a, b)
    if kind == K_PROTOCOL:
        return PROTOCOL, raw.decode("latin-1") if key == E_H2 else PROTOCOL_MESSAGES[key](raw)
    if kind == K_RST:
        return http2.rst_kind(key), raw.decode("latin-1")
    if kind == K_GOAWAY:
        return http2.goaway_kind(key), raw.decode("latin-1")
    if kind == K_GRPC:
        said = raw.decode("utf-8", "replace")
        return grpcwire.error_kind(key), said or f"grpc-status {key} without a grpc-message"
    if kind == K_UNEXPECTED_STATUS:
        return UNEXPECTED_STATUS, raw.decode("latin-1")
    if kind == K_UNEXPECTED_BODY:  # the status line (``a`` bytes of it), the body's start
        line = raw[:a].decode("latin-1")
        return UNEXPECTED_BODY, wire.unexpected_body(line, raw[a:])[:EXAMPLE_CHARS]
    if kind == K_TLS:
        return TLS, raw.decode("latin-1")
    return None


def failures_from(data: dict[str, Any], timeout_s: float) -> tuple[dict[str, int], dict[str, str]]:
    """One ``Engine.take()``'s failures: (kind -> count, kind -> example), each named as
    the lean user names it."""
    tally = Tally(EXAMPLE_CHARS)
    add = tally.add
    for status, n in data["http"].items():
        add(f"http_{status}", n)
    no_answer = f"no answer within {timeout_s:g} s"
    add(TIMEOUT, data["timeouts"], no_answer)
    add(CONNECT, data["connect_timeouts"], no_answer)
    add(CLOSED, data["closed"])
    add(PROTOCOL, data["protocol"])
    add(UNEXPECTED_STATUS, data.get("unexpected_status", 0))
    add(UNEXPECTED_BODY, data.get("unexpected_body", 0))
    add(TLS, data.get("tls", 0))
    for number, n in data["connect_errno"].items():
        error = socket_error(number)
        add("emfile" if number == errno.EMFILE else CONNECT, n, str(error))
    for number, n in data["io_errno"].items():
        error = socket_error(number)
        add(classify(error), n, str(error))
    for key, name in (("rst", http2.rst_kind), ("goaway", http2.goaway_kind)):
        for code, n in data.get(key, {}).items():
            add(name(code), n)
    for code, n in data.get("grpc", {}).items():
        add(grpcwire.error_kind(code), n)
    for kind, key, a, b, raw in data["examples"]:
        named = example_of(kind, key, a, b, raw)
        if named is not None:
            tally.examples.setdefault(*named)
    return tally.kinds, tally.named_examples()


def interval_from(data: dict[str, Any], timeout_s: float) -> Interval:
    """One ``Engine.take()`` as an Interval, each failure named as the lean user names it."""
    kinds, examples = failures_from(data, timeout_s)
    errors = sum(kinds.values())
    interval = Interval(
        requests=data["ok"] + errors,
        errors=errors,
        bytes=data["bytes"],
        histogram=histogram_from(data["latency"]),
        error_kinds=kinds,
        error_examples=examples,
    )
    if "service" in data:
        interval.service = histogram_from(data["service"])
        interval.lag = histogram_from(data["lag"])
    if data.get("connect", (0,))[0]:  # a new connection per request: setup times
        interval.connect = histogram_from(data["connect"])
    if data.get("handshake", (0,))[0]:
        interval.handshake = histogram_from(data["handshake"])
    if "headers" in data:  # HTTP/2: per stream
        interval.ttfb = histogram_from(data["headers"])
        if data["stall"][0]:
            interval.stall = histogram_from(data["stall"])
    if "h2" in data:
        interval.http2 = figures_from(data["h2"])
    return interval


def figures_from(data: dict[str, int]) -> Http2Figures:
    """The C side's connection figures (``_h2.c``: ``struct h2_figures``) as saved."""
    known = {k: int(v) for k, v in data.items() if k != "min_window"}
    window = int(data.get("min_window", NO_WINDOW))
    return Http2Figures(**known, min_window=window if window >= 0 else NO_WINDOW)


def closed_message(code: int, got: int, total: int) -> str:
    if code == 1:
        return wire.closed_in_head(got)
    if code == 2:
        return wire.closed_in_body(got, total)
    return wire.closed_in_chunks(got)


def mix_entry(entry: Request, payload: bytes) -> tuple[bytes, bool, float, Any, bytes | None]:
    """One entry of ``Engine.set_mix``: its payload, weight and checks (a substring body
    check only: a regex is the lean user's)."""
    needle = entry.expect_body if isinstance(entry.expect_body, bytes) else None
    statuses = None if entry.expect_status is None else sorted(entry.expect_status)
    return (payload, entry.method == "HEAD", entry.weight, statuses, needle)


class EntryParts:
    """One ``take`` of the loop shared by its entries' channels: the first channel asked
    at a roll takes every entry's part, the others get theirs."""

    def __init__(self, take: Callable[[], list[Interval]]) -> None:
        self._take = take
        self._pending: list[Interval | None] = []

    def source(self, index: int) -> Callable[[], Interval]:
        def part() -> Interval:
            if index >= len(self._pending) or self._pending[index] is None:
                self._pending = list(self._take())
            interval = self._pending[index]
            self._pending[index] = None
            assert interval is not None
            return interval

        return part


class NativeLoop:
    """One generator process's native loop: connections added and removed by Locust's
    users, every request sent and framed by the C thread; ``take`` is an Interval per
    entry of the mix (``mix``: ``Engine.set_mix``'s entries, see ``mix_entry``)."""

    def __init__(
        self,
        host: str,
        port: int,
        payload: bytes,
        *,
        head_only: bool = False,
        timeout_s: float = 10.0,
        interval_s: float = 0.0,
        counted: bool = False,
        arrivals: ArrivalSchedule | None = None,
        mix: Sequence[tuple[bytes, bool, float, Any, bytes | None]] = (),
    ) -> None:
        if _hotloop is None:
            raise RuntimeError(unavailable())
        family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
        mode = _hotloop.COUNTED if counted else _hotloop.PACED if interval_s else _hotloop.CLOSED
        numerator, ns, processes, index = 0, 0, 1, 0
        if arrivals is not None:  # due times as pacing.ArrivalSchedule's, computed in C
            mode = _hotloop.ARRIVAL
            (numerator, ns), processes, index = arrivals.per_ns, arrivals.processes, arrivals.index
        self.timeout_s = timeout_s
        self.process = f"{socket.gethostname()}:{os.getpid()}"  # as arrival.Arrivals names it
        self.engine = _hotloop.Engine(
            int(family),
            address[0],
            port,
            payload,
            head_only,
            timeout_s,
            mode,
            interval_s,
            numerator,
            ns,
            processes,
            index,
        )
        if mix:
            self.engine.set_mix(list(mix))

    @classmethod
    def for_workload(
        cls,
        workload: Workload,
        url: str,
        *,
        timeout_s: float,
        tls_ca: str | None = None,
        tls_resume: bool = False,
        arrivals: ArrivalSchedule | None = None,
    ) -> NativeLoop:
        """The loop that sends ``workload`` to ``url``: its entries (a mix, or the one
        shape with its checks), HTTP/2 header lists, a new connection per request when
        every entry says ``Connection: close``, TLS for https://, a counted one's tickets,
        an ordered mix's sequence."""
        host, port, host_header = wire.split_host(url)
        entries = workload.entries()
        payloads = [
            wire.encode_request(e.method, e.path, host_header, body=e.body, headers=e.headers)
            for e in entries
        ]
        checked = any(e.expect_status is not None or e.expect_body is not None for e in entries)
        checked = checked or workload.http2  # HTTP/2 takes its entries' checks from the mix
        mix = [mix_entry(e, p) for e, p in zip(entries, payloads, strict=True)]
        loop = cls(
            host,
            port,
            payloads[0],
            head_only=entries[0].method == "HEAD",
            timeout_s=timeout_s,
            interval_s=workload.interval_s,
            counted=workload.requests > 0,
            arrivals=arrivals,
            mix=mix if workload.mix or checked else (),
        )
        if workload.ordered and workload.mix:  # a counted mix: its fixed sequence
            loop.in_order(workload.sequence(max(1, workload.requests)))
        if workload.http2:  # each entry as HTTP/2 header fields (the payloads are HTTP/1.1's)
            scheme = "https" if wire.uses_tls(url) else "http"
            requests = [
                (http2.header_list(e, host_header, scheme), http2.request_body(e), e.grpc)
                for e in entries
            ]
            loop.use_http2(workload.streams, requests)
        elif all(wire.says_close(e.headers) for e in entries):  # keepalive=False
            loop.close_each()
        if wire.uses_tls(url):  # the C loop's own OpenSSL client (user_for_url)
            loop.use_tls(host, tls_ca, tls_resume)
        return loop

    def in_order(self, sequence: Sequence[int]) -> None:
        """Requests take the mix's entries in this order, cycled, instead of by weight
        (``Workload.sequence``: a counted mix); after the mix, before the first ``add``."""
        self.engine.set_sequence(list(sequence))

    def use_tls(self, server_name: str, ca_file: str | None = None, resume: bool = False) -> None:
        """Every connection speaks TLS (SNI ``server_name``, ALPN http/1.1), verified
        against ``ca_file`` if given (host name included); ``resume``: a new connection
        resumes the last session of its user. Before the first ``add``."""
        self.engine.use_tls(server_name, ca_file, resume)

    def use_http2(
        self,
        streams: int,
        requests: Sequence[tuple[list[tuple[bytes, bytes]], bytes | None, bool]],
        stream_window_bits: int = 30,
        conn_window_bits: int = 30,
    ) -> None:
        """Every connection speaks HTTP/2 (h2c; h2 by ALPN when ``use_tls`` follows) with
        ``streams`` requests in flight: ``requests`` one (header list, body or None, grpc)
        per entry of the mix (``http2.header_list``). Before ``use_tls`` and the first
        ``add``."""
        self.engine.use_http2(streams, list(requests), stream_window_bits, conn_window_bits)

    def close_each(self) -> None:
        """A new connection per request (``webperf.http(keepalive=False)``: the requests say
        ``Connection: close``), whatever the server answers; before the first ``add``."""
        self.engine.close_each()

    def add(self, fraction: float = 0.0) -> int:
        """A new connection (a user); paced: its first request at ``fraction`` of a period."""
        return int(self.engine.add(fraction))

    def remove(self, handle: int) -> None:
        self.engine.remove(handle)

    def open(self, count: int) -> None:
        """A fixed count: exactly ``count`` requests from now (``pacing.Tickets.open``)."""
        self.engine.open_tickets(count)

    @property
    def finished(self) -> bool:
        return bool(self.engine.tickets_finished())

    def stop_sending(self) -> None:
        self.engine.stop_sending()

    def take(self) -> list[Interval]:
        """What each entry completed since the last take (one entry without a mix)."""
        parts = []
        for data in self.engine.take():
            if "refused" in data:  # the server does not speak HTTP/2: one line, no count
                raise RuntimeError(
                    f"webperf.http(http2=True): {data['refused']}; serve HTTP/2 there "
                    "(nginx: listen ... http2), or drop http2=True"
                )
            interval = interval_from(data, self.timeout_s)
            if "users_busy" in data:  # arrival rate: users busy at most, ever opened
                interval.note_users(self.process, data["users_busy"], data["users_opened"])
            parts.append(interval)
        return parts

    def close(self) -> None:
        self.engine.close()


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return LOOP.bucket_index(value_us)
