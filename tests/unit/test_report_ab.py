"""Checks and A/B runs in the HTML report, and the formatting every renderer shares.

Entries are small dicts shaped as docs/reference/report-schema.md says, so the renderers are
tested against the schema, not against whatever the producer happens to write today.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
from test_report_html import assert_finite, check

from pytest_webperf.models.measurement import Status
from pytest_webperf.models.placement import Placement
from pytest_webperf.report import verdicts
from pytest_webperf.report.html.page import badge_class, render_html
from pytest_webperf.report.markdown import STATUS_MARK
from pytest_webperf.report.table import STATUSES, durations, placement_text

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TEMPLATE = Path(verdicts.__file__).parent / "html" / "templates" / "report.html"


def a_check(**changes: Any) -> dict[str, Any]:
    base = {
        "check": "rps:5%",
        "metric": "rps",
        "outcome": "pass",
        "message": "rps -4.4% [-7.1%, -1.6%]",
        "current": 1180.0,
        "baseline": 1234.0,
        "change": -0.0438,
        "low": -0.071,
        "high": -0.016,
        "p_value": 0.2,
        "detectable": 0.06,
        "threshold": 0.05,
    }
    return {**base, **changes}


def a_rep(i: int, rps: float, cpu_per_req: float, order: str = "AB") -> dict[str, Any]:
    return {
        "repetition": i,
        "rps": rps,
        "requests": int(rps * 5),
        "errors": 0,
        "duration_s": 5.0,
        "p50_ms": 1.5,
        "p95_ms": 4.0,
        "p99_ms": 9.0,
        "cpu_percent": {"mean": 80.0, "max": 99.0},
        "cpu_per_req_us": cpu_per_req,
        "foreign_cpu_percent": 3.5,
        "order": order,
    }


def ab_entry(**changes: Any) -> dict[str, Any]:
    orders = ["AB", "BA", "BA", "AB"]
    entry = {
        "nodeid": "suites/test_py.py::test_hello[py-c8]",
        "name": "GET /hello",
        "server": "python",
        "concurrency": 8,
        "target": {"kind": "container", "image": "webperf/python:work"},
        "repetitions": [a_rep(i + 1, 3000 + 10 * i, 140.0, o) for i, o in enumerate(orders)],
        "base_repetitions": [a_rep(i + 1, 3100 + 10 * i, 130.0, o) for i, o in enumerate(orders)],
        "against": {
            "ref": "main",
            "commit": COMMIT,
            "changed": True,
            "base_target": {"kind": "container", "image": "webperf/python:main"},
            "restart_every": 2,
            "pairs": 4,
        },
        "verdict": {
            "status": "regression",
            "reasons": ["cpu_per_req +7.7% (limit +5%)"],
            "notes": [],
            "checks": [
                a_check(current=3015.0, baseline=3115.0, change=-0.032, low=-0.06, high=-0.004),
                a_check(
                    check="cpu_per_req:5%",
                    metric="cpu_per_req",
                    outcome="fail",
                    current=140.0,
                    baseline=130.0,
                    change=0.077,
                    low=0.06,
                    high=0.094,
                    detectable=0.045,
                ),
            ],
        },
    }
    return {**entry, **changes}


def ab_report(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": 1,
        "created": "2026-11-23T10:00:00+00:00",
        "against": {"ref": "main", "commit": COMMIT},
        "placement": {"mode": "split", "target_cpuset": "1", "generator_cpus": [0]},
        "config": {"concurrency": [50], "duration_s": 10, "repeat": 3, "warmup_s": 2},
        "tests": list(entries) or [ab_entry()],
    }


def text_of(page: str) -> str:
    return " ".join(check(page).text)


# ---------------------------------------------------------------- statuses


def test_every_status_has_a_badge_and_a_mark() -> None:
    assert set(get_args(Status)) <= set(STATUSES)  # a new status in models needs a badge
    css = TEMPLATE.read_text()
    for state in STATUSES:
        assert re.search(rf"\.badge\.{re.escape(state)}\b", css), state
        assert state in STATUS_MARK, state
        page = render_html({"tests": [{"nodeid": "a::b", "verdict": {"status": state}}]})
        assert f'class="badge {badge_class(state)}"' in page


def test_failing_statuses_are_red_undecided_amber_unchanged_grey() -> None:
    css = TEMPLATE.read_text()

    def rule(state: str) -> str:
        found = re.search(rf"^\.badge[^{{]*\.{state}\b[^{{]*\{{([^}}]*)\}}", css, re.M)
        assert found, state
        return found.group(1)

    assert rule("regression") == rule("broken") and "#a40e26" in rule("broken")
    assert "#7d4e00" in rule("undecided")
    assert "#57606a" in rule("unchanged")


# ---------------------------------------------------------------- A/B in HTML


def test_an_ab_entry_renders_both_sides() -> None:
    page = render_html(ab_report())
    text = text_of(page)
    assert "A = main (0123456789), B = working tree" in text  # once for the run
    assert "A = main (0123456789) · image webperf/python:main" in text
    assert "B = working tree · image webperf/python:work" in text
    assert "rps: A and B per pair" in text and "cpu_per_req: A and B per pair" in text
    assert "A (main)" in text and "B (working tree)" in text
    assert "Repetitions of A (base)" in text and "Repetitions of B (working tree)" in text
    # the pairs table holds both sides' values, pair by pair, with their order
    assert re.search(r"3,100\s*3,000", text) and re.search(r"130\s*140", text)
    assert "BA" in text
    assert 'class="threshold"' in page  # the change chart draws the thresholds
    assert "targets changed: yes" in text and "restart every 2 pairs" in text
    assert_finite(page)


def test_the_checks_table_names_a_and_b_in_an_ab_run() -> None:
    page = render_html(ab_report())
    table = re.search(r'<table class="checks">.*?</table>', page, re.S)
    assert table
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table.group(0))
    assert headers == ["check", "A", "B", "change", "interval", "could detect", "outcome"]
    cells = " ".join(re.findall(r"<td[^>]*>([^<]*)</td>", table.group(0)))
    assert "cpu_per_req:5%" in cells and "+7.7%" in cells and "+6.0..+9.4%" in cells
    assert ">= 4.5%" in cells.replace("&gt;", ">") and 'class="bad"' in table.group(0)


def test_a_baseline_run_names_baseline_and_current() -> None:
    entry = ab_entry(verdict={"status": "pass", "checks": [a_check()]})
    del entry["against"], entry["base_repetitions"]
    page = render_html({"tests": [entry]})
    text = text_of(page)
    assert "baseline current change" in " ".join(
        re.findall(r"<th[^>]*>([^<]*)</th>", page.split('class="checks"')[1].split("</tr>")[0])
    )
    assert "-4.4%" in text and "-7.1..-1.6%" in text and "1,234" in text
    assert "A = " not in text and "Pairs" not in text


@pytest.mark.parametrize(
    "entry",
    [
        ab_entry(against={}, base_repetitions=[]),
        ab_entry(against={"ref": None}, base_repetitions=[{}], repetitions=[]),
        ab_entry(verdict={"status": "undecided", "checks": [{}, "junk", {"check": "p95:+10%"}]}),
        ab_entry(verdict={"checks": None}, against=None),
        {"nodeid": "a::b", "verdict": {"checks": [{"metric": "rps", "change": None}]}},
    ],
)
def test_entries_missing_keys_still_render(entry: dict[str, Any]) -> None:
    page = render_html(ab_report(entry))
    check(page)
    assert "Traceback" not in page


def test_the_header_shows_what_each_test_ran_with() -> None:
    page = render_html(ab_report(ab_entry(), ab_entry(concurrency=16, repetitions=[])))
    settings = page.split('<section id="settings">')[1]  # last: the answer comes first
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", settings))
    # the entries', not the run's option (50); the second says its id names another
    assert facts["users"] == "8, 16 (id: c8)"
    assert facts["duration s"] == "5.0, -" and facts["repetitions"] == "4, 0"
    assert facts["placement"] == "placement split: target on CPUs 1, generator on CPUs 0"
    assert "concurrency" not in facts and facts["warmup_s"] == "2"


def test_foreign_cpu_is_shown_per_repetition() -> None:
    page = render_html(ab_report())
    assert "foreign cpu %" in page
    row = re.search(r'<tr class="rep-1">(.*?)</tr>', page, re.S)
    assert row and ">4</td>" in row.group(1)  # 3.5 %, rounded as the other CPU figures


# ---------------------------------------------------------------- shared formatting


def test_figures_are_formatted_once_for_every_renderer() -> None:
    c = a_check()
    assert verdicts.check_cells(c) == [
        "rps:5%",
        "1,234",
        "1,180",
        "-4.4%",
        "-7.1..-1.6%",
        ">= 6.0%",
        "pass (resolved, within 5%)",  # its interval excludes no change: it was resolved
    ]
    assert verdicts.check_cells({}) == ["-"] * 7
    assert verdicts.check_cells(a_check(low=-0.071, high=0.01))[-1] == "pass"
    assert verdicts.detectable({"detectable": 0.125}) == ">= 12%"
    assert (
        verdicts.value(0.1234) == "0.12"
        and verdicts.value(12.34) == "12.3"
        and verdicts.value(None) == "-"
    )


@pytest.mark.parametrize(
    ("check_", "expected"),
    [
        ({"check": "rps:5%", "metric": "rps", "threshold": 0.05}, -0.05),
        ({"check": "rps:-5%", "threshold": 0.05}, -0.05),
        ({"check": "p95:+10%", "metric": "p95", "threshold": 0.1}, 0.1),
        ({"check": "cpu_per_req:5%", "metric": "cpu_per_req", "threshold": 0.05}, 0.05),
        ({"check": "errors:0", "metric": "errors", "threshold": None}, None),
    ],
)
def test_the_threshold_is_drawn_on_the_worse_side(
    check_: dict[str, Any], expected: float | None
) -> None:
    assert verdicts.signed_threshold(check_) == expected


def test_the_ab_line() -> None:
    assert verdicts.against_line({"ref": "v1.2", "commit": COMMIT}) == (
        "A = v1.2 (0123456789), B = working tree"
    )
    assert verdicts.against_line("main") == "A = main, B = working tree"
    assert verdicts.against_line(None) is None
    assert (
        verdicts.run_against({"tests": [ab_entry()]}) == "A = main (0123456789), B = working tree"
    )
    assert verdicts.run_against({"tests": [{"nodeid": "x"}]}) is None


def test_pairs_line_up_a_and_b_and_tolerate_uneven_sides() -> None:
    entry = ab_entry(repetitions=[a_rep(1, 10, 1)], base_repetitions=[a_rep(1, 9, 1), {}])
    assert verdicts.pairs(entry, "rps") == [(9.0, 10.0), (None, None)]
    assert verdicts.pairs(entry, "no-such-metric") == []
    assert verdicts.orders(entry) == ["AB"]
    assert verdicts.orders(ab_entry(order=["BA"])) == ["BA"]
    head, rows = verdicts.pair_rows(entry)
    assert head == ["pair", "order", "rps A", "rps B", "cpu_per_req A", "cpu_per_req B"]
    assert rows[1] == ["2", "-", "-", "-", "-", "-"]


@pytest.mark.parametrize(
    "placement",
    [
        {"mode": "auto", "target_cpuset": None, "generator_cpus": []},
        {"mode": "split", "target_cpuset": "2,3", "generator_cpus": [0, 1]},
    ],
)
def test_placement_reads_as_the_terminal_says_it(placement: dict[str, Any]) -> None:
    expected = Placement(
        placement["mode"], placement["target_cpuset"], tuple(placement["generator_cpus"])
    )
    assert placement_text(placement) == expected.describe()
    assert placement_text(None) == "-"


def test_durations() -> None:
    assert durations({"repetitions": [{"duration_s": 5.0}, {"duration_s": 5.01}]}) == "5.0"
    assert durations({"repetitions": [{"duration_s": 4.5}, {"duration_s": 5.0}]}) == "4.5-5.0"
    assert durations({}) == "-"


def test_every_paired_chart_metric_is_a_metric_checks_name() -> None:
    from pytest_webperf.gate.metrics import METRICS as CHECKED
    from pytest_webperf.report.verdicts import METRICS as CHARTED

    assert set(CHARTED) <= set(CHECKED)
