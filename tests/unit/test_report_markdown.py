"""The Markdown summary (and the pull request's comment): the headline and each failed or
undecided test's checks first, then one table row per measurement, reasons listed, text
escaped."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_report_html import make_report, measurement, run

from pytest_webperf.models.measurement import Verdict
from pytest_webperf.report.markdown import COLUMNS, STATUS_MARK, md_escape, render_markdown
from pytest_webperf.report.table import shown


def table_rows(text: str) -> list[str]:
    """The rows of the table of every test (after the failed tests' own checks)."""
    every = text.split("### Every test", 1)[-1].split("<details>", maxsplit=1)[0]
    return [line for line in every.splitlines() if line.startswith("| ")]


def cells(row: str) -> list[str]:
    """A GFM table row split on its unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_one_row_per_measurement_under_a_header_and_rule() -> None:
    data = make_report([measurement(f"s.py::t[c{c}]", concurrency=c) for c in (1, 2, 3)])
    rows = table_rows(render_markdown(data))
    assert len(rows) == 2 + 3
    assert all(len(cells(r)) == len(shown(data["tests"], COLUMNS)) + 1 for r in rows)
    assert cells(rows[1])[3] == "---:"  # numbers right-aligned
    assert [cells(r)[3] for r in rows[2:]] == ["1", "2", "3"]


def test_figures_match_the_report() -> None:
    runs = [run(1, errors=10), run(2, errors=20)]
    data = make_report([measurement(runs=runs, verdict=Verdict("pass"))])
    row = dict(
        zip(
            cells(table_rows(render_markdown(data))[0]),
            cells(table_rows(render_markdown(data))[2]),
            strict=True,
        )
    )
    reps = data["tests"][0]["repetitions"]
    assert row["requests"] == f"{sum(r['requests'] for r in reps):,}"
    assert row["errors"] == "30" and row["timeouts"] == "15"
    assert row["p95 ms"] == f"{(reps[0]['p95_ms'] + reps[1]['p95_ms']) / 2:.2f}"
    assert row["verdict"] == "✅ pass"


def test_reasons_come_first_then_notes() -> None:
    data = make_report(
        [
            measurement("s.py::a", verdict=Verdict("no-baseline", notes=("no baseline",))),
            measurement("s.py::b", verdict=Verdict("regression", reasons=("rps -9% (limit -5%)",))),
        ]
    )
    text = render_markdown(data)
    assert text.startswith("## pytest-webperf: 1 failed, 1 without a baseline of 2 tests\n")
    assert text.index("### ❌ regression: s.py::b") < text.index("### Every test")
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(bullets) == 2
    assert bullets[0] == "- rps -9% (limit -5%)"  # under its test, first
    assert "note: no baseline" in bullets[1] and "s.py::a" in bullets[1]


def test_nodeids_cannot_break_the_table_or_inject_html() -> None:
    nasty = "s.py::t[a|b<script>x</script>*_`]"
    text = render_markdown(make_report([measurement(nasty, name="GET /a|b\nsecond line")]))
    rows = table_rows(text)
    assert len(rows) == 3 and len(cells(rows[2])) == len(cells(rows[0]))
    assert "<script>" not in text and "\nsecond line" not in text


@given(st.text(max_size=40))
def test_an_escaped_cell_stays_one_cell(text: str) -> None:
    escaped = md_escape(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert not re.search(r"(?<!\\)[|<>`]", escaped)


def test_missing_figures_and_an_empty_report() -> None:
    data: dict[str, Any] = {
        "tests": [
            {
                "nodeid": "a::b",
                "name": "x",
                "server": "s",
                "repetitions": [{"requests": 0, "duration_s": 1.0}],
            }
        ]
    }
    rows = table_rows(render_markdown(data))
    row = dict(zip(cells(rows[0]), cells(rows[2]), strict=True))
    assert row["requests"] == "0" and row["verdict"] == "-"
    assert "p50 ms" not in row  # no latency without requests: no column for it
    assert "Nothing was measured." in render_markdown({"tests": []})


def test_an_ab_run_shows_the_sides_the_change_and_each_tests_checks() -> None:
    from test_report_ab import a_check, ab_entry, ab_report

    nasty = ab_entry(nodeid="s.py::t[<script>|x]")
    passing = ab_entry(nodeid="s.py::passing", verdict={"status": "pass", "checks": [a_check()]})
    text = render_markdown(ab_report(ab_entry(), nasty, passing, {"nodeid": "s.py::bare"}))
    head = "## pytest-webperf: 2 failed, 1 passed, 1 without a verdict of 4 tests"
    assert text.startswith(f"{head} · A = main (0123456789), B = working tree\n")
    assert text.count("A = main (0123456789), B = working tree") == 1
    rows = table_rows(text)
    header = cells(rows[0])
    assert header[-3:] == ["baseline / A", "change", "verdict"]
    row = dict(zip(header, cells(rows[2]), strict=True))
    assert row["baseline / A"] == r"rps 3,115; cpu\_per\_req 130"
    assert row["change"] == r"rps -3.2% (-6.0..-0.4%); cpu\_per\_req +7.7% (+6.0..+9.4%)"
    assert row["verdict"] == "❌ regression"
    # the failed tests' checks come first, in the open; the passing one's fold below
    first = text.split("### Every test")[0]
    assert first.count("### ❌ regression:") == 2 and "<details>" not in first
    assert "| check | A | B | change | interval | could detect | outcome |" in first
    assert r"| cpu\_per\_req:5% | 130 | 140 | +7.7% | +6.0..+9.4% | \>= 4.5% | fail |" in first
    assert text.count("<details><summary>") == 1  # the passing test; the bare has no checks
    assert "\\<script\\>" in text and "<script>" not in text


def test_every_status_has_a_mark() -> None:
    from pytest_webperf.report.table import STATUSES

    for state in STATUSES:
        text = render_markdown({"tests": [{"nodeid": "a::b", "verdict": {"status": state}}]})
        row = cells(table_rows(text)[2])
        assert row[-1] == f"{STATUS_MARK[state]} {md_escape(state)}"


def test_the_code_measured_is_named_per_test() -> None:
    """A container by its image, a process by its commit (dirty or not)."""

    def entry(target: dict[str, Any]) -> dict[str, Any]:
        return {"nodeid": "s.py::t", "target": target}

    sha = "0123456789abcdef0123456789abcdef01234567"
    targets = [
        {"kind": "container", "image": "webperf/nginx:3f2a"},
        {"kind": "process", "git": {"commit": sha, "dirty": False}},
        {"kind": "process", "git": {"commit": sha, "dirty": True}},
        {"kind": "process", "git": None},
        {"kind": "external", "url": "http://127.0.0.1:1"},
    ]
    rows = table_rows(render_markdown({"tests": [entry(t) for t in targets]}))
    header = cells(rows[0])
    codes = [dict(zip(header, cells(r), strict=True))["code"] for r in rows[2:]]
    assert codes == [
        "image webperf/nginx:3f2a",
        "commit 0123456789",
        "commit 0123456789+dirty",
        "no git repository",
        "-",
    ]


def test_a_baseline_run_has_the_baseline_and_the_change_of_each_check() -> None:
    from test_report_ab import a_check

    checks = [a_check(), a_check(check="p95:10%", metric="p95", baseline=4.0, change=0.05)]
    test = {"nodeid": "s.py::t", "verdict": {"status": "pass", "checks": checks}}
    rows = table_rows(render_markdown({"tests": [test]}))
    row = dict(zip(cells(rows[0]), cells(rows[2]), strict=True))
    assert row["baseline / A"] == "rps 1,234; p95 4.00"
    assert row["change"] == "rps -4.4% (-7.1..-1.6%); p95 +5.0% (-7.1..-1.6%)"
