"""The capacity charts: a search's curve in the HTML report (p50/p99 against the
offered rate, the SLO line, the knee; completed against offered), A beside B."""

from __future__ import annotations

import re

from tests.unit.test_report_html import run

from pytest_webperf.models.capacity import Capacity, Probe, search
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.models.workload import Workload
from pytest_webperf.report.html.curve import curve_figures, stage_figures, stage_groups
from pytest_webperf.report.html.page import render_html
from pytest_webperf.report.json_report import report


def searched(truth: float) -> Capacity:
    def probe(rate: float) -> Probe:
        over = max(0.0, rate / truth - 1)
        return Probe(
            rate,
            "pass" if rate <= truth else "fail",
            achieved=min(rate, truth),
            p50_ms=10 + 1000 * over,
            p99_ms=20 + 3000 * over,
        )

    return search(probe, start=50, limit=1e4, slo="p99_ms<100,error_rate<0.01")


def entry(capacity: Capacity, base: Capacity | None = None, *, runs: tuple = ()) -> dict:
    measurement = Measurement(
        nodeid="test_x.py::test_x",
        name="capacity of GET /",
        server="pool",
        concurrency=1,
        workload=Workload(path="/"),
        runs=runs,
        capacity=capacity,
        base_capacity=base,
    )
    return report([measurement], {})


def test_the_curve_has_both_percentiles_the_slo_and_the_knee() -> None:
    found = searched(400)
    curve, completed = curve_figures(entry(found)["tests"][0])
    labels = [label for label, _, _ in curve.legend]
    assert labels[:2] == ["p50", "p99"]
    assert "SLO p99 100 ms" in labels
    assert f"knee (first rate that broke the SLO) {found.high:,.0f}/s" in labels
    assert curve.svg.count("<circle") == 2 * len({p.rate for p in found.probes})
    assert [label for label, _, _ in completed.legend] == ["completed", "offered"]
    numbers = re.findall(r'(?:cx|cy|d)="([^"]*)"', str(curve.svg) + str(completed.svg))
    assert numbers and not any(n in ("nan", "inf") for n in numbers)


def test_ab_draws_both_searches_and_the_page_renders() -> None:
    data = entry(searched(200), searched(400), runs=(run(1),))  # the probe at its rate
    figures = curve_figures(data["tests"][0])
    labels = [label for label, _, _ in figures[0].legend]
    assert labels[:4] == ["B p50", "B p99", "A p50", "A p99"]
    page = render_html(data)
    assert "Latency against offered rate" in page and "Completed against offered rate" in page


def test_no_search_no_curve() -> None:
    assert curve_figures({"name": "x"}) == []


def test_stages_are_drawn_one_after_the_other() -> None:
    def stage(i: int, users: int) -> Measurement:
        return Measurement(
            nodeid="test_x.py::test_x",
            name=f"GET / stage {i}/2: {users} users, 5s",
            server="s",
            concurrency=users,
            workload=Workload(path="/"),
            runs=(run(1, seconds=5, rps=1000.0 * i),),
        )

    data = report([stage(2, 16), stage(1, 2)], {})  # out of order: sorted by stage
    groups = stage_groups(data["tests"])
    assert list(groups) == ["test_x.py::test_x GET /"]
    assert [e["concurrency"] for e in groups["test_x.py::test_x GET /"]] == [2, 16]
    rps, p99 = stage_figures(groups["test_x.py::test_x GET /"])
    assert [label for label, _, _ in rps.legend] == ["2 users, 5s", "16 users, 5s"]
    assert rps.svg.count("<circle") == 10 and "p99" in p99.title
    page = render_html(data)
    assert "test_x.py::test_x GET /: stages" in page and "Requests per second by stage" in page
