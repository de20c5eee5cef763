"""The run's state: measurements, verdicts, baselines and reports."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pytest_webperf import (
    __version__,
    ab,
    baseline,
    compare,
    gitref,
    history,
    machine,
    metrics,
    placement,
)
from pytest_webperf.catalog import Catalog, default_directories
from pytest_webperf.checks import DEFAULT_CHECKS, Check, format_checks
from pytest_webperf.config import RunConfig
from pytest_webperf.distribution import Distribution
from pytest_webperf.errors import BaselineError, EngineUnavailable, WebperfError
from pytest_webperf.machine import MachineInfo
from pytest_webperf.models import Measurement
from pytest_webperf.report import terminal
from pytest_webperf.report.html import write_html
from pytest_webperf.report.json_report import history_entry, report, write_json
from pytest_webperf.report.markdown import write_markdown
from pytest_webperf.swarm.hotloop import resolve_user


def _unchanged(data: dict[str, Any]) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Extensions:
    """What users add through the hooks of hookspec.py (plugin.py passes pytest's
    hook callers; each changes the dict in place)."""

    update_machine_info: Callable[[dict[str, Any]], None] = _unchanged
    update_json: Callable[[dict[str, Any]], None] = _unchanged


def failed_absolute(measurement: Measurement) -> bool:
    """Whether its verdict failed the checks that hold baseline or not: broken, or an
    error rate over --webperf-max-error-rate (not a baseline to compare against)."""
    verdict = measurement.verdict
    if verdict is None:
        return False
    return verdict.status == "broken" or any(
        c.get("metric") == "error_rate" and c.get("outcome") == "fail" for c in verdict.checks
    )


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
        self._against: ab.Against | None = None
        self._machines: dict[str, MachineInfo] = {}  # by generator
        self._stores: dict[str, baseline.BaselineStore] = {}  # by machine id
        if config.against:  # a bad ref or no repository: a usage error before anything runs
            gitref.resolve_commit(gitref.toplevel(rootdir), config.against)

    def against(self) -> ab.Against:
        """The base of an A/B run, extracted from git the first time a test asks."""
        if self._against is None:
            assert self.config.against is not None
            self._against = self._stack.enter_context(
                ab.against(
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
        see it (``Measurement.generator``: the resolved HTTP user; ``mqtt``, which no
        HTTP user changes; None, not recorded: the run's user): the same user gives the
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
            from pytest_webperf.engine import engine_version as version

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

    def judge(
        self,
        measurement: Measurement,
        *,
        checks: Sequence[Check] | None = None,
        max_error_rate: float | None = None,
        require_power: bool = False,
    ) -> Measurement:
        """The measurement with its verdict: the one judge, whatever it is judged against.

        - An A/B run (``against`` with the base's runs): against side A, pair by pair
          (the process instances and the looks taken are in ``against``).
        - A target new since the base (``against``, no base runs): by the absolute limits
          alone, said in the notes.
        - Otherwise: against this machine's stored baseline. A broken baseline file
          raises ``BaselineError`` (it fails this test only), except under
          --webperf-save, which replaces it (the fix its message names).

        ``checks``: the test's (marker) or the run's; none given, ``compare.default_checks``."""
        chosen = tuple(checks or self.config.compare_fail or compare.default_checks(measurement))
        bound = compare.mostly_generator_bound(measurement.runs) or compare.mostly_generator_bound(
            measurement.base_runs
        )
        against = measurement.against
        if against is not None:
            current = dataclasses.replace(measurement, base_runs=())
            if not measurement.base_runs:  # nothing to compare with: absolute limits only
                verdict = compare.decide(
                    current,
                    None,
                    chosen,
                    generator_bound=bound,
                    max_error_rate=max_error_rate,
                    require_power=require_power,
                )
                note = (
                    f"{measurement.server} does not exist at {against.get('ref')}: measured "
                    "alone, nothing to compare with"
                )
                verdict = dataclasses.replace(
                    verdict,
                    reasons=tuple(r for r in verdict.reasons if r != compare.NO_BASELINE),
                    notes=(*verdict.notes, note),
                )
                return dataclasses.replace(measurement, verdict=verdict)
            base = dataclasses.replace(current, runs=measurement.base_runs)
            verdict = compare.decide(
                current,
                base,
                chosen,
                generator_bound=bound,
                instances=tuple(against.get("instances", ())),
                look=max(1, int(against.get("looks", 1))),
                max_error_rate=max_error_rate,
                require_power=require_power,
            )
            return dataclasses.replace(measurement, verdict=verdict)
        notes: list[str] = []
        try:
            stored = self.store_for(measurement).load(measurement.nodeid, measurement.name)
        except baseline.NewerSchemaError:
            raise  # never replaced: the store refuses to overwrite a newer format
        except BaselineError as exc:
            if not self.config.save:
                raise
            stored = None
            notes.append(f"the stored baseline is unreadable, this run replaces it: {exc}")
        if stored is None:
            notes += self._other_machines_note(measurement)
        verdict = compare.decide(
            measurement,
            stored,
            chosen,
            generator_bound=bound,
            saving=self.config.save,
            max_error_rate=max_error_rate,
            require_power=require_power,
        )
        verdict = dataclasses.replace(verdict, notes=(*verdict.notes, *notes))
        return dataclasses.replace(measurement, verdict=verdict)

    def _other_machines_note(self, measurement: Measurement) -> list[str]:
        store = self.store_for(measurement)
        others = store.other_machines(measurement.nodeid, measurement.name)
        if not others:
            return []
        return [
            f"baselines exist for other machines ({', '.join(others)}), not for "
            f"{store.machine_id}: performance differs across machines, so they are "
            "not compared (--webperf-machine-id=NAME names a fleet)"
        ]

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

    def summary(self) -> list[str]:
        others = sorted(
            {self.store_for(m).machine_id for m in self.measurements} - {self.store.machine_id}
        )
        also = f" (tests with another HTTP user: {', '.join(others)})" if others else ""
        return [
            *terminal.summary(report(self.measurements, self.meta())),
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

    def histories(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """The store's last saves of each measurement judged against a baseline (an A/B
        run's have none), oldest first, for the report's trend. Read before this run
        saves, so this run is never among them; an unreadable file gives none (the
        verdict already says why)."""
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for m in self.measurements:
            if m.against is not None or (m.nodeid, m.name) in found:
                continue
            try:
                saved = self.store_for(m).history(m.nodeid, m.name)
            except BaselineError:
                saved = []
            found[(m.nodeid, m.name)] = [
                history_entry(s) for s in saved[-baseline.HISTORY_LIMIT :] if isinstance(s, dict)
            ]
        return found

    def report_data(
        self, histories: Mapping[tuple[str, str], list[dict[str, Any]]] | None = None
    ) -> dict[str, Any]:
        """The report's data: every measurement with its baseline's history, the meta."""
        data = report(self.measurements, self.meta())
        for entry in data["tests"]:
            saves = (histories or {}).get((entry["nodeid"], entry["name"]))
            if saves is not None:
                entry["history"] = saves
        return data

    def finish(self) -> None:
        """Save baselines if asked and write the reports (once, at the end of the run;
        under pytest-xdist in the controller only: workers send their measurements)."""
        try:
            if self.distribution.worker is None:
                self._finish()
        finally:
            self._stack.close()

    def _finish(self) -> None:
        """Save, then write every report; a path that cannot be written is one problem
        line (naming it), and the other files are still written."""
        config = self.config
        writers = (
            (config.json, self._write_json, "JSON report"),
            (config.html, write_html, "HTML report"),
            (config.markdown, write_markdown, "Markdown summary"),
        )
        wanted = [(path, write, what) for path, write, what in writers if path is not None]
        histories = self.histories() if wanted else {}  # before this run's save joins them
        if self.config.history is not None and self.measurements:
            self._attempt(f"appending the verdicts to {config.history}", self._append_history)
        if self.config.save and self.measurements:
            self._attempt("saving baselines", self._save)
        if wanted:
            data = self.report_data(histories)
            for path, write, what in wanted:
                if self._attempt(
                    f"writing the {what} to {path}", functools.partial(write, path, data)
                ):
                    self.finished.append(f"webperf: {what} written to {path}")

    def _attempt(self, what: str, action: Callable[[], object]) -> bool:
        try:
            action()
        except (WebperfError, OSError) as exc:
            detail = (
                str(exc) if isinstance(exc, WebperfError) else f"{exc.strerror}: {exc.filename}"
            )
            self.problems.append(f"webperf: error {what}: {detail}")
            return False
        return True

    def _write_json(self, path: Path, data: Mapping[str, Any]) -> None:
        extended = copy.deepcopy(dict(data))  # the hook's keys stay out of the other reports
        self.extensions.update_json(extended)
        write_json(path, extended)

    def _append_history(self) -> None:
        assert self.config.history is not None
        machine_of = lambda m: self.store_for(m).machine_id  # noqa: E731
        written = history.append(
            self.config.history, self.measurements, machine_of, gitref.git_commit(self.rootdir)
        )
        self.finished.append(f"webperf: {written} verdict(s) appended to {self.config.history}")

    def _save(self) -> None:
        saved = self.measurements
        failed = [m for m in saved if failed_absolute(m)]
        if failed and not self.config.save_failed:
            saved = [m for m in saved if not failed_absolute(m)]
            self.problems.append(
                f"webperf: not saved as baselines: {len(failed)} measurement(s) that failed "
                "their absolute checks (broken, or an error rate over the limit): "
                + ", ".join(f"{m.nodeid} [{m.name}]" for m in failed[:3])
                + ("" if len(failed) <= 3 else ", ...")
                + "; fix the server, or pass --webperf-save-failed to save them anyway"
            )
        if not saved:
            return
        git = gitref.git_commit(self.rootdir)
        by_store: dict[str, list[Measurement]] = {}
        for m in saved:
            by_store.setdefault(self.store_for(m).machine_id, []).append(m)
        for group in by_store.values():
            store = self.store_for(group[0])
            metadata = {
                "machine": self.machine_for(group[0].generator).to_dict(),
                "git": git,
                "plugin_version": __version__,
            }
            paths = store.save(group, metadata)
            where = store.base_dir / store.machine_id
            self.finished.append(
                f"webperf: saved {len(group)} baseline(s) in {len(paths)} file(s) under {where}"
            )
        busy = [m for m in saved if metrics.foreign_cpu(m) > metrics.CONTENDED_CPU_PERCENT]
        if busy:
            worst = max(metrics.foreign_cpu(m) for m in busy)
            self.finished.append(
                f"webperf: warning: {len(busy)} of these baselines were measured while other "
                f"processes used up to {worst:.0f}% of a core; a baseline taken on a busy "
                "machine shifts every later comparison: re-save it on a quiet one"
            )
