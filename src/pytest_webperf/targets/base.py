"""The ``Target`` seam: something that serves load on a loopback address."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit


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


def free_port(host: str = "127.0.0.1") -> int:
    """A port no one listens on right now (the target binds it soon after)."""
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


def http_ready(host: str, port: int, path: str, timeout: float = 2.0) -> bool:
    """Whether ``GET path`` answers with a 2xx status right now."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
        return 200 <= status < 300
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def tcp_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(
    ready: Callable[[], bool], alive: Callable[[], None], timeout: float, interval: float = 0.1
) -> bool:
    """Poll ``ready`` until true or ``timeout`` passes; ``alive`` raises if the server died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        alive()
        time.sleep(interval)
    return ready()


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port
