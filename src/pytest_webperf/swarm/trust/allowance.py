"""What a remote worker may load: the address of the master it joined (any port: the
run's targets listen there, each on a port of its own), and the targets its own
``webperf worker --allow-target URL`` names (that host and port). A spec naming
anything else is refused in one line before any user starts, so nothing is sent.

Hosts are compared by the addresses they resolve to when the spec arrives: a target
named by the master's host name, or by its IP address, is the master's either way.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "mqtt": 1883, "mqtts": 8883}
Endpoint = tuple[str, int]  # (host, port)
Resolve = Callable[[str], frozenset[str]]


def endpoint_of(url: str) -> Endpoint:
    """(host, port) of a target URL; ValueError if it is not one."""
    try:
        parts = urlsplit(str(url).strip())
        port = parts.port
    except ValueError:
        port, parts = None, None
    schemes = ", ".join(f"{s}://" for s in DEFAULT_PORTS)
    if parts is None or parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(
            f"{url!r} is not a target URL (example: http://10.0.0.9:8080; schemes {schemes})"
        )
    return parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def addresses(host: str) -> frozenset[str]:
    """The IP addresses ``host`` resolves to (none if it does not)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return frozenset()
    return frozenset(str(info[4][0]) for info in found)


@dataclass(frozen=True)
class Allowance:
    """A worker's allowance: ``master``, the host it joined, and ``targets``, the
    (host, port) pairs of its ``--allow-target`` URLs."""

    master: str
    targets: tuple[Endpoint, ...] = ()

    @classmethod
    def of(cls, master: str, urls: Iterable[str]) -> Allowance:
        return cls(master, tuple(endpoint_of(url) for url in urls))

    def refusal(self, endpoints: Iterable[Endpoint], resolve: Resolve = addresses) -> str | None:
        """Why this worker will not load these (a spec's ``endpoints``), in one line, or
        None if it may."""
        masters: frozenset[str] | None = None
        for host, port in endpoints:
            if (host, port) in self.targets:
                continue
            if masters is None:
                masters = resolve(self.master)
            theirs = resolve(host)
            if theirs and theirs <= masters:
                continue
            return (
                f"the run's target {host}:{port} is refused: it is not the master's address "
                f"({self.master}) nor a target this worker allows (webperf worker "
                f"--allow-target URL); nothing was sent"
            )
        return None
