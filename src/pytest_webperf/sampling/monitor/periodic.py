"""A daemon thread that samples every ``interval`` on a drift-free schedule: the base of
the target's and the generator's monitors.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Generic, TypeVar

from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.sampling.resources import tick

log = logging.getLogger(__name__)

S = TypeVar("S", ResourceSample, GeneratorSample)


class _PeriodicMonitor(Generic[S]):
    """A daemon thread calling ``_tick`` every ``interval`` on a drift-free schedule;
    ``_tick`` appends (when, sample) to ``_samples`` under the lock."""

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        self.interval = interval
        self._clock = clock
        self._lock = threading.RLock()  # _error() is called with it held
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = clock()
        self._errors: list[str] = []
        self._samples: list[tuple[float, S]] = []

    def __enter__(self) -> _PeriodicMonitor[S]:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("monitor already started")
        self._thread = threading.Thread(
            target=self._run, name=f"webperf-{type(self).__name__}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread (within one sample's time); safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def mark_start(self, at: float | None = None) -> None:
        """Set the origin of ``t`` (a ``time.monotonic()`` value; default now)."""
        with self._lock:
            self._origin = self._clock() if at is None else at

    def samples(self) -> list[S]:
        """Every sample so far, ``t`` relative to the current origin, in time order."""
        with self._lock:
            origin, taken = self._origin, list(self._samples)
        return [replace(sample, t=tick(at - origin)) for at, sample in taken]

    @property
    def errors(self) -> list[str]:
        """Sampling failures, one line each (a part whose root exited, an unreadable file)."""
        with self._lock:
            return list(self._errors)

    def _run(self) -> None:
        deadline = self._clock() + self.interval
        while not self._stop.wait(max(0.0, deadline - self._clock())):
            self._tick(self._clock())
            deadline += self.interval
            now = self._clock()
            if deadline <= now:  # starved past a tick: skip it rather than burst to catch up
                deadline = now + self.interval

    def _tick(self, now: float) -> None:
        raise NotImplementedError

    def _error(self, message: str) -> None:
        with self._lock:
            if message not in self._errors:
                self._errors.append(message)
        log.warning("webperf sampler: %s", message)
