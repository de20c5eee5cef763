"""The studies ranked by capacity: two searches' brackets judged as an ordering."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.gate import ordering
from pytest_webperf.report import studies
from pytest_webperf.report.terminal import summary

POOL = "test_seed003_async_vs_pool.py::test_async_vs_pool_capacity"


def found(server: str, low: float, high: float, status: str = "found") -> dict[str, Any]:
    rate = low if status in ("found", "at-limit") else None
    return {
        "server": server,
        "status": status,
        "rate": rate,
        "low": low,
        "high": high,
        "slo": "p99_ms<100",
    }


def entry(server: str, capacity: dict[str, Any], test: str = POOL) -> dict[str, Any]:
    return {
        "nodeid": f"suites/{test}[{server}-c50]",
        "name": "capacity of GET /hello",
        "server": server,
        "concurrency": 50,
        "workload": {"path": "/hello"},
        "rps": 1.0,
        "repetitions": [],
        "capacity": capacity,
    }


def test_the_capacity_tests_rank_the_servers_by_their_brackets() -> None:
    entries = [
        entry("python-async", found("python-async", 2_075, 2_167)),
        entry("lb-async", found("lb-async", 3_200, 3_342)),
        entry("python-pool", found("python-pool", 418, 436)),
        entry("lb-pool", found("lb-pool", 192, 200)),
    ]
    (line,) = studies.compare(entries)
    assert line["metric"] == "capacity" and line["seed"] == "003"
    assert line["study_users"] == 1000 and line["path"] == "/hello"
    assert line["ranking"] == ["lb-async", "python-async", "python-pool", "lb-pool"]
    assert [(p["first"], p["second"], p["status"]) for p in line["pairs"]] == [
        ("python-async", "lb-async", "reversed"),  # 2,167 / 3,200 < 1 / 1.05
        ("lb-async", "python-pool", "holds"),
        ("python-pool", "lb-pool", "holds"),  # 418 / 200 > 1.05
    ]
    assert line["status"] == "reversed" and line["holds"] is False
    text = studies.verdict_text(line)
    assert "search brackets" in text and "CI" not in text
    assert any("capacity, req/s within p99_ms<100" in s for s in summary({"tests": entries}))
    from pytest_webperf.report.html.page import render_html

    assert "search brackets" in render_html({"tests": entries})


def test_overlapping_brackets_are_not_separated_and_a_generator_bound_search_is_not_ranked():
    close = [
        entry("python-async", found("python-async", 400, 420)),
        entry("lb-async", found("lb-async", 410, 430)),
    ]
    (line,) = studies.compare(close)
    assert line["status"] == "not separated"
    assert "brackets overlap" in line["pairs"][0]["why"]
    bound = [
        entry("python-async", found("python-async", 400, 420)),
        entry("lb-async", {"server": "lb-async", "status": "generator-bound", "rate": None}),
    ]
    (line,) = studies.compare(bound)
    assert line["status"] == "not ranked" and line["holds"] is None
    assert "capacity generator-bound" in line["pairs"][0]["why"]


def test_a_search_that_held_up_to_its_limit_is_at_least_its_limit() -> None:
    high = found("python-async", 20_000, 0, status="at-limit")
    (line,) = studies.compare(
        [entry("python-async", high), entry("lb-async", found("lb-async", 3_000, 3_100))]
    )
    assert line["pairs"][0]["status"] == "holds"  # 20,000 / 3,100, whatever is above it
    assert line["pairs"][0]["high"] is None


def test_the_load_tests_of_the_same_suite_are_not_capacity_lines() -> None:
    plain = entry("python-async", found("python-async", 1, 2), test=POOL.removesuffix("_capacity"))
    assert all(c["metric"] != "capacity" for c in studies.compare([plain, plain]))


rates = st.floats(min_value=1.0, max_value=1e6, allow_nan=False)
widths = st.floats(min_value=1.0, max_value=1.5)


@given(rates, widths, rates, widths)
def test_swapping_the_servers_swaps_holds_and_reversed(
    a: float, wa: float, b: float, wb: float
) -> None:
    first, second = found("a", a, a * wa), found("b", b, b * wb)
    there, back = ordering.judge_capacities(first, second), ordering.judge_capacities(second, first)
    swapped = {"holds": "reversed", "reversed": "holds", "not separated": "not separated"}
    assert back.status == swapped[there.status]
    if there.status == "holds":  # the whole bracket ratio beyond the margin
        assert a / (b * wb) > ordering.MARGIN
    if there.status == "not separated":
        assert not (a / (b * wb) > ordering.MARGIN or a * wa / b < 1 / ordering.MARGIN)


def test_the_tables_capacity_column_shows_a_searchs_bracket_not_the_estimate() -> None:
    from pytest_webperf.report.table import COLUMNS

    column = dict(COLUMNS)["capacity~"]
    estimate = {"repetitions": [{"capacity_rps": 16_243.0}]}
    assert column(estimate) == "16,243"
    assert column({**estimate, "capacity": found("a", 2_075, 2_167)}) == "2,075-2,167"
    assert column({**estimate, "capacity": found("a", 20_000, 0, "at-limit")}) == ">=20,000"
    assert column({**estimate, "capacity": {"status": "generator-bound"}}) == "generator-bound"


def test_a_capacity_search_of_a_one_request_mix_is_ranked_by_its_path() -> None:
    # seed 002's capacity test searches with mix=[POST /telemetry]: no path of its own
    test = "test_mqtt_qos2.py::test_http_telemetry_capacity"
    entries = [
        {**entry(s, found(s, lo, hi), test), "workload": {"mix": [{"path": "/telemetry"}]}}
        for s, lo, hi in (("go-mqtt", 5_657, 5_907), ("tomcat-mqtt", 4_556, 4_757),
                          ("node-mqtt", 3_221, 3_364))
    ]  # fmt: skip
    (line,) = studies.compare(entries)
    assert line["seed"] == "002" and line["path"] == "/telemetry"
    assert line["ranking"] == ["go-mqtt", "tomcat-mqtt", "node-mqtt"]
    assert line["status"] == "holds"
