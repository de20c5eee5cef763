"""What a test gets from the ``webperf`` fixture: start servers, load them, get results.

    def test_hello(webperf):
        target = webperf.server("nginx")            # container up, healthy
        result = webperf.http(target, path="/hello")
        assert result.rps > 0

With ``--webperf-against=REF`` the same test measures the change against its base:
``server()`` and ``process()`` start each target twice (B from the working tree, A from
REF) and ``http()``/``mqtt()`` run interleaved pairs (``ab.py``); a target that did not
change is not measured and the test is reported ``unchanged``.

Plain Python: the fixture in plugin.py only builds this object and closes it.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

from pytest_webperf import compare, placement
from pytest_webperf.ab import Against, Pairs, Schedule, Unchanged, run_pairs
from pytest_webperf.catalog import Catalog
from pytest_webperf.checks import DEFAULT_CHECKS, DEFAULT_MQTT_CHECKS, Check
from pytest_webperf.config import RunConfig
from pytest_webperf.gitref import map_command
from pytest_webperf.measure import (
    HttpRequests,
    Label,
    LoadKind,
    MonitorFactory,
    RunPlan,
    TargetDied,
    run_repetitions,
    sampling_monitor,
)
from pytest_webperf.models import Measurement, RunResult, Verdict
from pytest_webperf.mqtt.run import MqttTelemetry
from pytest_webperf.placement import cpu_limit
from pytest_webperf.progress import NoProgress, Progress
from pytest_webperf.scaleout import remote_of
from pytest_webperf.swarm.hotloop import resolve_user
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.container import ContainerTarget, Limits
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.values import parse_concurrency, parse_duration
from pytest_webperf.workload import Workload, http_name, http_workload


class Judge(Protocol):
    """Decides a measurement's verdict against the stored baseline (``WebperfSession.judge``)."""

    def __call__(
        self,
        measurement: Measurement,
        *,
        checks: Sequence[Any] | None = None,
        generator_bound: bool = False,
        max_error_rate: float | None = None,
        require_power: bool = False,
    ) -> Measurement: ...


class Webperf:
    """One test's handle on targets and swarms; everything it starts ends with the test."""

    def __init__(
        self,
        *,
        nodeid: str,
        concurrency: int,
        config: RunConfig,
        catalog: Callable[[], Catalog],
        judge: Judge,
        monitor_factory: MonitorFactory = sampling_monitor,
        against: Callable[[], Against] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.nodeid = nodeid
        self.concurrency = concurrency
        self.config = config
        self._catalog = catalog
        self._judge = judge
        self._monitor_factory = monitor_factory
        self._against = against  # the base of an A/B run (--webperf-against), made on demand
        self._progress = progress or NoProgress()
        self._stack = ExitStack()
        self.measurements: list[Measurement] = []
        self.placement = placement.plan(
            config.placement,
            target_cpuset=config.target_cpuset,
            generator_cpus=config.generator_cpus,
        )

    def close(self) -> None:
        self._stack.close()

    def server(
        self,
        name: str,
        *,
        cpus: float | None = None,
        memory: str | None = None,
        cpuset: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Target:
        """Catalogue server ``name`` (and what it depends on), healthy, for this test."""
        config, bind = self.config, self.config.target_bind
        if config.target_url:
            return self._stack.enter_context(
                ExternalTarget(
                    config.target_url, name=name, allow_remote=config.allow_remote_target
                )
            )
        spec = self._catalog().get(name)
        limits = Limits(
            cpus=cpus or config.target_cpus or spec.cpus,
            memory=memory or config.target_memory or spec.memory,
            cpuset=cpuset or self.placement.target_cpuset,
        )
        change = ContainerTarget(self._catalog(), name, limits=limits, env=env, bind=bind)
        if self._against is None:
            return self._stack.enter_context(change)
        against = self._against()
        changed = against.server_changed(name)
        started = self._stack.enter_context(change)
        if not against.has_server(name):  # new since the base: nothing to compare with
            return PairedTarget(started, None, changed=True)
        if not changed and not against.always:
            return PairedTarget(started, None, changed=False)
        base = ContainerTarget(against.base_catalog, name, limits=limits, env=env, bind=bind)
        return PairedTarget(started, self._stack.enter_context(base), changed=changed)

    def process(
        self,
        command: str | Sequence[str],
        *,
        name: str | None = None,
        port_env: str = "PORT",
        health: str = "/health",
        startup_timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Target:
        """Start a local command as the target (no containers): it gets a free loopback
        port in ``port_env`` and must answer ``health``; killed with its process group.

        With --webperf-against=REF the base runs the same command in the repository's
        tree at REF: its working directory (``cwd``, default the current one) and every
        absolute path inside the repository, in the command and in ``env``, point into
        that tree. Write paths relative to ``cwd``, or absolute inside the repository."""

        def start(argv: str | Sequence[str], at: str | None, environ: Mapping[str, str]) -> Target:
            target = ProcessTarget(
                argv,
                name=name,
                port_env=port_env,
                health=health,
                startup_timeout=startup_timeout,
                env=environ,
                cwd=at,
                bind=self.config.target_bind,
            )
            return self._stack.enter_context(target)

        change = start(command, cwd, env or {})
        if self._against is None:
            return change
        against = self._against()
        where = Path(cwd or os.getcwd())
        changed = against.path_changed(where)
        if not changed and not against.always:
            return PairedTarget(change, None, changed=False)
        tree = against.tree
        mapped = tree.map(where)
        argv = map_command(tree, shlex.split(command) if isinstance(command, str) else command)
        environ = {k: tree.map_arg(v) for k, v in (env or {}).items()}
        base = start(argv, str(mapped) if mapped is not None else cwd, environ)
        return PairedTarget(change, base, changed=changed)

    def http(
        self,
        target: Target,
        path: str = "/hello",
        *,
        method: str = "GET",
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        concurrency: int | None = None,
        duration: str | float | None = None,
        warmup: str | float | None = None,
        repeat: int | None = None,
        user: str | None = None,
        interval: str | float | None = None,
        rate: float | None = None,
        requests: int | None = None,
        arrival_rate: float | None = None,
    ) -> Measurement:
        """Load ``target`` with an HTTP swarm; all repetitions, judged: a closed loop, paced
        (``interval=`` per user, ``rate=`` over all, ``arrival_rate=`` sent by idle users),
        or ``requests=N`` then stop, as ``ab -n`` (see ``workload.http_workload``)."""
        plan = self._plan(
            target, concurrency=concurrency, duration=duration, warmup=warmup, repeat=repeat
        )
        user_class = resolve_user(user or self.config.user)
        workload = http_workload(
            path,
            method=method,
            body=body,
            headers=headers,
            user_class=user_class,
            workers=self.config.workers + self.config.remote_workers,  # all generator processes
            users=plan.concurrency,
            interval=interval,
            rate=rate,
            requests=self.config.requests if requests is None else requests,
            arrival_rate=arrival_rate,
        )
        if workload.requests:
            plan = dataclasses.replace(plan, warmup_s=0.0)  # ab measures from the first request
        kind = HttpRequests(workload, user_class=user_class)
        return self._measure(target, kind, plan, name or http_name(workload, rate), workload)

    def mqtt(
        self,
        target: Target,
        *,
        users: int | None = None,
        interval: str | float = "500ms",
        qos: int = 2,
        duration: str | float | None = None,
        warmup: str | float | None = None,
        repeat: int | None = None,
        drain: str | float = "60s",
        quiet: str | float = "10s",
        spawn_rate: float | None = None,
        observe: bool = True,
        topic: str = "telemetry",
        name: str | None = None,
    ) -> Measurement:
        """Seed 002's load: ``users`` MQTT clients publishing telemetry at ``qos`` through
        the target's broker, one message per client every ``interval`` (0: flat out),
        every message accounted for (published, acknowledged, delivered to an observer
        and stored by the server; lost, duplicated, late). Judged with the MQTT checks
        (``lost:0``, ``dup:0``, ``tps:5%``, ...) unless the test gives its own."""
        config = self.config
        telemetry = MqttTelemetry(
            interval_s=parse_duration(interval),
            qos=qos,
            drain_s=parse_duration(drain),
            quiet_s=parse_duration(quiet),
            observe=observe,
            topic=topic,
        )
        plan = dataclasses.replace(
            self._plan(
                target,
                concurrency=users or self.concurrency,
                duration=duration,
                warmup=warmup,
                repeat=repeat,
            ),
            spawn_rate=config.spawn_rate if spawn_rate is None else spawn_rate,
        )
        return self._measure(
            target,
            telemetry,
            plan,
            name or telemetry.name,
            telemetry.workload,
            checks=config.compare_fail or DEFAULT_MQTT_CHECKS,
        )

    def _measure(
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
        judged = self._judge(
            dataclasses.replace(measurement, runs=tuple(runs)),
            checks=checks or self.config.compare_fail,
            generator_bound=_mostly_bound(runs),
            max_error_rate=self.config.max_error_rate,
            require_power=self.config.require_power,
        )
        self.measurements.append(judged)
        return judged

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
        assert self._against is not None
        config = self.config
        against = self._against()
        described: dict[str, Any] = {**against.describe(), "changed": target.changed}
        if target.base is None and target.changed:
            return self._measure_new(
                target, kind, plan, measurement=measurement, described=described, checks=checks
            )
        if target.base is None:
            message = (
                f"{target.name} is the same as at {against.tree.ref} "
                f"({against.tree.commit[:12]}): not measured (--webperf-against-always "
                "measures it)"
            )
            self.measurements.append(
                dataclasses.replace(
                    measurement, against=described, verdict=Verdict("unchanged", notes=(message,))
                )
            )
            raise Unchanged(message)
        chosen = tuple(checks or config.compare_fail or DEFAULT_CHECKS)

        def verdict(pairs: Pairs) -> Verdict:
            bound = _mostly_bound(pairs.change) or _mostly_bound(pairs.base)
            return compare.decide(
                dataclasses.replace(measurement, runs=tuple(pairs.change)),
                dataclasses.replace(measurement, runs=tuple(pairs.base)),
                chosen,
                generator_bound=bound,
                max_error_rate=config.max_error_rate,
                require_power=config.require_power,
                instances=pairs.instances,
                look=max(1, pairs.looks),
            )

        def settled(pairs: Pairs) -> bool:
            checks = verdict(pairs).checks
            return not any(compare.unsettled(c["outcome"], c["metric"]) for c in checks)

        schedule = Schedule(plan.repeat, config.against_budget, config.restart_every)
        measurement = dataclasses.replace(measurement, against=described)
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
        judged = dataclasses.replace(
            measurement,
            runs=tuple(pairs.change),
            base_runs=tuple(pairs.base),
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
            verdict=verdict(pairs),
            profile=pairs.profile,
        )
        self.measurements.append(judged)
        return judged

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
        assert self._against is not None
        ref = self._against().tree.ref
        runs = run_repetitions(
            target.change,
            kind,
            plan,
            monitor_factory=self._monitor_factory,
            progress=self._progress,
            label=Label(self.nodeid, measurement.name),
            restart_every=self.config.restart_every,
        )
        verdict = compare.decide(
            dataclasses.replace(measurement, runs=tuple(runs)),
            None,
            tuple(checks or self.config.compare_fail or DEFAULT_CHECKS),
            generator_bound=_mostly_bound(runs),
            max_error_rate=self.config.max_error_rate,
            require_power=self.config.require_power,
        )
        note = f"{target.name} does not exist at {ref}: measured alone, nothing to compare with"
        judged = dataclasses.replace(
            measurement,
            runs=tuple(runs),
            against=described,
            verdict=dataclasses.replace(
                verdict,
                reasons=tuple(r for r in verdict.reasons if r != compare.NO_BASELINE),
                notes=(*verdict.notes, note),
            ),
        )
        self.measurements.append(judged)
        return judged

    def _plan(
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


def _mostly_bound(runs: Sequence[RunResult]) -> bool:
    """Whether most repetitions were generator-bound."""
    return sum(r.generator_bound for r in runs) * 2 > len(runs)
