"""The trend over a baseline's saves: its place in the report, its charts, its table."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from test_report_ab import a_check, ab_entry, ab_report
from test_report_html import assert_finite, check, measurement
from test_session import run_config

from pytest_webperf.gate import baseline, metrics
from pytest_webperf.gate.baseline import HISTORY_LIMIT, BaselineStore, summary
from pytest_webperf.models.measurement import Verdict
from pytest_webperf.report.html.page import render_html
from pytest_webperf.report.html.tables import saves_table
from pytest_webperf.report.html.trend import COUNT_METRICS, _trend_axis, trend_figures
from pytest_webperf.report.json_report import history_entry
from pytest_webperf.run.session import WebperfSession

SHA = "abcdef0123" * 4


def a_save(i: int, rps: float = 1000.0, **changes: Any) -> dict[str, Any]:
    """One save as the report holds it (``json_report.history_entry``)."""
    return {
        "saved_at": f"2026-11-{i + 1:02d}T10:00:00+00:00",
        "git": {"commit": f"{i:02d}{SHA[2:]}", "dirty": i == 1},
        "image": None,
        "plugin_version": "0.1",
        "summary": {"rps": [rps + i, rps - i, None], "cpu_per_req": [150.0, 152.0, 151.0]},
        **changes,
    }


def baseline_entry(history: Any, checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "nodeid": "s.py::t",
        "name": "GET /x",
        "target": {"kind": "process", "git": {"commit": SHA, "dirty": True}},
        "verdict": {"status": "pass", "checks": checks if checks is not None else default()},
        "history": history,
    }


def default() -> list[dict[str, Any]]:
    return [
        a_check(),
        a_check(check="cpu_per_req:5%", metric="cpu_per_req", current=160.0, baseline=151.0),
        a_check(check="errors:5%", metric="errors"),  # a count: compared as rates, no trend
        a_check(check="p99<100", metric="p99", threshold=None, baseline=None),  # a limit
        a_check(check="rps:10%", metric="rps"),  # one chart per metric
    ]


def test_each_relative_checks_metric_gets_a_trend_with_this_run_last() -> None:
    entry = baseline_entry([a_save(i) for i in range(3)])
    figures = trend_figures(entry)
    assert [f.title for f in figures] == [
        "rps: baseline saves and this run",
        "cpu_per_req: baseline saves and this run",
    ]
    rps = str(figures[0].svg)
    tips = re.findall(r"<circle[^>]*><title>([^<]*)</title>", rps)
    assert tips == [
        "save 1, 2026-11-01 10:00, 00cdef0123: 1,000",  # the mean of the measured reps
        "save 2, 2026-11-02 10:00, 01cdef0123+dirty: 1,000",
        "save 3, 2026-11-03 10:00, 02cdef0123: 1,000",
        "this run, commit abcdef0123+dirty: 1,180",
    ]
    assert 'fill="#D55E00"' in rps  # this run stands apart from the saves
    assert "threshold -5% from the baseline" in rps
    assert [label for label, _, _ in figures[0].legend][-1] == "rps:5% threshold"


def test_the_page_shows_the_trend_and_its_saves() -> None:
    page = render_html({"tests": [baseline_entry([a_save(i) for i in range(20)])]})
    check(page)
    assert_finite(page)
    assert "Trend over the baseline's saves" in page
    assert page.count("baseline saves and this run") >= 2
    assert "commit abcdef0123+dirty" in page  # the code measured, in the header facts
    table = saves_table(baseline_entry([a_save(i) for i in range(2)]))
    assert table is not None
    assert [h for h, _ in table.headers] == ["saved", "code", "rps", "cpu_per_req"]
    assert [[t for t, _ in r.cells] for r in table.rows][1] == [
        "2026-11-02 10:00",
        "01cdef0123+dirty",
        "1,000",
        "151",
    ]


def test_no_trend_without_saves_for_ab_entries_or_broken_history() -> None:
    for history in ([], None, "nonsense", [1, "x"]):
        assert trend_figures(baseline_entry(history)) == []
    assert trend_figures({**ab_entry(), "history": [a_save(0)]}) == []
    page = render_html(ab_report(ab_entry()))
    assert "baseline saves and this run" not in page
    odd = [a_save(0, summary={"rps": "x"}), a_save(1, summary=None), {"git": 3}]
    page = render_html({"tests": [baseline_entry(odd)]})
    check(page)
    assert "baseline saves and this run" in page  # drawn with gaps, never a crash


def test_twenty_saves_label_the_axis_sparsely_and_end_with_now() -> None:
    axis = _trend_axis(HISTORY_LIMIT)
    assert len(axis.ticks) == HISTORY_LIMIT + 1
    assert axis.labels[-1] == "now"
    assert 5 <= len([label for label in axis.labels if label]) <= 11
    assert _trend_axis(1).labels == ("1", "now")


def test_the_count_metrics_are_the_gates() -> None:
    assert {m.name for m in metrics.METRICS.values() if m.count} == COUNT_METRICS


def test_a_save_from_the_store_becomes_a_history_entry() -> None:
    stored = {
        "saved_at": "2026-11-01T10:00:00+00:00",
        "metadata": {
            "saved_at": "2026-11-01T10:00:00+00:00",
            "machine": {"cpu_model": "big"},
            "git": {"commit": SHA, "dirty": False},
            "plugin_version": "0.1",
        },
        "summary": {"rps": [1.0, 2.0], "p95": [None, 3.0]},
    }
    assert history_entry(stored) == {
        "saved_at": "2026-11-01T10:00:00+00:00",
        "git": {"commit": SHA, "dirty": False},
        "image": None,
        "plugin_version": "0.1",
        "summary": {"rps": [1.0, 2.0], "p95": [None, 3.0]},
    }
    assert history_entry({})["git"] is None and history_entry({})["summary"] == {}


def test_a_save_names_the_code_its_measurement_ran() -> None:
    """A container's image(s), or a process target's own commit, beat the run's commit."""
    container = {
        "kind": "container",
        "parts": {"app": {"image": "webperf/app:2", "port": 1}, "db": {"image": "webperf/db:1"}},
    }
    process = {"kind": "process", "git": {"commit": "f" * 40, "dirty": True}}
    assert baseline.code_of(container) == {"image": "webperf/app:2, webperf/db:1"}
    assert baseline.code_of(process) == {"git": {"commit": "f" * 40, "dirty": True}}
    assert baseline.code_of({"kind": "external", "url": "http://x"}) == {}
    run_git = {"commit": SHA, "dirty": False}
    saved = {"metadata": {"git": run_git}, "code": baseline.code_of(process)}
    assert history_entry(saved)["git"] == {"commit": "f" * 40, "dirty": True}
    saved = {"metadata": {"git": run_git}, "code": baseline.code_of(container)}
    assert history_entry(saved)["image"] == "webperf/app:2, webperf/db:1"
    assert history_entry(saved)["git"] == run_git


def test_the_report_carries_the_saves_before_this_run_saves(tmp_path: Path) -> None:
    """Under --webperf-save this run joins the store, never its own trend."""
    config = run_config(json=tmp_path / "out.json", save=True)
    session = WebperfSession(config, tmp_path)
    judged = measurement("s.py::t", verdict=Verdict("pass"))
    store: BaselineStore = session.store
    for commit in ("a" * 40, "b" * 40):
        store.save([judged], {"git": {"commit": commit, "dirty": False}})
    ab = dataclasses.replace(measurement("s.py::ab"), against={"ref": "main"})
    session.record([judged, ab])
    session.finish()
    written = json.loads((tmp_path / "out.json").read_text())
    first, second = written["tests"]
    assert [s["git"]["commit"][0] for s in first["history"]] == ["a", "b"]
    assert first["history"][0]["summary"] == json.loads(json.dumps(summary(judged)))
    assert "history" not in second  # an A/B run's base is not a save
    assert len(store.history("s.py::t", "GET /x")) == 3
