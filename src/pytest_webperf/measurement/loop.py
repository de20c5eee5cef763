"""The one measurement loop: repetitions of a swarm against a target, resources sampled
alongside. HTTP and MQTT differ in the load (a ``LoadKind``), not in the loop.

    kind = HttpRequests(workload, user_class="lean")          # or mqtt_telemetry.MqttTelemetry(...)
    runs = run_repetitions(target, kind, plan, monitor_factory=sampling_monitor)

A repetition: the kind sets up what surrounds it (MQTT: an observer subscribed before
anything is published) and says what swarm to start against the target as it is now
(its port may change when it is restarted); the monitor samples the target and the
generator while the swarm runs; the target must still be alive afterwards; then the
kind accounts (MQTT: drain, read back, count every message). One policy for a target
that dies (``TargetDied``, with the repetitions measured until then), one
generator-bound rule, one ``RunResult`` construction. The A/B schedule (``measurement/pairs.py``) is
a layer above ``run_repetition``, not a copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from pytest_webperf.errors import ProtocolError, TargetError
from pytest_webperf.measurement.plan import Monitor, MonitorFactory, RunPlan, no_monitor
from pytest_webperf.measurement.profiles import Profiler
from pytest_webperf.measurement.repetition import run_result
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.progress import NoProgress, Progress, RepetitionDone, Tick
from pytest_webperf.models.samples import ResourceSample
from pytest_webperf.models.workload import Workload
from pytest_webperf.sampling.contention import machine_busy_seconds, own_tree_seconds
from pytest_webperf.swarm import http2
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.runner import Event, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target, restart


class Round(Protocol):
    """One repetition of one kind of load: its swarm, and what it adds to the result."""

    @property
    def spec(self) -> SwarmSpec: ...

    def account(self, result: RunResult) -> RunResult: ...


class LoadKind(Protocol):
    """What load a repetition runs (HTTP requests, MQTT telemetry) and what surrounds it.
    ``fresh``: each round starts the target's instances itself (a counted round), so the
    loop does not restart it and each round is an instance of its own."""

    @property
    def fresh(self) -> bool: ...

    def check(self, target: Target) -> None:
        """Raise a ``WebperfError`` now if this load cannot run against ``target``."""
        ...

    def round(
        self, target: Target, plan: RunPlan, repetition: int
    ) -> AbstractContextManager[Round]: ...


@dataclass(frozen=True)
class _HttpRound:
    spec: SwarmSpec
    note: str | None = None

    def account(self, result: RunResult) -> RunResult:
        return result if self.note is None else replace(result, notes=(*result.notes, self.note))


def check_protocol(workload: Workload, target: Target) -> None:
    """The target speaks the workload's HTTP (one connection, before any load): a server
    that does not speak HTTP/2, or speaks nothing else, is refused in one line, never
    loaded until every request has failed."""
    if not workload.http2:
        why = http2.http1_refusal(target.url)
        if why is not None:
            raise ProtocolError(
                f"webperf.http: {why}; load it over HTTP/2: webperf.http(target, http2=True)"
            )
        return
    why = http2.probe(target.url)
    if why is not None:
        if all(e.grpc for e in workload.entries()):
            raise ProtocolError(f"webperf.grpc: {why}; gRPC needs a server that speaks HTTP/2")
        raise ProtocolError(
            f"webperf.http(http2=True): {why}; serve HTTP/2 there (nginx: listen ... "
            "http2), or drop http2=True"
        )


@dataclass(frozen=True)
class HttpRequests:
    """An HTTP swarm: every user sends its next request when the last completes (closed
    loop) or, with the workload's ``interval_s``, when its schedule says (paced)."""

    workload: Workload
    user_class: str = "lean"
    note: str | None = None  # said in every repetition's notes (a fallback to the lean user)
    tls_ca: str | None = None  # https: verify the certificate against this CA file
    tls_resume: bool = False  # a new connection per request resumes the last TLS session
    fresh = False

    def check(self, target: Target) -> None:
        check_protocol(self.workload, target)

    @contextmanager
    def round(self, target: Target, plan: RunPlan, repetition: int) -> Iterator[_HttpRound]:
        spec = plan.swarm(
            target.url,
            workload=self.workload,
            user_class=self.user_class,
            tls_ca=self.tls_ca,
            tls_resume=self.tls_resume,
        )
        yield _HttpRound(spec, self.note)


@dataclass(frozen=True)
class LocustUsers:
    """A user's own Locust users (``webperf.locust``): ``user_class`` names them
    (``file:/path.py[:A,B]``, ``swarm/userspec.py``); the base of an A/B run (the target
    ``base``) runs ``base_user_class``, the same locustfile in the base's tree."""

    workload: Workload
    user_class: str
    base: Target | None = None
    base_user_class: str | None = None
    fresh = False

    def check(self, target: Target) -> None:
        pass

    def user_class_for(self, target: Target) -> str:
        if self.base is not None and target is self.base and self.base_user_class:
            return self.base_user_class
        return self.user_class

    @contextmanager
    def round(self, target: Target, plan: RunPlan, repetition: int) -> Iterator[_HttpRound]:
        user_class = self.user_class_for(target)
        yield _HttpRound(plan.swarm(target.url, workload=self.workload, user_class=user_class))


class TargetDied(TargetError):
    """The target died during a measurement; ``runs`` are the repetitions measured before."""

    def __init__(self, message: str, logs: str, runs: Sequence[RunResult]) -> None:
        super().__init__(message, logs)
        self.runs = tuple(runs)


class MachineClock:
    """CPU seconds the rest of the machine (not this pytest process tree: not the
    generator, not the observer) used over the measured phase, from the swarm's events."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None

    @staticmethod
    def _other() -> float:
        return machine_busy_seconds() - own_tree_seconds()

    def on_event(self, event: Event) -> None:
        if event["type"] == "measure-start":
            self.start = self._other()
        elif event["type"] == "done":
            self.end = self._other()

    @property
    def other_seconds(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start


@dataclass(frozen=True)
class Label:
    """Who is measuring, for progress lines: test, measurement, side, repetition i/N."""

    nodeid: str = ""
    name: str = ""
    side: str = ""
    repetitions: int = 1


class _Ticker:
    """Turns the swarm's interval events into progress ticks."""

    def __init__(self, progress: Progress, label: Label, plan: RunPlan, repetition: int) -> None:
        self.progress, self.label, self.plan, self.repetition = progress, label, plan, repetition
        self.elapsed = {"warmup": 0.0, "measure": 0.0}
        self.errors = 0
        self.monitor: Monitor | None = None  # the server's latest sample, for live metrics

    def on_event(self, event: Event) -> None:
        if event["type"] != "interval":
            return
        phase = str(event["phase"])
        interval = Interval.from_dict(event)
        elapsed = float(event["elapsed"])
        self.elapsed[phase] = self.elapsed.get(phase, 0.0) + elapsed
        if phase == "measure":
            self.errors += interval.errors
        label = self.label
        self.progress.update(
            Tick(
                nodeid=label.nodeid,
                name=label.name,
                side=label.side,
                repetition=self.repetition,
                repetitions=label.repetitions,
                phase="measuring" if phase == "measure" else "warm-up",
                elapsed_s=self.elapsed[phase],
                total_s=self.plan.duration_s if phase == "measure" else self.plan.warmup_s,
                rps=interval.requests / elapsed if elapsed > 0 else 0.0,
                errors=self.errors,
                **live_figures(interval, event, self.monitor),
            )
        )


def live_figures(interval: Interval, event: Event, monitor: Monitor | None) -> dict[str, Any]:
    """A second's own figures for a progress tick: requests, failures, latency, users,
    and the server's CPU and memory at the latest sample (all parts summed)."""
    h = interval.histogram
    latest: list[ResourceSample] = []
    if monitor is not None:
        samples = monitor.resource_samples()
        last_t = samples[-1].t if samples else None
        latest = [s for s in samples if s.t == last_t]
    return {
        "requests": interval.requests,
        "new_errors": interval.errors,
        "users": int(event.get("users", 0)),
        **{f"p{q}_ms": h.percentile(q) / 1000 if h.count else None for q in (50, 95, 99)},
        "server_cpu_percent": sum(s.cpu_percent for s in latest) if latest else None,
        "server_rss_mb": sum(s.rss_mb for s in latest) if latest else None,
    }


def events_to(
    monitor: Monitor | None, clock: MachineClock, ticker: _Ticker | None = None
) -> Callable[[Event], None]:
    """What the swarm's events tell the monitor (generator pid, measured phase), the
    clock and the progress display."""

    if ticker is not None:
        ticker.monitor = monitor

    def on_event(event: Event) -> None:
        clock.on_event(event)
        if ticker is not None:
            ticker.on_event(event)
        if monitor is None:
            return
        if event["type"] == "started":
            monitor.watch_generator(int(event["pid"]))
        elif event["type"] == "measure-start":
            monitor.mark_start(event.get("cpu"))
        elif event["type"] == "done":
            # the server's CPU window is the requests' window: users still stopping
            # after this (a second at 10,000 users) would cost CPU for uncounted requests
            monitor.mark_end(event.get("cpu"))

    return on_event


def died(target: Target, runs: Sequence[RunResult]) -> TargetDied | None:
    """A ``TargetDied`` if the target is no longer alive, else None."""
    try:
        target.check_alive()
    except TargetError as exc:
        first = str(exc.args[0]).split("\n--- last lines")[0]
        return TargetDied(
            f"{target.name} died during the measurement: {first}", getattr(exc, "logs", ""), runs
        )
    return None


def run_repetition(
    target: Target,
    kind: LoadKind,
    plan: RunPlan,
    repetition: int,
    *,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
    before: Sequence[RunResult] = (),
) -> RunResult:
    """One repetition against a live target; raises ``TargetDied`` (carrying ``before``)
    if the target died during it."""
    label = label or Label()
    clock = MachineClock()
    ticker = _Ticker(progress, label, plan, repetition) if progress is not None else None
    with kind.round(target, plan, repetition) as round_:
        with monitor_factory(target) as monitor:
            spec = round_.spec
            if monitor is not None and (probes := monitor.cpu_probes()):
                spec = replace(spec, cpu_probes=probes)  # the child stamps their CPU
            outcome = run_swarm(spec, events_to(monitor, clock, ticker))
        dead = died(target, before)
        if dead is not None:
            raise dead
        result = round_.account(
            run_result(
                outcome,
                repetition,
                plan,
                monitor,
                other_cpu_s=clock.other_seconds,
                interval_s=round_.spec.workload.interval_s,
                requests_asked=round_.spec.workload.requests,
                arrival_rate=round_.spec.workload.arrival_rate,
                weights=round_.spec.workload.weights(),
            )
        )
    if progress is not None:
        progress.done(
            RepetitionDone(
                nodeid=label.nodeid,
                name=label.name,
                side=label.side,
                repetition=repetition,
                repetitions=label.repetitions,
                requests=result.requests,
                rps=result.rps,
                errors=result.errors,
                p95_ms=result.latency.p95_ms if result.requests else None,
                instructions_per_req=result.counts.instructions_per_req if result.counts else None,
            )
        )
    return result


def run_repetitions(
    target: Target,
    kind: LoadKind,
    plan: RunPlan,
    *,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
    restart_every: int = 0,
    profiler: Profiler | None = None,
) -> list[RunResult]:
    """Every repetition against a live target, restarting it (a fresh process or
    container instance) every ``restart_every`` repetitions when it can be restarted;
    with a ``profiler``, each one profiled (its side ``B``), the rates planned as they go."""
    kind.check(target)
    dead = died(target, ())  # fail fast, and refreshes the parts' pids for the monitor
    if dead is not None:
        raise dead
    label = replace(label or Label(), repetitions=plan.repeat)
    results: list[RunResult] = []
    instance = 0
    if profiler is not None:
        monitor_factory = profiler.monitors(monitor_factory)
    for repetition in range(1, plan.repeat + 1):
        if kind.fresh:
            instance = repetition - 1
        elif restart_every and repetition > 1 and (repetition - 1) % restart_every == 0:
            instance += int(restart(target))
        measure = partial(
            run_repetition,
            target,
            kind,
            plan,
            repetition,
            monitor_factory=monitor_factory,
            progress=progress or NoProgress(),
            label=label,
            before=results,
        )
        result = measure() if profiler is None else profiler.repetition("B", measure)
        results.append(replace(result, instance=instance))
        if profiler is not None:
            profiler.replan({"B": results})
    return results
