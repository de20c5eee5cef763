"""Keep-alive requests from this process to a target, unrecorded (``warm``): a counted
window's warm-up and its probe, whose responses are checked but not measured."""

from __future__ import annotations

import http.client
from collections.abc import Sequence

from pytest_webperf.errors import TargetError
from pytest_webperf.models.workload import Request
from pytest_webperf.swarm.wire import client_context
from pytest_webperf.targets.base import Target, split_url


class Client:
    """Keep-alive requests from this process to a target, one connection at a time."""

    def __init__(self, target: Target, ca: str | None) -> None:
        self.scheme, self.host, self.port = split_url(target.url)
        self.ca = ca
        self.connection: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def send(self, entry: Request) -> bool:
        """One request; whether its response is what the entry expects."""
        if self.connection is None:
            self.connection = (
                http.client.HTTPSConnection(
                    self.host, self.port, timeout=60, context=client_context(self.ca)
                )
                if self.scheme == "https"
                else http.client.HTTPConnection(self.host, self.port, timeout=60)
            )
        self.connection.request(
            entry.method, entry.path, body=entry.body or None, headers=dict(entry.headers)
        )
        response = self.connection.getresponse()
        body = response.read()
        if response.will_close:
            self.close()
        return entry.accepts(response.status) and entry.body_matches(body)


def warm(target: Target, entries: Sequence[Request], count: int, ca: str | None) -> int:
    """``count`` keep-alive requests from this process (the entries in turn), unrecorded;
    how many failed. A warm-up, or a probe between a zero and a dump. A kept-alive
    connection the server closed meanwhile (Node closes one idle for 5 s, and a loaded
    machine under Valgrind can be that slow) is opened again once for the request."""
    client = Client(target, ca)
    failed = 0
    try:
        for index in range(count):
            entry = entries[index % len(entries)]
            reused = client.connection is not None
            try:
                ok = client.send(entry)
            except (OSError, http.client.HTTPException) as exc:
                client.close()
                try:
                    if not reused:
                        raise
                    ok = client.send(entry)
                except (OSError, http.client.HTTPException):
                    raise TargetError(
                        f"{target.name}: request {index + 1} of {count} before the counted "
                        f"window ({entry.method} {entry.path}) failed: {exc}",
                        target.logs(),
                    ) from None
            failed += not ok
    finally:
        client.close()
    return failed
