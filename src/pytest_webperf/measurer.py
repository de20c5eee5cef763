"""Runs a test's measurement plan: the repetitions (or an A/B run's interleaved pairs)
of one kind of load against a started target, judged by the one judge and recorded;
a counted run sized by a probe (``requests_lasting``). ``api.Webperf`` starts the
targets, builds the load and hands it over."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from pytest_webperf import compare
from pytest_webperf.ab import Against, Pairs, Schedule, Unchanged, run_pairs
from pytest_webperf.checks import Check
from pytest_webperf.config import RunConfig
from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.httpworkload import http_name, http_workload
from pytest_webperf.measure import HttpRequests, Label, LoadKind, TargetDied, run_repetitions
from pytest_webperf.models import Measurement, Verdict
from pytest_webperf.mqtt_telemetry import MqttTelemetry
from pytest_webperf.placement import Placement, cpu_limit
from pytest_webperf.progress import NoProgress, Progress
from pytest_webperf.runplan import MonitorFactory, RunPlan, sampling_monitor
from pytest_webperf.scaleout import remote_of
from pytest_webperf.swarm.hotloop import resolve_user
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.values import parse_concurrency, parse_duration
from pytest_webperf.workload import MIN_COUNTED_S, Workload

PROBE_S = 2.0  # how long ``requests_lasting`` times a target's throughput
SPARE = 1.5  # the count it sizes is this many times what the probe's rate gives


class Judge(Protocol):
    """Decides a measurement's verdict (``WebperfSession.judge``, the one judge): against
    the base's runs in an A/B run, alone for a target new since the base, else against
    the stored baseline; ``checks`` None: the run's, else the defaults for its kind."""

    def __call__(
        self,
        measurement: Measurement,
        *,
        checks: Sequence[Any] | None = None,
        max_error_rate: float | None = None,
        require_power: bool = False,
    ) -> Measurement: ...


class Measurer:
    """One test's measurements: planned from its settings, run, judged, recorded."""

    def __init__(
        self,
        *,
        nodeid: str,
        concurrency: int,
        config: RunConfig,
        judge: Judge,
        placement: Placement,
        monitor_factory: MonitorFactory = sampling_monitor,
        against: Callable[[], Against] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.nodeid = nodeid
        self.concurrency = concurrency
        self.config = config
        self.placement = placement
        self._judge = judge
        self._monitor_factory = monitor_factory
        self._against = against
        self._progress = progress or NoProgress()
        self.measurements: list[Measurement] = []

    def requests_lasting(
        self,
        target: Target,
        seconds: float = MIN_COUNTED_S,
        path: str = "/hello",
        *,
        method: str = "GET",
        concurrency: int | None = None,
        probe: float = PROBE_S,
    ) -> int:
        """The request count (``requests=N``) that lasts at least ``seconds`` against
        ``target`` on this machine: a short closed loop (``probe`` seconds after a 0.5 s
        warm-up, one repetition, neither recorded nor judged) times its throughput, and N
        is that throughput over ``seconds``, with half as much again to spare (a counted
        run has no warm-up, and a busy machine's throughput moves). A study sized so
        lasts long enough to mean something where ab's fixed counts, long on the study's
        hardware, end in a fraction of a second."""
        if not seconds > 0 or not probe > 0:
            raise OptionError(f"seconds={seconds!r}, probe={probe!r}: both are > 0 seconds")
        if isinstance(target, PairedTarget):  # A/B: size by the change (B), both get N
            target = target.change
        plan = dataclasses.replace(
            self.plan(target, concurrency=concurrency, duration=probe, warmup=0.5, repeat=1),
            remote=None,
        )
        user_class = resolve_user(self.config.user)
        workload = http_workload(
            path,
            method=method,
            body=b"",
            headers=None,
            user_class=user_class,
            workers=1,
            users=plan.concurrency,
        )
        plan = dataclasses.replace(plan, workers=1)  # as a counted run: one process
        (run,) = run_repetitions(
            target,
            HttpRequests(workload, user_class=user_class),
            plan,
            progress=self._progress,
            label=Label(self.nodeid, f"sizing {http_name(workload)}"),
        )
        if run.requests == 0 or run.rps <= 0:
            raise TargetError(
                f"{target.name}: no request completed in a {probe:g} s probe of {path}, "
                "so no request count can be sized from it"
            )
        return max(plan.concurrency, math.ceil(run.rps * seconds * SPARE))

    def measure(
        self,
        target: Target,
        kind: LoadKind,
        plan: RunPlan,
        name: str,
        workload: Workload,
        *,
        checks: Sequence[Check] | None = None,
    ) -> Measurement:
        """All repetitions (or A/B pairs) of one kind of load, judged and recorded."""
        measurement = Measurement(
            nodeid=self.nodeid,
            name=name,
            server=target.name,
            concurrency=plan.concurrency,
            workload=workload,
            runs=(),
            target=target.describe(),
            generator=_generator(kind),  # part of its baselines' machine id
        )
        label = Label(self.nodeid, name)
        if isinstance(target, PairedTarget):
            return self._measure_pairs(
                target, kind, plan, measurement=measurement, label=label, checks=checks
            )
        try:
            runs = run_repetitions(
                target,
                kind,
                plan,
                monitor_factory=self._monitor_factory,
                progress=self._progress,
                label=label,
                restart_every=self.config.restart_every,
            )
        except TargetDied as exc:
            self._died(measurement, exc)
            raise
        judged = self._judged(dataclasses.replace(measurement, runs=tuple(runs)), checks)
        self.measurements.append(judged)
        return judged

    def _judged(self, measurement: Measurement, checks: Sequence[Check] | None) -> Measurement:
        """``measurement`` with its verdict, by the test's settings (the one judge)."""
        return self._judge(
            measurement,
            checks=checks or self.config.compare_fail,
            max_error_rate=self.config.max_error_rate,
            require_power=self.config.require_power,
        )

    def _died(self, measurement: Measurement, exc: TargetDied) -> None:
        """The repetitions measured before the target died go into the reports."""
        reason = str(exc.args[0]).split("\n")[0]
        self.measurements.append(
            dataclasses.replace(
                measurement,
                runs=exc.runs,
                verdict=Verdict(
                    "broken",
                    (reason,),
                    (f"incomplete: {len(exc.runs)} repetition(s) measured before it died",),
                ),
            )
        )

    def described(self, target: PairedTarget) -> dict[str, Any]:
        """An A/B measurement's ``against``: the base ref, and whether the target changed."""
        assert self._against is not None
        return {**self._against().describe(), "changed": target.changed}

    def skip_unchanged(self, target: PairedTarget, measurement: Measurement) -> NoReturn:
        """A target the same as at the base ref: recorded as ``unchanged``, not measured."""
        assert self._against is not None
        tree = self._against().tree
        compared = f" in {target.compared}" if target.compared else ""
        message = (
            f"{target.name} is the same as at {tree.ref} ({tree.commit[:12]}){compared}: not "
            "measured (--webperf-against-always measures it)"
        )
        self.measurements.append(
            dataclasses.replace(
                measurement,
                against=self.described(target),
                verdict=Verdict("unchanged", notes=(message,)),
            )
        )
        raise Unchanged(message)

    def _measure_pairs(
        self,
        target: PairedTarget,
        kind: LoadKind,
        plan: RunPlan,
        *,
        measurement: Measurement,
        label: Label,
        checks: Sequence[Check] | None,
    ) -> Measurement:
        config = self.config
        described = self.described(target)
        if target.base is None and target.changed:
            return self._measure_new(
                target, kind, plan, measurement=measurement, described=described, checks=checks
            )
        if target.base is None:
            self.skip_unchanged(target, measurement)
        measurement = dataclasses.replace(measurement, against=described)

        def judged(pairs: Pairs) -> Measurement:
            return self._judged(
                dataclasses.replace(
                    measurement,
                    runs=tuple(pairs.change),
                    base_runs=tuple(pairs.base),
                    against={
                        **described,
                        "instances": list(pairs.instances),
                        "looks": max(1, pairs.looks),
                    },
                ),
                checks,
            )

        def settled(pairs: Pairs) -> bool:
            verdict = judged(pairs).verdict
            return verdict is not None and compare.verdict_settled(verdict)

        schedule = Schedule(plan.repeat, config.against_budget, config.restart_every)
        try:
            pairs = run_pairs(
                target,
                kind,
                plan,
                schedule,
                settled,
                monitor_factory=self._monitor_factory,
                progress=self._progress,
                label=label,
            )
        except TargetDied as exc:
            self._died(measurement, exc)
            raise
        result = dataclasses.replace(
            judged(pairs),
            against={
                **described,
                "base_target": target.side("A").describe(),
                "restart_every": schedule.restart_every,
                "pairs": len(pairs.order),
                "order": list(pairs.order),
                "instances": list(pairs.instances),
                "looks": pairs.looks,
                "stopped": pairs.stopped,
            },
            profile=pairs.profile,
        )
        self.measurements.append(result)
        return result

    def _measure_new(
        self,
        target: PairedTarget,
        kind: LoadKind,
        plan: RunPlan,
        *,
        measurement: Measurement,
        described: dict[str, Any],
        checks: Sequence[Check] | None,
    ) -> Measurement:
        """A server the base ref does not have: measured alone, judged by the absolute
        limits only (the error-rate limit among them), reported as having no base."""
        runs = run_repetitions(
            target.change,
            kind,
            plan,
            monitor_factory=self._monitor_factory,
            progress=self._progress,
            label=Label(self.nodeid, measurement.name),
            restart_every=self.config.restart_every,
        )
        judged = self._judged(
            dataclasses.replace(measurement, runs=tuple(runs), against=described), checks
        )
        self.measurements.append(judged)
        return judged

    def plan(
        self,
        target: Target,
        *,
        concurrency: int | None,
        duration: Any,
        warmup: Any,
        repeat: int | None,
    ) -> RunPlan:
        config = self.config
        limits = target.describe().get("limits") or {}
        return RunPlan(
            concurrency=parse_concurrency(concurrency)[0] if concurrency else self.concurrency,
            duration_s=parse_duration(duration) if duration is not None else config.duration,
            warmup_s=parse_duration(warmup) if warmup is not None else config.warmup,
            repeat=repeat or config.repeat,
            timeout_s=config.timeout,
            workers=config.workers,
            remote=remote_of(config),
            spawn_rate=config.spawn_rate,
            profile=config.profile,
            server_cores=cpu_limit(limits),
            generator_cpus=self.placement.generator_cpus,
        )


def _generator(kind: LoadKind) -> str:
    """What sends a kind of load: the resolved HTTP user, or the MQTT one (``mqtt``:
    paho clients, ``mqtt-native``: the native MQTT loop)."""
    if isinstance(kind, MqttTelemetry):
        return kind.user_class
    return str(getattr(kind, "user_class", "lean"))
