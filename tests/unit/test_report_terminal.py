"""The terminal summary: the table, each test's checks under it, the A/B line once."""

from __future__ import annotations

from typing import Any

from test_report_ab import a_check, ab_entry, ab_report

from pytest_webperf.report.terminal import aligned, summary


def baseline_entry(**verdict: Any) -> dict[str, Any]:
    """An entry compared with a stored baseline (no A/B keys), one check by default."""
    entry = ab_entry(
        nodeid="s.py::t_base", verdict={"status": "pass", "checks": [a_check()], **verdict}
    )
    del entry["against"], entry["base_repetitions"]
    return entry


def test_an_ab_run_says_what_a_and_b_were_once() -> None:
    lines = summary(ab_report(ab_entry(), ab_entry(nodeid="s.py::other")))
    assert lines[0] == "webperf A/B: A = main (0123456789), B = working tree"
    assert sum("A = main" in line for line in lines) == 1


def test_checks_are_listed_under_the_table_only_for_tests_with_checks() -> None:
    lines = summary(ab_report(ab_entry(), baseline_entry(), {"nodeid": "s.py::bare"}))
    start = lines.index("suites/test_py.py::test_hello[py-c8] [GET /hello]: regression")
    head = lines[start + 1].split()
    assert head == ["check", "A", "B", "change", "interval", "could", "detect", "outcome"]
    assert lines[start + 3].split() == [
        "rps:5%",
        "3,115",
        "3,015",
        "-3.2%",
        "-6.0..-0.4%",
        ">=",
        "6.0%",
        "pass",
        "(resolved,",
        "within",
        "5%)",
    ]
    assert lines[start + 4].split()[-1] == "fail"
    base = lines.index("s.py::t_base [GET /hello]: pass")
    assert lines[base + 1].split()[:3] == ["check", "baseline", "current"]
    assert not any(line.startswith("s.py::bare") for line in lines)  # no checks, no block
    assert all(line.startswith("  ") for line in lines[start + 1 : start + 5])


def test_checks_missing_keys_show_a_dash() -> None:
    lines = summary({"tests": [baseline_entry(checks=[{"check": "p95:+10%"}, "junk"])]})
    row = next(line for line in lines if "p95:+10%" in line)
    assert row.split() == ["p95:+10%", "-", "-", "-", "-", "-", "-"]
    assert not any("A/B" in line for line in lines)


def test_a_run_without_checks_keeps_its_old_summary() -> None:
    lines = summary({"tests": [baseline_entry(checks=[])]})
    assert len(lines) == 3  # header, rule, one row
    assert summary({}) == []


def test_aligned_pads_columns_to_the_widest() -> None:
    rows = [["a", "num"], ["long", "1"], ["x", "1,000"]]
    assert aligned(rows, [False, True]) == [
        "a       num",
        "----  -----",
        "long      1",
        "x     1,000",
    ]


def test_values_are_the_checks_own() -> None:
    entry = baseline_entry(checks=[a_check(current=0.5, baseline=0.25, change=1.0)])
    row = next(line for line in summary({"tests": [entry]}) if line.startswith("  rps:5%"))
    assert row.split()[1:4] == ["0.25", "0.50", "+100.0%"]
