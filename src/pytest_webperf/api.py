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

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack

from pytest_webperf import arguments, capacity_probe, load_shapes, placement
from pytest_webperf.ab import Against
from pytest_webperf.capacity import Capacity
from pytest_webperf.catalog import Catalog
from pytest_webperf.config import RunConfig
from pytest_webperf.errors import OptionError
from pytest_webperf.httpworkload import request
from pytest_webperf.loads import http_load, locust_load, mqtt_load
from pytest_webperf.measurer import Judge, Measurer
from pytest_webperf.models import Measurement
from pytest_webperf.processes import ProcessSpec, launch_of, start_process
from pytest_webperf.progress import Progress
from pytest_webperf.runplan import MonitorFactory, sampling_monitor
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.build import parse_build
from pytest_webperf.targets.container import ContainerTarget, Limits
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.targets.sides import Launch
from pytest_webperf.workload import Request


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
        self._against = against  # the base of an A/B run (--webperf-against), made on demand
        self._stack = ExitStack()
        self.capacities: list[Capacity] = []  # webperf.capacity's searches, in order
        self.placement = placement.plan(
            config.placement,
            target_cpuset=config.target_cpuset,
            generator_cpus=config.generator_cpus,
        )
        self._measurer = Measurer(
            nodeid=nodeid,
            concurrency=concurrency,
            config=config,
            judge=judge,
            placement=self.placement,
            monitor_factory=monitor_factory,
            against=against,
            progress=progress,
        )
        self.measurements = self._measurer.measurements

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
        arguments.check("server", locals())
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

        def start_base() -> Target:
            base = ContainerTarget(against.base_catalog, name, limits=limits, env=env, bind=bind)
            return self._stack.enter_context(base)

        # a server new since the base has nothing to compare with
        return against.pair(
            started,
            changed=changed,
            start_base=start_base if against.has_server(name) else None,
            compared=against.server_compared(name),
        )

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
        tls: bool = False,
        build: str | Sequence[str] | None = None,
        watch: Sequence[str | os.PathLike[str]] | None = None,
    ) -> Target:
        """Start a local command as the target (no containers): it gets a free loopback
        port in ``port_env`` and must answer ``health``; killed with its process group.
        ``build`` (a list of strings, or a shell string) runs first, in ``cwd``: its
        output starts the target's log, and it is cached by the tree's content.

        With --webperf-against=REF the base runs the same command in the repository's
        tree at REF (built there first with ``build``): its working directory (``cwd``,
        default the current one) and every path inside the repository, in the command
        and in ``env``, point into that tree. The target is measured unless nothing
        ``watch`` names differs from REF: by default the whole repository; paths
        relative to ``cwd`` or absolute, ``!path`` left out (``processes.py``).

        ``tls=True``: the server speaks HTTPS on that port (its own certificate, not
        verified unless ``webperf.http(..., tls_ca=PATH)``); ``target.url`` is https://."""
        arguments.check("process", locals())
        if not isinstance(tls, bool):
            raise OptionError(f"webperf.process(tls=...): True or False, not {tls!r}")
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        spec = ProcessSpec(launch_of(argv, cwd, env), parse_build(build), watch)

        def start(launch: Launch, prelude: str) -> Target:
            target = ProcessTarget(
                list(launch.argv),
                name=name or os.path.basename(argv[0]),
                port_env=port_env,
                health=health,
                startup_timeout=startup_timeout,
                env=launch.env,
                cwd=str(launch.cwd),
                bind=self.config.target_bind,
                tls=tls,
                prelude=prelude,
            )
            return self._stack.enter_context(target)

        return start_process(spec, start, self._against)

    # one entry of ``http(target, mix=[...])``: a request shape, its weight, name and checks
    request = staticmethod(request)

    def http(
        self,
        target: Target,
        path: str | None = None,
        *,
        method: str | None = None,
        body: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        mix: Sequence[Request] | None = None,
        expect_status: int | set[int] | frozenset[int] | range | None = None,
        expect_body: str | bytes | re.Pattern[str] | re.Pattern[bytes] | None = None,
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
        tls_ca: str | os.PathLike[str] | None = None,
        keepalive: bool = True,
        tls_resume: bool = False,
    ) -> Measurement:
        """Load ``target`` with an HTTP swarm; all repetitions, judged: a closed loop, paced
        (``interval=`` per user, ``rate=`` over all, ``arrival_rate=`` sent by idle users),
        or ``requests=N`` then stop, as ``ab -n`` (see ``httpworkload.http_workload``).
        ``mix=[self.request(...), ...]`` sends several request shapes by weight;
        ``expect_status=``/``expect_body=`` are what a response must be to count.

        An https:// target's certificate is not verified unless ``tls_ca`` names a CA
        file (PEM) to verify it (and its host name) against; a refused certificate
        counts as errors of kind ``tls``. ``keepalive=False``: a new connection per request
        (every request says ``Connection: close``), over TLS a full handshake each time
        unless ``tls_resume=True`` resumes the last session (its ticket)."""
        arguments.check("http", args := locals())
        kind, plan, named = http_load(self._measurer, target, args)
        return self._measurer.measure(target, kind, plan, named, kind.workload)

    def capacity(
        self,
        target: Target,
        path: str | None = None,
        *,
        mix: Sequence[Request] | None = None,
        slo: str = capacity_probe.DEFAULT_SLO,
        start: float = 50.0,
        limit: float = 20000.0,
        tolerance: float = 0.05,
        duration: str | float = "3s",
        warmup: str | float = "1s",
        user: str | None = None,
        name: str | None = None,
    ) -> Capacity:
        """The highest arrival rate ``target`` sustains within ``slo`` (limits in the check
        grammar, ``p99<100ms,error_rate<1%``): rates from ``start`` doubling until the SLO
        breaks, then bisected to ``tolerance``, each probe ``duration`` long after
        ``warmup``, repeated until decided (``capacity_probe.py``)."""
        arguments.check("capacity", locals())
        found = load_shapes.capacity(
            self._measurer,
            target,
            path,
            mix=mix,
            slo=slo,
            start=start,
            limit=limit,
            tolerance=tolerance,
            duration=duration,
            warmup=warmup,
            user=user,
            name=name,
        )
        self.capacities.append(found)
        return found

    def staged(
        self,
        target: Target,
        path: str | None = None,
        *,
        stages: Sequence[tuple[str | float, float]],
        arrival_rate: bool = False,
        mix: Sequence[Request] | None = None,
        concurrency: int | None = None,
        warmup: str | float | None = None,
        repeat: int | None = None,
        user: str | None = None,
        name: str | None = None,
    ) -> tuple[Measurement, ...]:
        """One target instance loaded at each of ``stages`` in turn, ``(duration, level)``
        each: users in a closed loop, or with ``arrival_rate=True`` requests per second
        (``concurrency`` the cap); a judged measurement per stage (``stages.py``)."""
        return load_shapes.staged(
            self._measurer,
            target,
            path,
            stages=stages,
            arrival_rate=arrival_rate,
            mix=mix,
            concurrency=concurrency,
            warmup=warmup,
            repeat=repeat,
            user=user,
            name=name,
        )

    def locust(
        self,
        target: Target,
        locustfile: str | os.PathLike[str],
        *,
        users: int | None = None,
        user_class: str | Sequence[str] | None = None,
        duration: str | float | None = None,
        warmup: str | float | None = None,
        repeat: int | None = None,
        name: str | None = None,
    ) -> Measurement:
        """Run the locustfile's Locust users (all its User classes, or ``user_class=``:
        one name or several) against ``target``, all repetitions, judged: their host is
        the target's URL, each request name an endpoint, ``wait_time`` as written
        (``constant_pacing``/``constant_throughput`` timed from each task's intended
        start), a task's exception a failed request. With --webperf-against the base
        runs the same path in the base's tree (this one if it is not there)."""
        args = locals()
        kind, plan, workload = locust_load(self._measurer, target, args, self._against)
        return self._measurer.measure(target, kind, plan, name or workload.users, workload)

    @property
    def requests_lasting(self) -> Callable[..., int]:
        """``requests_lasting(target, seconds=5.0, path="/hello", *, method="GET",
        concurrency=None, probe=2.0)``: the request count (``requests=N``) that lasts at
        least ``seconds`` against ``target`` on this machine, timed by a short probe
        (``Measurer.requests_lasting``)."""
        return self._measurer.requests_lasting

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
        protocol: int = 4,
        name: str | None = None,
    ) -> Measurement:
        """Seed 002's load: ``users`` MQTT clients publishing telemetry at ``qos`` through
        the target's broker, one message per client every ``interval`` (0: flat out),
        every message accounted for (published, acknowledged, delivered to an observer
        and stored by the server; lost, duplicated, late). The publishers speak MQTT
        3.1.1 (``protocol=4``) or 5.0 (``protocol=5``). Judged with the MQTT checks
        (``lost:0``, ``dup:0``, ``tps:5%``, ...) unless the test gives its own."""
        arguments.check("mqtt", args := locals())
        telemetry, plan = mqtt_load(self._measurer, target, args)
        workload = telemetry.workload
        return self._measurer.measure(target, telemetry, plan, name or telemetry.name, workload)
