"""Parent side of a swarm: starts the child, reads its events, bounds its life."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.errors import SwarmError
from pytest_webperf.models.samples import Snapshot
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.recorder import CONNECT, TIMEOUT, Interval
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.swarm.trust.secret import environment_with

Event = dict[str, Any]


@dataclass
class GeneratorProcess:
    """One load-generator process: where it ran and the CPU it used while measuring."""

    pid: int
    role: str  # "local", "master", "workerN" or "remoteN@host" (another machine's)
    cpus: tuple[int, ...] = ()  # the CPUs it was allowed to run on
    cpu_s: float = 0.0  # user + system CPU seconds in the measured phase

    @property
    def remote(self) -> bool:
        return self.role.startswith("remote")

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "role": self.role, "cpus": list(self.cpus), "cpu_s": self.cpu_s}


@dataclass
class SwarmOutcome:
    """What one swarm measured (measured phase only) and what it said along the way."""

    duration_s: float = 0.0
    total: Interval = field(default_factory=Interval)
    series: list[Snapshot] = field(default_factory=list)
    warmup: list[Snapshot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    users: int = 0
    pid: int = 0
    generators: list[GeneratorProcess] = field(default_factory=list)
    locust_requests: int | None = None  # what Locust's own stats counted, all phases
    rolled_requests: int | None = None  # what our recorders counted, all phases

    @property
    def generator_cpu_s(self) -> float:
        """CPU seconds of every generator process in the measured phase."""
        return sum(g.cpu_s for g in self.generators)

    @property
    def histogram(self) -> Histogram:
        return self.total.histogram

    def kind(self, name: str) -> int:
        return self.total.error_kinds.get(name, 0)

    @property
    def timeouts(self) -> int:
        return self.kind(TIMEOUT)

    @property
    def connect_errors(self) -> int:
        return self.kind(CONNECT)


def snapshot(interval: Interval, t: float, elapsed: float, users: int) -> Snapshot:
    h = interval.histogram
    has = h.count > 0
    return Snapshot(
        t=round(t, 3),
        elapsed=round(elapsed, 4),
        users=users,
        requests=interval.requests,
        errors=interval.errors,
        timeouts=interval.error_kinds.get(TIMEOUT, 0),
        bytes=interval.bytes,
        p50_ms=h.percentile(50) / 1000 if has else None,
        p95_ms=h.percentile(95) / 1000 if has else None,
        p99_ms=h.percentile(99) / 1000 if has else None,
    )


def child_environment(remote: Remote | None) -> dict[str, str]:
    """A swarm child's environment: the run's secret in it only if the run has one."""
    return environment_with(remote.secret if remote is not None else None)


class SwarmProcess:
    """``with SwarmProcess(spec) as swarm: for event in swarm.events(): ...``"""

    def __init__(self, spec: SwarmSpec) -> None:
        self.spec = spec
        self.log = tempfile.TemporaryFile(mode="w+", prefix="webperf-swarm-")  # noqa: SIM115
        self.process: subprocess.Popen[bytes] | None = None
        self._read_fd = -1

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def __enter__(self) -> SwarmProcess:
        read_fd, write_fd = os.pipe()
        env = {**child_environment(self.spec.remote), "PYTHONUNBUFFERED": "1"}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest_webperf.swarm", "--events-fd", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        self._read_fd = read_fd
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(self.spec.to_dict()).encode())
        self.process.stdin.close()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1
        self.log.close()

    def stop(self) -> None:
        """Kill the child's whole process group if it is still there."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-6000:]

    def events(self) -> Iterator[Event]:
        """The child's events until it closes the pipe; bounded by the spec's deadline."""
        deadline = time.monotonic() + self.spec.deadline_s + 15
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self._read_fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stop()
                    raise SwarmError(
                        f"the load generator did not finish within {self.spec.deadline_s:.0f}s "
                        f"and was killed. Its output:\n{self.output()}"
                    )
                if not selector.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    yield json.loads(line)
        assert self.process is not None
        code = self.process.wait(timeout=30)
        if code != 0:
            raise SwarmError(
                f"the load generator exited with status {code}. Its output:\n{self.output()}"
            )


class _Collector:
    """Folds the child's events into a SwarmOutcome."""

    def __init__(self) -> None:
        self.outcome = SwarmOutcome()
        self.measured_t = self.warmup_t = 0.0
        self.cpu_at_start: dict[str, float] = {}  # by role: pids of two machines may be equal
        self.cpu_latest: dict[str, float] = {}
        self.placement: dict[str, tuple[int, tuple[int, ...]]] = {}
        self.error: str | None = None

    def on_event(self, event: Event) -> None:
        handler = getattr(self, "on_" + str(event["type"]).replace("-", "_"), None)
        if handler is not None:
            handler(event)

    def on_note(self, event: Event) -> None:
        self.outcome.notes.append(str(event["message"]))

    def on_error(self, event: Event) -> None:
        self.error = str(event["message"])

    def on_spawned(self, event: Event) -> None:
        self._place(event)

    def _place(self, event: Event) -> None:
        """Where each process runs, from the first event that says (a worker slow to
        answer at the start says it in a later interval)."""
        for process in event.get("processes", ()):
            if "cpus" in process and str(process["role"]) not in self.placement:
                self.placement[str(process["role"])] = (
                    int(process["pid"]),
                    tuple(int(c) for c in process.get("cpus", ())),
                )

    def on_measure_start(self, event: Event) -> None:
        self.cpu_at_start = _cpu_by_role(event)

    def on_interval(self, event: Event) -> None:
        outcome = self.outcome
        interval = Interval.from_dict(event)
        elapsed, users = float(event["elapsed"]), int(event["users"])
        self._place(event)
        if event["phase"] == "measure":
            self.cpu_latest.update(_cpu_by_role(event))
            self.measured_t += elapsed
            outcome.total.merge(interval)
            outcome.series.append(snapshot(interval, self.measured_t, elapsed, users))
        else:
            self.warmup_t += elapsed
            outcome.warmup.append(snapshot(interval, self.warmup_t, elapsed, users))

    def on_done(self, event: Event) -> None:
        outcome = self.outcome
        outcome.duration_s = float(event["duration_s"])
        outcome.users = int(event["users"])
        rolled = event.get("rolled_requests")
        outcome.rolled_requests = None if rolled is None else int(rolled)
        outcome.generators = [
            GeneratorProcess(
                self.placement.get(role, (0, ()))[0],
                role,
                self.placement.get(role, (0, ()))[1],
                cpu_s=round(cpu - self.cpu_at_start.get(role, 0.0), 3),
            )
            for role, cpu in self.cpu_latest.items()
        ]

    def on_locust(self, event: Event) -> None:
        self.outcome.locust_requests = int(event["requests"])


def run_swarm(spec: SwarmSpec, on_event: Callable[[Event], None] | None = None) -> SwarmOutcome:
    """Run one swarm to completion and collect its measured phase."""
    collector = _Collector()
    outcome = collector.outcome
    with SwarmProcess(spec) as swarm:
        outcome.pid = swarm.pid
        if on_event is not None:
            on_event({"type": "started", "pid": swarm.pid})
        try:
            for event in swarm.events():
                if on_event is not None:
                    on_event(event)
                collector.on_event(event)
        except SwarmError:
            if collector.error is None:
                raise
            raise SwarmError(collector.error) from None  # the child's own one-line reason
    if outcome.duration_s <= 0:
        raise SwarmError(
            f"the load generator ended without a result. Its output:\n{swarm.output()}"
        )
    return outcome


def _cpu_by_role(event: Event) -> dict[str, float]:
    """CPU seconds by process role (unique in a swarm, where pids of two machines may not be)."""
    return {str(p["role"]): float(p["cpu_s"]) for p in event.get("processes", ())}
