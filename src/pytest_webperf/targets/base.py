"""The ``Target`` seam: something that serves load on a loopback address."""

from __future__ import annotations

import http.client
import ipaddress
import random
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pytest_webperf.swarm.wire import client_context


@runtime_checkable
class Target(Protocol):
    """A server under test, up and healthy for as long as its context is open."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str: ...

    def parts(self) -> Mapping[str, int]:
        """Part name -> root pid of its process tree on this host (empty if unknown)."""
        ...

    def check_alive(self) -> None:
        """Raise ``TargetError`` (with logs) if the target died."""
        ...

    def logs(self) -> str: ...

    def describe(self) -> dict[str, Any]:
        """What the result records about the target: image, limits, url."""
        ...


EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # below it, well-known and registered services' ports are thicker


def ephemeral_range(path: Path = EPHEMERAL) -> tuple[int, int]:
    """The ports the kernel gives out as the local end of outgoing connections (Linux's
    ``ip_local_port_range``; Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(host: str = "127.0.0.1", ephemeral: tuple[int, int] | None = None) -> int:
    """A port no one has bound right now, below the kernel's ephemeral range where it can.

    The target binds it a moment later, or seconds later (MariaDB initialises its storage
    first). A port from the ephemeral range (what ``bind(0)`` gives) can meanwhile become
    the local end of any process's outgoing connection, and a load generator opens
    thousands a second: the target's bind then fails (``Address already in use``, seen in
    CI with parallel tests). The kernel never gives out a port below that range to a
    connection, so one chosen there at random stays free unless another process binds
    it on purpose. ``bind(0)`` where the range leaves no room below it."""
    low, _ = ephemeral if ephemeral is not None else ephemeral_range()
    for _ in range(64 if low - LOWEST_PORT >= 1000 else 0):
        port = random.randrange(LOWEST_PORT, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _connection(host: str, port: int, timeout: float, tls: bool) -> http.client.HTTPConnection:
    if tls:
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=client_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)


def http_ready(host: str, port: int, path: str, timeout: float = 2.0, *, tls: bool = False) -> bool:
    """Whether ``GET path`` answers with a 2xx status right now (over TLS: unverified)."""
    conn = _connection(host, port, timeout, tls)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
        return 200 <= status < 300
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


@dataclass(frozen=True)
class Probe:
    """One health check's answer."""

    ready: bool
    final: bool  # a definitive "no": waiting longer will not make it healthy
    detail: str  # what it answered, for messages: "HTTP 404 Not Found", "connection refused"
    # it speaks another protocol (TLS to a plain check, plain HTTP to a TLS one): no wait
    wrong_protocol: bool = False


# what an HTTP/1.1 check meets at a listener that speaks HTTP/2 with prior knowledge only
# (nginx 1.22's `listen ... http2` without ssl): its SETTINGS frame; targets/http2.py then
# asks again over h2c
H2C_ONLY = "it speaks HTTP/2 only (h2c, prior knowledge): a SETTINGS frame answered the GET"


def is_settings_frame(head: bytes) -> bool:
    """Whether ``head`` starts with an HTTP/2 SETTINGS frame on stream 0."""
    return len(head) >= 9 and head[3] == 0x04 and head[5:9] == b"\x00\x00\x00\x00"


# 4xx says "you asked for the wrong thing" (a definitive no), except these two,
# which say "ask again later"; 5xx and no answer say "not ready yet".
_RETRY_LATER = {408, 429}


def classify_status(status: int, reason: str = "") -> Probe:
    """What an HTTP status on the health path means for a server that is starting."""
    detail = f"HTTP {status} {reason}".rstrip()
    if 200 <= status < 300:
        return Probe(ready=True, final=False, detail=detail)
    final = 400 <= status < 500 and status not in _RETRY_LATER
    return Probe(ready=False, final=final, detail=detail)


def probe_http(
    host: str,
    port: int,
    path: str,
    timeout: float = 2.0,
    *,
    tls: bool = False,
    tls_option: str = "tls=True",
) -> Probe:
    """``GET path`` once (over TLS with ``tls``, unverified), classified by
    ``classify_status``; a server that speaks TLS to a plain check, or plain HTTP to a
    TLS one, is said so at once (``tls_option``: how the user asks for TLS)."""
    conn = _connection(host, port, timeout, tls)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        if response.status == 400 and not tls and _PLAIN_TO_TLS in response.read(4096):
            return Probe(
                ready=False,
                final=True,
                detail=f"the server answered HTTP 400 ({_PLAIN_TO_TLS.decode()}): is it HTTPS? "
                f"({tls_option})",
                wrong_protocol=True,
            )
        return classify_status(response.status, response.reason)
    except ConnectionRefusedError:
        return Probe(ready=False, final=False, detail="connection refused")
    except (OSError, http.client.HTTPException) as exc:
        # TLS failed (a wrong record, a hang-up, no answer to the hello): plain HTTP there?
        if tls and speaks_plain_http(host, port, timeout):
            return Probe(
                ready=False,
                final=True,
                detail=f"the server speaks plain HTTP, not TLS: is it http://? (drop {tls_option})",
                wrong_protocol=True,
            )
        seen = None if tls else tls_seen(exc, host, port, timeout)
        if seen:
            return Probe(
                ready=False,
                final=True,
                detail=f"the server answered with {seen}: is it HTTPS? ({tls_option})",
                wrong_protocol=True,
            )
        if isinstance(exc, http.client.BadStatusLine) and not isinstance(
            exc, http.client.RemoteDisconnected
        ):
            line = str(exc.args[0] if exc.args else "")
            if is_settings_frame(line.encode("latin-1", "replace")):
                return Probe(ready=False, final=True, detail=H2C_ONLY, wrong_protocol=True)
            return Probe(
                ready=False,
                final=True,
                detail=f"the server answered {line[:40]!r}, not an HTTP status line",
                wrong_protocol=True,
            )
        return Probe(ready=False, final=False, detail=f"{type(exc).__name__}: {exc}".rstrip(": "))
    finally:
        conn.close()


# what nginx answers when plain HTTP reaches its TLS port
_PLAIN_TO_TLS = b"The plain HTTP request was sent to HTTPS port"


def tls_seen(exc: BaseException, host: str, port: int, timeout: float) -> str | None:
    """What TLS a failed plain-HTTP check met: a TLS record instead of a status line (an
    alert), or, when the server hung up or reset, a TLS handshake it completes; else None."""
    if isinstance(exc, http.client.BadStatusLine) and not isinstance(
        exc,
        http.client.RemoteDisconnected,  # (a BadStatusLine too)
    ):
        line = str(exc.args[0] if exc.args else "")  # the bytes as latin-1
        if line.startswith("\x15\x03"):
            return "a TLS alert"
        if line.startswith("\x16\x03"):
            return "a TLS handshake"
        return None
    if not isinstance(exc, (ConnectionResetError, http.client.RemoteDisconnected)):
        return None
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            client_context().wrap_socket(raw, server_hostname=host),
        ):
            return "a TLS handshake"
    except (OSError, ValueError):
        return None


def speaks_plain_http(host: str, port: int, timeout: float) -> bool:
    """Whether a plain ``GET`` gets an HTTP status line back."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            raw.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            return raw.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def probe_tcp(host: str, port: int, timeout: float = 2.0) -> Probe:
    ready = tcp_ready(host, port, timeout)
    return Probe(ready=ready, final=False, detail="accepts connections" if ready else "no answer")


def wait_healthy(
    probe: Callable[[], Probe],
    alive: Callable[[], None],
    timeout: float,
    *,
    settle: float = 1.0,
    interval: float = 0.1,
) -> Probe:
    """Probe until ready, ``timeout`` passes, or a definitive "no" has held for
    ``settle`` seconds (a server may 404 for a moment while it loads its routes);
    the last answer. ``alive`` raises if the server died."""
    deadline = time.monotonic() + timeout
    refused_since: float | None = None
    while True:
        answer, now = probe(), time.monotonic()
        refused_since = (refused_since or now) if answer.final else None
        settled = refused_since is not None and now - refused_since >= settle
        if answer.ready or answer.wrong_protocol or settled or now >= deadline:
            return answer
        alive()
        time.sleep(interval)


def health_failure(name: str, where: str, answer: Probe, timeout: float, fix: str) -> str:
    """The message for a health check that did not pass (``answer`` is the last one)."""
    if answer.wrong_protocol:
        return f"{name}: the health check {where}: {answer.detail}"
    if answer.final:
        return f"{name}: the health check {where} answered {answer.detail}, not 2xx; {fix}"
    return (
        f"{name} did not become healthy within {timeout:.0f}s "
        f"(health check: {where}; last answer: {answer.detail})"
    )


def tcp_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port


def restart(target: Target) -> bool:
    """Restart ``target`` as a fresh instance if it can be; whether it was."""
    method = getattr(target, "restart", None)
    if method is None:
        return False
    method()
    return True
