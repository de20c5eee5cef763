"""What a test gets from the ``webperf`` fixture: start servers, load them, get results.

    def test_hello(webperf):
        target = webperf.server("nginx")            # container up, healthy
        result = webperf.http(target, path="/hello")
        assert result.rps > 0

Plain Python: the fixture in plugin.py only builds this object and closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, Protocol

from pytest_webperf import placement
from pytest_webperf.catalog import Catalog
from pytest_webperf.checks import DEFAULT_MQTT_CHECKS
from pytest_webperf.config import RunConfig, parse_concurrency, parse_duration
from pytest_webperf.errors import OptionError
from pytest_webperf.measure import MonitorFactory, RunPlan, run_repetitions, sampling_monitor
from pytest_webperf.models import Measurement, Workload
from pytest_webperf.mqtt.run import MqttPlan, measure_mqtt
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.container import ContainerTarget, Limits
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.process import ProcessTarget


class Judge(Protocol):
    """Decides a measurement's verdict (``WebperfSession.judge``)."""

    def __call__(
        self,
        measurement: Measurement,
        *,
        checks: Sequence[Any] | None = None,
        generator_bound: bool = False,
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
    ) -> None:
        self.nodeid = nodeid
        self.concurrency = concurrency
        self.config = config
        self._catalog = catalog
        self._judge = judge
        self._monitor_factory = monitor_factory
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
        """Start catalogue server ``name`` (and what it depends on), healthy, for this test.

        With --webperf-target-url the already running server is used instead."""
        config = self.config
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
        target = ContainerTarget(self._catalog(), name, limits=limits, env=env)
        return self._stack.enter_context(target)

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
        port in ``port_env`` and must answer ``health``; killed with its process group."""
        target = ProcessTarget(
            command,
            name=name,
            port_env=port_env,
            health=health,
            startup_timeout=startup_timeout,
            env=env,
            cwd=cwd,
        )
        return self._stack.enter_context(target)

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
    ) -> Measurement:
        """Load ``target`` with a closed-loop HTTP swarm; all repetitions, judged."""
        workload = Workload(
            path=path,
            method=method.upper(),
            body=body.encode() if isinstance(body, str) else body,
            headers=tuple((headers or {}).items()),
        )
        plan = self._plan(
            target,
            concurrency=concurrency,
            duration=duration,
            warmup=warmup,
            repeat=repeat,
            user=user,
        )
        try:
            spec = SwarmSpec(
                host=target.url,
                users=plan.concurrency,
                duration_s=plan.duration_s,
                warmup_s=plan.warmup_s,
                workload=workload,
                user_class=plan.user_class,
                timeout_s=plan.timeout_s,
                workers=plan.workers,
                spawn_rate=plan.spawn_rate,
                cpus=self.placement.generator_cpus,
            )
        except ValueError as exc:
            raise OptionError(f"{self.nodeid}: {exc}") from None
        runs = run_repetitions(target, spec, plan, self._monitor_factory)
        measurement = Measurement(
            nodeid=self.nodeid,
            name=name or f"{method.upper()} {path}",
            server=target.name,
            concurrency=plan.concurrency,
            workload=workload,
            runs=tuple(runs),
            target=target.describe(),
        )
        bound = sum(r.generator_bound for r in runs) * 2 > len(runs)  # most repetitions
        judged = self._judge(measurement, checks=self.config.compare_fail, generator_bound=bound)
        self.measurements.append(judged)
        return judged

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
        plan = MqttPlan(
            users=users or self.concurrency,
            duration_s=parse_duration(duration) if duration is not None else config.duration,
            warmup_s=parse_duration(warmup) if warmup is not None else config.warmup,
            repeat=repeat or config.repeat,
            interval_s=parse_duration(interval),
            qos=qos,
            spawn_rate=config.spawn_rate if spawn_rate is None else spawn_rate,
            timeout_s=config.timeout,
            drain_s=parse_duration(drain),
            quiet_s=parse_duration(quiet),
            observe=observe,
            topic=topic,
        )
        measurement = measure_mqtt(
            target, plan, nodeid=self.nodeid, name=name, monitor_factory=self._monitor_factory
        )
        bound = sum(r.generator_bound for r in measurement.runs) * 2 > len(measurement.runs)
        judged = self._judge(
            measurement, checks=config.compare_fail or DEFAULT_MQTT_CHECKS, generator_bound=bound
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
        user: str | None,
    ) -> RunPlan:
        config = self.config
        limits = target.describe().get("limits") or {}
        return RunPlan(
            concurrency=parse_concurrency(concurrency)[0] if concurrency else self.concurrency,
            duration_s=parse_duration(duration) if duration is not None else config.duration,
            warmup_s=parse_duration(warmup) if warmup is not None else config.warmup,
            repeat=repeat or config.repeat,
            user_class=user or config.user,
            timeout_s=config.timeout,
            workers=config.workers,
            spawn_rate=config.spawn_rate,
            server_cores=limits.get("cpus") or _cpuset_size(limits.get("cpuset")),
        )


def _cpuset_size(cpuset: str | None) -> float | None:
    """How many CPUs a cpuset such as ``0-1,3`` names."""
    if not cpuset:
        return None
    count = 0
    for part in cpuset.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return float(count)
