"""The run's state: measurements, verdicts, baselines and reports."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pytest_webperf import __version__
from pytest_webperf.errors import BaselineError, EngineUnavailable
from pytest_webperf.gate import baseline, judge
from pytest_webperf.gate.grammar import DEFAULT_CHECKS, Check, format_checks
from pytest_webperf.gate.undecided import Evidence
from pytest_webperf.models import machine, placement
from pytest_webperf.models.machine import MachineInfo
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.report import terminal
from pytest_webperf.report.json_report import report
from pytest_webperf.run.finish import finish_run
from pytest_webperf.run.workers import Distribution
from pytest_webperf.settings.config import RunConfig
from pytest_webperf.swarm.hotloop import resolve_user
from pytest_webperf.targets import against as base
from pytest_webperf.targets import gitref
from pytest_webperf.targets.catalog import Catalog, default_directories


def _unchanged(data: dict[str, Any]) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Extensions:
    """What users add through the hooks of hookspec.py (plugin.py passes pytest's
    hook callers; each changes the dict in place)."""

    update_machine_info: Callable[[dict[str, Any]], None] = _unchanged
    update_json: Callable[[dict[str, Any]], None] = _unchanged


class WebperfSession:
    """Collects what every test measured; judges, saves and reports it."""

    def __init__(
        self, config: RunConfig, rootdir: Path, extensions: Extensions | None = None
    ) -> None:
        self.config = config
        self.rootdir = rootdir
        self.extensions = extensions or Extensions()
        self.distribution = Distribution()
        self.measurements: list[Measurement] = []
        self.finished: list[str] = []  # what finish() did, for the terminal summary
        self.problems: list[str] = []  # what finish() could not do: the run fails
        self._stack = ExitStack()  # what lives as long as the run (the A/B base tree)
        self._against: base.Against | None = None
        self._machines: dict[str, MachineInfo] = {}  # by generator
        self._stores: dict[str, baseline.BaselineStore] = {}  # by machine id
        if config.against:  # a bad ref or no repository: a usage error before anything runs
            gitref.resolve_commit(gitref.toplevel(rootdir), config.against)

    def against(self) -> base.Against:
        """The base of an A/B run, extracted from git the first time a test asks."""
        if self._against is None:
            assert self.config.against is not None
            self._against = self._stack.enter_context(
                base.against(
                    self.rootdir,
                    self.config.against,
                    self.catalog,
                    always=self.config.against_always,
                )
            )
        return self._against

    @functools.cached_property
    def catalog(self) -> Catalog:
        local = self.rootdir / "servers"
        extra = [local] if local.is_dir() else []
        dirs = default_directories([*extra, *self.config.servers])
        return Catalog(dict.fromkeys(p.resolve() for p in dirs))

    @functools.cached_property
    def machine(self) -> machine.MachineInfo:
        """This machine with the run's HTTP user (however it was given: option,
        environment or ini); a test's own user (marker, ``user=``) has ``machine_for``."""
        return self.machine_for(resolve_user(self.config.user))

    def machine_for(self, generator: str | None) -> MachineInfo:
        """This machine as the baselines of a measurement whose load ``generator`` sent
        see it (``Measurement.generator``: the resolved HTTP user; the MQTT user, ``mqtt``
        (paho) or ``mqtt-native``; None, not recorded: the run's user): the same user gives the
        same id whether it came from the command line, the environment, the ini file,
        a marker or ``webperf.http(user=...)``."""
        if generator is None:
            generator = resolve_user(self.config.user)
        if generator not in self._machines:
            self._machines[generator] = self._collect_machine(generator)
        return self._machines[generator]

    def store_for(self, measurement: Measurement) -> baseline.BaselineStore:
        """The store of the machine id ``measurement``'s baselines are kept under."""
        info = self.machine_for(measurement.generator)
        key = machine.machine_id(info, self.config.machine_id)
        if key == self.store.machine_id:
            return self.store
        if key not in self._stores:
            self._stores[key] = baseline.BaselineStore(self.store.base_dir, key)
        return self._stores[key]

    def _collect_machine(self, generator: str) -> MachineInfo:
        engine_version = None
        if not self.config.target_url:
            from pytest_webperf.targets.engine import engine_version as version

            try:
                engine_version = version()
            except EngineUnavailable:
                engine_version = None
        pinned = self.cpu_placement
        collected = machine.collect(
            engine_version=engine_version,
            cpu_quota=self.config.target_cpus,
            network_mode="external" if self.config.target_url else "host",
            placement=None
            if pinned.target_cpuset is None and not pinned.generator_cpus
            else f"{pinned.target_cpuset or 'all'}/{placement.cpu_list(pinned.generator_cpus)}",
        )
        if generator not in ("mqtt", "lean"):  # ids made before the native loop were lean's
            collected = dataclasses.replace(collected, generator=generator)
        data = collected.to_dict()
        self.extensions.update_machine_info(data)
        return machine.MachineInfo.from_hook(data, "pytest_webperf_update_machine_info")

    @functools.cached_property
    def cpu_placement(self) -> placement.Placement:
        config = self.config
        return placement.plan(
            config.placement,
            target_cpuset=config.target_cpuset,
            generator_cpus=config.generator_cpus,
        )

    @functools.cached_property
    def store(self) -> baseline.BaselineStore:
        directory = self.config.baseline_dir
        if not directory.is_absolute():
            directory = self.rootdir / directory
        return baseline.BaselineStore(
            directory, machine.machine_id(self.machine, self.config.machine_id)
        )

    @property
    def checks(self) -> Sequence[Check]:
        return self.config.compare_fail or DEFAULT_CHECKS

    def verdict(
        self,
        measurement: Measurement,
        *,
        checks: Sequence[Check] | None = None,
        max_error_rate: float | None = None,
        require_power: bool = False,
        evidence: Evidence | None = None,
        counted: Measurement | None = None,
    ) -> Measurement:
        """The measurement with its verdict (``judge.judge``, the one judge): against the
        base in an A/B run, else against this machine's stored baseline."""
        return judge.judge(
            measurement,
            store_for=self.store_for,
            run_checks=self.config.compare_fail,
            saving=self.config.save,
            checks=checks,
            max_error_rate=max_error_rate,
            require_power=require_power,
            evidence=evidence,
            counted=counted,
        )

    def stored(self, measurement: Measurement) -> Measurement | None:
        """The stored baseline ``measurement`` will be judged against, read before it is
        measured (its profile's rates are replayed); None when there is none or it
        cannot be read (the judge then says why)."""
        try:
            return self.store_for(measurement).load(measurement.nodeid, measurement.name)
        except BaselineError:
            return None

    def record(self, measurements: Sequence[Measurement]) -> None:
        self.measurements.extend(measurements)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Held by a test from its first server to its last: under pytest-xdist, no
        two workers measure at once (alone, a process runs its tests one by one)."""
        lock = self.distribution.lock
        if lock is None:
            yield
            return
        with lock:
            yield

    def worker_output(self) -> dict[str, Any]:
        """What a worker sends the controller at its end (xdist's ``workeroutput``)."""
        lock = self.distribution.lock
        return {
            "measurements": [m.to_dict() for m in self.measurements],
            "waited_s": 0.0 if lock is None else lock.waited_s,
        }

    def receive(self, worker: str, output: Mapping[str, Any]) -> None:
        """The controller takes in what a worker measured (``worker_output``)."""
        measurements = [Measurement.from_dict(m) for m in output.get("measurements", ())]
        self.record(measurements)
        place = {nodeid: i for i, nodeid in enumerate(self.distribution.collected)}
        self.measurements.sort(key=lambda m: place.get(m.nodeid, len(place)))  # stable
        self.distribution.received(
            worker, [m.nodeid for m in measurements], float(output.get("waited_s", 0.0))
        )

    def summary(self, verbose: bool = False) -> list[str]:
        """The terminal's summary (``verbose``: with -v, ``terminal.summary``'s details)."""
        others = sorted(
            {self.store_for(m).machine_id for m in self.measurements} - {self.store.machine_id}
        )
        also = f" (tests with another HTTP user: {', '.join(others)})" if others else ""
        return [
            *terminal.summary(report(self.measurements, self.meta()), verbose),
            *self.distribution.summary(),
            f"webperf: {self.cpu_placement.describe()}; machine {self.store.machine_id}{also}",
        ]

    def meta(self) -> dict[str, Any]:
        config = self.config
        return {
            "plugin_version": __version__,
            "python": sys.version.split()[0],
            "machine_id": self.store.machine_id,
            "machine": self.machine.to_dict(),
            "checks": format_checks(self.checks),
            "config": {
                "concurrency": list(config.concurrency),
                "duration_s": config.duration,
                "warmup_s": config.warmup,
                "repeat": config.repeat,
                "workers": config.workers,
                "remote_workers": config.remote_workers,
                "user": config.user,
                "timeout_s": config.timeout,
                "spawn_rate": config.spawn_rate,
            },
            "placement": self.cpu_placement.to_dict(),
            **({"against": self._against.describe()} if self._against is not None else {}),
        }

    def finish(self) -> None:
        """Save baselines if asked and write the reports (once, at the end of the run;
        under pytest-xdist in the controller only: workers send their measurements)."""
        try:
            if self.distribution.worker is None:
                finish_run(self)
        finally:
            self._stack.close()
