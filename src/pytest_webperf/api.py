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
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

from pytest_webperf import arguments, compare, placement
from pytest_webperf.ab import Against, Pairs, Schedule, Unchanged, run_pairs
from pytest_webperf.catalog import Catalog
from pytest_webperf.checks import Check
from pytest_webperf.config import RunConfig
from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.gitref import map_command
from pytest_webperf.measure import (
    HttpRequests,
    Label,
    LoadKind,
    LocustUsers,
    MonitorFactory,
    RunPlan,
    TargetDied,
    run_repetitions,
    sampling_monitor,
)
from pytest_webperf.models import Measurement, Verdict
from pytest_webperf.mqtt_telemetry import MqttTelemetry
from pytest_webperf.placement import cpu_limit
from pytest_webperf.progress import NoProgress, Progress
from pytest_webperf.scaleout import remote_of
from pytest_webperf.swarm import userspec
from pytest_webperf.swarm.hotloop import resolve_user, user_for_url
from pytest_webperf.swarm.mqttloop import resolve_mqtt_user
from pytest_webperf.swarm.userspec import is_custom
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.container import ContainerTarget, Limits
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.values import parse_concurrency, parse_duration
from pytest_webperf.workload import (
    MIN_COUNTED_S,
    Request,
    Workload,
    http_name,
    http_workload,
    request,
)

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
        tls: bool = False,
    ) -> Target:
        """Start a local command as the target (no containers): it gets a free loopback
        port in ``port_env`` and must answer ``health``; killed with its process group.

        With --webperf-against=REF the base runs the same command in the repository's
        tree at REF: its working directory (``cwd``, default the current one) and every
        absolute path inside the repository, in the command and in ``env``, point into
        that tree. Write paths relative to ``cwd``, or absolute inside the repository.

        ``tls=True``: the server speaks HTTPS on that port (its own certificate, not
        verified unless ``webperf.http(..., tls_ca=PATH)``); ``target.url`` is https://."""
        arguments.check("process", locals())
        if not isinstance(tls, bool):
            raise OptionError(f"webperf.process(tls=...): True or False, not {tls!r}")

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
                tls=tls,
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

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        weight: float = 1,
        name: str | None = None,
        expect_status: int | set[int] | frozenset[int] | range | None = None,
        expect_body: str | bytes | re.Pattern[str] | re.Pattern[bytes] | None = None,
    ) -> Request:
        """One entry of ``http(target, mix=[...])``: a request shape, its ``weight``
        (share of the mix), its ``name`` (default: the path) and its response checks."""
        return request(
            path,
            method=method,
            body=body,
            headers=headers,
            weight=weight,
            name=name,
            expect_status=expect_status,
            expect_body=expect_body,
        )

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
        or ``requests=N`` then stop, as ``ab -n`` (see ``workload.http_workload``).
        ``mix=[self.request(...), ...]`` sends several request shapes by weight;
        ``expect_status=``/``expect_body=`` are what a response must be to count.

        An https:// target's certificate is not verified unless ``tls_ca`` names a CA
        file (PEM) to verify it (and its host name) against; a refused certificate
        counts as errors of kind ``tls``. ``keepalive=False``: a new connection per request
        (every request says ``Connection: close``), over TLS a full handshake each time
        unless ``tls_resume=True`` resumes the last session (its ticket)."""
        arguments.check("http", locals())
        user_class = user_for_url(resolve_user(user or self.config.user), target.url)
        ca_file = arguments.check_tls_ca(tls_ca, target.url, user_class)
        if mix is not None and not keepalive:  # each entry says Connection: close
            arguments.check_connection_reuse(keepalive, tls_resume, target.url, user_class, None)
            mix = [
                arguments.closing(entry) if isinstance(entry, Request) else entry for entry in mix
            ]
        else:
            headers = arguments.check_connection_reuse(
                keepalive, tls_resume, target.url, user_class, headers
            )
        plan = self._plan(
            target, concurrency=concurrency, duration=duration, warmup=warmup, repeat=repeat
        )
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
            mix=mix,
            expect_status=expect_status,
            expect_body=expect_body,
        )
        if workload.requests:
            plan = dataclasses.replace(plan, warmup_s=0.0)  # ab measures from the first request
        note = None
        if user_class == "native" and workload.regex:
            user_class = "lean"  # the native loop checks substrings only
            note = (
                "a regular-expression expect_body is checked by the lean user: it sends this load"
            )
        if is_custom(user_class):  # what ran is named, not a path it never sent
            given = [
                k
                for k, v in (
                    ("path", path),
                    ("method", method),
                    ("body", body),
                    ("headers", headers),
                )
                if v is not None
            ]
            if user is not None and given:  # a test's own contradiction (not the option's)
                raise OptionError(
                    f"{given[0]}= is not sent by user={user!r}: your user class sends its own "
                    "requests; drop it (or use webperf.locust(target, 'locustfile.py'))"
                )
            userspec.check_once(user_class, what="user=" if user else "--webperf-user")
            workload = dataclasses.replace(
                workload, path="", method="", body=b"", headers=(), users=user_class
            )
        kind = HttpRequests(
            workload, user_class=user_class, note=note, tls_ca=ca_file, tls_resume=tls_resume
        )
        return self._measure(target, kind, plan, name or http_name(workload, rate), workload)

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
        path = userspec.locustfile_path(locustfile)
        classes = userspec.class_names(user_class)
        if users is not None and (
            isinstance(users, bool) or not isinstance(users, int) or users < 1
        ):
            raise OptionError(f"users={users!r}: the number of Locust users, an int >= 1")
        change = userspec.file_spec(path, classes)
        checked = userspec.check(change)
        plan = self._plan(
            target, concurrency=users, duration=duration, warmup=warmup, repeat=repeat
        )
        base, base_spec = None, None
        if isinstance(target, PairedTarget) and target.base is not None:
            assert self._against is not None
            base = target.base
            base_spec = userspec.file_spec(self._against().tree.map(path) or path, classes)
            if base_spec != change:
                userspec.check(base_spec, what=f"the locustfile at {self._against().tree.ref}")
        workload = Workload(path="", method="", users=userspec.label(change, checked.classes))
        kind = LocustUsers(workload, change, base=base, base_user_class=base_spec)
        return self._measure(target, kind, plan, name or workload.users, workload)

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
            self._plan(target, concurrency=concurrency, duration=probe, warmup=0.5, repeat=1),
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
        arguments.check("mqtt", locals())
        config = self.config
        telemetry = MqttTelemetry(
            interval_s=parse_duration(interval),
            qos=qos,
            drain_s=parse_duration(drain),
            quiet_s=parse_duration(quiet),
            observe=observe,
            topic=topic,
            user_class=resolve_mqtt_user(config.user),
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


def _generator(kind: LoadKind) -> str:
    """What sends a kind of load: the resolved HTTP user, or the MQTT one (``mqtt``:
    paho clients, ``mqtt-native``: the native MQTT loop)."""
    if isinstance(kind, MqttTelemetry):
        return kind.user_class
    return str(getattr(kind, "user_class", "lean"))
