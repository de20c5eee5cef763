"""What sends a counted measurement's requests, from the pytest process itself
(``Sender``): the native loop's engine (``swarm/hotloop.py``: HTTP/1.1 and HTTPS, HTTP/2
(h2, h2c) and unary gRPC, a mix in its fixed order) on ``concurrency`` keep-alive
connections, phase after phase on the same connections (the warm-up, the probe's halves,
the window), each phase exactly its tickets; where the native loop is not built, Python's
``http.client`` on one keep-alive connection (HTTP/1.1, a mix in the same fixed order).

Not a swarm: a swarm child starts Locust and gevent (1-2 s) for each window, and counts do
not care who sends the requests, only that both sides get the same ones in the same order.
What a phase measured is the recorder's ``Interval`` (each entry of a mix an endpoint), so a
counted repetition's result is built as a timed one's is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm import hotloop
from pytest_webperf.swarm.engine import NativeEngine
from pytest_webperf.swarm.recorder import UNEXPECTED_STATUS as UNEXPECTED
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.client import Client

POLL_S = 0.01  # how often a phase's end is looked for
STEP_S = 0.0005  # ... one request's end, or the target at rest, one request at a time
SETTLED = 2  # looks in a row that find every thread of the target asleep
# a target that used this much CPU without coming to rest never does (a thread that
# polls); a thread only waiting for a core (a loaded machine) uses none, and is waited for
REST_CPU_S = 1.0
REST_WAIT_S = 120.0  # ... and however loaded the machine, no request waits longer


def unsendable(workload: Workload, concurrency: int) -> str | None:
    """Why this machine cannot send ``workload`` counted, or None."""
    if hotloop.unavailable() is None:
        if workload.http2 and (why := hotloop.h2_unavailable()) is not None:
            return why
        return None
    if workload.http2:
        return (
            "HTTP/2 and gRPC are sent by the native loop, which is not here: "
            f"{hotloop.unavailable()}"
        )
    if concurrency > 1:
        return (
            "more than one connection is sent by the native loop, which is not here "
            f"({hotloop.unavailable()}): count at concurrency 1"
        )
    return None


class Sender:
    """Exactly N requests of ``workload`` at a time (``send``) to ``target`` as it is now,
    on the same connections from phase to phase."""

    def __init__(
        self,
        target: Target,
        workload: Workload,
        *,
        concurrency: int = 1,
        timeout_s: float = 60.0,
        tls_ca: str | None = None,
        tls_resume: bool = False,
        idle: Callable[[], tuple[bool, float]] | None = None,
    ) -> None:
        why = unsendable(workload, concurrency)
        if why is not None:
            raise OptionError(f"{target.name}: count=True: {why}")
        self.target, self.timeout_s = target, timeout_s
        # at concurrency 1: each request sent only once the target is at rest (``idle``)
        self.idle = idle if concurrency == 1 else None
        self.restless = False  # the target was not at rest in time once: no more waiting
        self.entries = workload.entries()
        self.mix = bool(workload.mix)  # each entry an endpoint
        self.order = workload.sequence(max(1, workload.requests)) if workload.ordered else ()
        self.sent = 0  # requests sent so far (the Python client's place in the order)
        self.loop: NativeEngine | None = None
        self.client: Client | None = None
        if hotloop.unavailable() is None:
            counted = replace(workload, requests=max(1, workload.requests))
            self.loop = hotloop.engine_for(
                counted, target.url, timeout_s=timeout_s, tls_ca=tls_ca, tls_resume=tls_resume
            )
            for _ in range(concurrency):
                self.loop.add()
        else:
            self.client = Client(target, tls_ca)

    def send(
        self, count: int, limit_s: float | None = None, *, paced: bool = True
    ) -> tuple[Interval, float]:
        """``count`` requests; what they did (each entry of a mix an endpoint) and how
        long they took. Past ``limit_s`` the rest are not sent (the interval says how many
        completed). ``paced``: each only once the target is at rest (when it can tell)."""
        started = time.monotonic()
        limit = self.timeout_s * count if limit_s is None else limit_s
        if self.loop is not None:
            total = self._native(count, started + limit, paced)
        else:
            total = self._python(count, started + limit)
        return total, time.monotonic() - started

    def _native(self, count: int, deadline: float, paced: bool) -> Interval:
        assert self.loop is not None
        self.loop.take()  # what an earlier phase left is not this one's
        if paced and self.idle is not None and not self.restless:  # each to a server at rest
            for sent in range(count):
                if not self._settle(deadline):  # the rest back to back
                    self.loop.open(count - sent)
                    while not self.loop.finished and time.monotonic() < deadline:
                        time.sleep(POLL_S)
                    break
                self.loop.open(1)
                while not self.loop.finished and time.monotonic() < deadline:
                    time.sleep(STEP_S)
                if time.monotonic() >= deadline:
                    break
            return self._merged(self.loop.take())
        self.loop.open(count)
        while not self.loop.finished and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if not self.loop.finished:
            self.loop.open(0)  # no more; those in flight complete or time out
            while not self.loop.finished and time.monotonic() < deadline + self.timeout_s:
                time.sleep(POLL_S)
        return self._merged(self.loop.take())

    def _settle(self, deadline: float) -> bool:
        """Wait until the target is at rest (every thread asleep, twice in a row). One
        that uses ``REST_CPU_S`` of CPU without resting never will (a thread of its own
        that polls): the rest of its requests go back to back, and ``restless`` says so.
        Whether it came to rest."""
        assert self.idle is not None
        calm, began = 0, None
        gives_up = min(deadline, time.monotonic() + REST_WAIT_S)
        while calm < SETTLED:
            rest, cpu_s = self.idle()
            began = cpu_s if began is None else began
            if cpu_s - began > REST_CPU_S or time.monotonic() >= gives_up:
                self.restless = True
                return False
            calm = calm + 1 if rest else 0
            if calm < SETTLED:
                time.sleep(STEP_S)
        return True

    def _python(self, count: int, deadline: float) -> Interval:
        assert self.client is not None
        parts = [Interval() for _ in self.entries]
        for _ in range(count):
            if time.monotonic() > deadline:
                break
            index = self.order[self.sent % len(self.order)] if self.order else 0
            entry = self.entries[index]
            self.sent += 1
            began = time.perf_counter()
            try:
                ok = self.client.send(entry)
            except OSError as exc:
                self.client.close()
                raise TargetError(
                    f"{self.target.name}: a counted request ({entry.method} {entry.path}) "
                    f"failed: {exc}",
                    self.target.logs(),
                ) from None
            micros = int((time.perf_counter() - began) * 1e6)
            if ok:
                parts[index].record(micros, 0)
            else:
                example = f"{entry.method} {entry.path}"
                parts[index].record_error(UNEXPECTED, micros, example=example)
        return self._merged(parts)

    def _merged(self, parts: list[Interval]) -> Interval:
        """The entries' intervals as one, each an endpoint when there are several."""
        total = Interval()
        for entry, part in zip(self.entries, parts, strict=False):
            total.merge(part)
            if self.mix:
                total.endpoints[(entry.method, entry.name)] = part
        return total

    def close(self) -> None:
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        if self.client is not None:
            self.client.close()
            self.client = None
