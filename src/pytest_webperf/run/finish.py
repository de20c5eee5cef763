"""The end of a run (``WebperfSession.finish``, in the controller): baselines saved
(not the measurements that failed their absolute checks, unless asked), then every
report written with the stored history behind each trend; a path that cannot be written
is one problem line naming it, and the other files are still written."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pytest_webperf import __version__
from pytest_webperf.errors import BaselineError, WebperfError
from pytest_webperf.gate import baseline, metrics
from pytest_webperf.models.machine import MachineInfo
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.report import history
from pytest_webperf.report.json_report import history_entry, report, write_json
from pytest_webperf.report.markdown import write_markdown
from pytest_webperf.settings.config import RunConfig
from pytest_webperf.targets import gitref


class WebperfSession(Protocol):
    """What the end of a run reads and adds to of ``session.WebperfSession``."""

    config: RunConfig
    rootdir: Path
    measurements: list[Measurement]
    finished: list[str]  # what was done, for the terminal summary
    problems: list[str]  # what could not be done: the run fails

    @property
    def extensions(self) -> Any: ...

    def store_for(self, measurement: Measurement) -> baseline.BaselineStore: ...

    def machine_for(self, generator: str | None) -> MachineInfo: ...

    def meta(self) -> dict[str, Any]: ...


def failed_absolute(measurement: Measurement) -> bool:
    """Whether its verdict failed the checks that hold baseline or not: broken, or an
    error rate over --webperf-max-error-rate (not a baseline to compare against)."""
    verdict = measurement.verdict
    if verdict is None:
        return False
    return verdict.status == "broken" or any(
        c.get("metric") == "error_rate" and c.get("outcome") == "fail" for c in verdict.checks
    )


def histories(session: WebperfSession) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The store's last saves of each measurement judged against a baseline (an A/B
    run's have none), oldest first, for the report's trend. Read before this run
    saves, so this run is never among them; an unreadable file gives none (the
    verdict already says why)."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in session.measurements:
        if m.against is not None or (m.nodeid, m.name) in found:
            continue
        try:
            saved = session.store_for(m).history(m.nodeid, m.name)
        except BaselineError:
            saved = []
        found[(m.nodeid, m.name)] = [
            history_entry(s) for s in saved[-baseline.HISTORY_LIMIT :] if isinstance(s, dict)
        ]
    return found


def report_data(
    session: WebperfSession, histories: Mapping[tuple[str, str], list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The report's data: every measurement with its baseline's history, the meta."""
    data = report(session.measurements, session.meta())
    for entry in data["tests"]:
        saves = (histories or {}).get((entry["nodeid"], entry["name"]))
        if saves is not None:
            entry["history"] = saves
    return data


def _write_html(path: Path, data: Mapping[str, Any]) -> None:
    """The HTML page (imported here: jinja2 for the runs that ask for it)."""
    from pytest_webperf.report.html.page import write_html

    write_html(path, data)


def finish_run(session: WebperfSession) -> None:
    """Save, then write every report; a path that cannot be written is one problem
    line (naming it), and the other files are still written."""
    config = session.config
    writers = (
        (config.json, functools.partial(_write_json, session), "JSON report"),
        (config.html, _write_html, "HTML report"),
        (config.markdown, write_markdown, "Markdown summary"),
    )
    wanted = [(path, write, what) for path, write, what in writers if path is not None]
    saves = histories(session) if wanted else {}  # before this run's save joins them
    if config.history is not None and session.measurements:
        _attempt(
            session,
            f"appending the verdicts to {config.history}",
            functools.partial(append_history, session, config.history),
        )
    if session.config.save and session.measurements:
        _attempt(session, "saving baselines", functools.partial(save_baselines, session))
    if wanted:
        data = report_data(session, saves)
        for path, write, what in wanted:
            if _attempt(
                session, f"writing the {what} to {path}", functools.partial(write, path, data)
            ):
                session.finished.append(f"webperf: {what} written to {path}")


def _attempt(session: WebperfSession, what: str, action: Callable[[], object]) -> bool:
    try:
        action()
    except (WebperfError, OSError) as exc:
        detail = str(exc) if isinstance(exc, WebperfError) else f"{exc.strerror}: {exc.filename}"
        session.problems.append(f"webperf: error {what}: {detail}")
        return False
    return True


def _write_json(session: WebperfSession, path: Path, data: Mapping[str, Any]) -> None:
    extended = copy.deepcopy(dict(data))  # the hook's keys stay out of the other reports
    session.extensions.update_json(extended)
    write_json(path, extended)


def append_history(session: WebperfSession, path: Path) -> None:
    """Every verdict of the run, a JSON line each, appended to ``path`` (never rewritten)."""
    written = history.append(
        path,
        session.measurements,
        lambda m: session.store_for(m).machine_id,
        gitref.git_commit(session.rootdir),
    )
    session.finished.append(f"webperf: {written} verdict(s) appended to {path}")


def save_baselines(session: WebperfSession) -> None:
    saved = session.measurements
    failed = [m for m in saved if failed_absolute(m)]
    if failed and not session.config.save_failed:
        saved = [m for m in saved if not failed_absolute(m)]
        session.problems.append(
            f"webperf: not saved as baselines: {len(failed)} measurement(s) that failed "
            "their absolute checks (broken, or an error rate over the limit): "
            + ", ".join(f"{m.nodeid} [{m.name}]" for m in failed[:3])
            + ("" if len(failed) <= 3 else ", ...")
            + "; fix the server, or pass --webperf-save-failed to save them anyway"
        )
    if not saved:
        return
    git = gitref.git_commit(session.rootdir)
    by_store: dict[str, list[Measurement]] = {}
    for m in saved:
        by_store.setdefault(session.store_for(m).machine_id, []).append(m)
    for group in by_store.values():
        store = session.store_for(group[0])
        metadata = {
            "machine": session.machine_for(group[0].generator).to_dict(),
            "git": git,
            "plugin_version": __version__,
        }
        paths = store.save(group, metadata)
        where = store.base_dir / store.machine_id
        session.finished.append(
            f"webperf: saved {len(group)} baseline(s) in {len(paths)} file(s) under {where}"
        )
    busy = [  # a counted baseline counts instructions: other processes do not move them
        m
        for m in saved
        if metrics.foreign_cpu(m) > metrics.CONTENDED_CPU_PERCENT
        and not any(r.counts is not None for r in m.runs)
    ]
    if busy:
        worst = max(metrics.foreign_cpu(m) for m in busy)
        session.finished.append(
            f"webperf: warning: {len(busy)} of these baselines were measured while other "
            f"processes used up to {worst:.0f}% of a core; a baseline taken on a busy "
            "machine shifts every later comparison: re-save it on a quiet one"
        )


def undecided_exit(measurements: Sequence[Measurement], code: int) -> int | None:
    """The exit status of a run in which no test failed: ``code``
    (``--webperf-undecided-exit``) when a verdict was undecided, else None (unchanged)."""
    if code == 0:
        return None
    if any(m.verdict is not None and m.verdict.status == "undecided" for m in measurements):
        return code
    return None
