"""What a report opens on (issue #48): the headline (tests failed, undecided, passed, and
against what), then each failed or undecided test's checks and the functions that
changed, then every test, the details, and the settings last; and a counted run's report
(issue #43): counts per request, never Valgrind's timed figures as the server's.

Entries are dicts shaped as docs/reference/report-schema.md says (the helpers of
``test_report_ab`` and ``test_counted_load``)."""

from __future__ import annotations

from typing import Any

from test_counted_load import ENTRY as COUNTED
from test_report_ab import a_check, ab_entry, ab_report
from test_report_html import check

from pytest_webperf.report import counts, headline, terminal, verdicts
from pytest_webperf.report.html.comparisons import comparisons
from pytest_webperf.report.html.page import render_html
from pytest_webperf.report.markdown import render_markdown
from pytest_webperf.report.table import COLUMNS, shown, users

PROFILE = {
    "tools": ["py-spy"],
    "samples": {"A": 1200, "B": 1700},
    "tested": 5,
    "changes": [
        {"function": "checksum (server.py)", "change_us": 285.5, "low_us": 206.7, "high_us": 382.6}
    ],
    "base_folded": "main;serve;checksum 100\nmain;serve 300\n",
    "change_folded": "main;serve;checksum 300\nmain;serve 300\n",
    "requests": {"A": 1000, "B": 1000},
}


def entry(nodeid: str, state: str, **changes: Any) -> dict[str, Any]:
    found = ab_entry(nodeid=nodeid)
    return {**found, "verdict": {**found["verdict"], "status": state}, **changes}


def test_the_headline_counts_tests_by_their_worst_measurement() -> None:
    entries = [
        entry("t.py::a", "pass"),
        entry("t.py::a", "regression"),  # a second measurement of the same test
        entry("t.py::b", "undecided"),
        entry("t.py::c", "pass"),
        entry("t.py::d", "no-baseline"),
    ]
    report = ab_report(*entries)
    assert headline.counts(entries) == [
        ("failed", 1),
        ("undecided", 1),
        ("passed", 1),
        ("without a baseline", 1),
    ]
    assert headline.headline(report) == (
        "1 failed, 1 undecided, 1 passed, 1 without a baseline of 4 tests (5 measurements)"
        " · A = main (0123456789), B = working tree"
    )
    assert [i for i, _ in headline.open_first(entries)] == [1, 2]  # failed, then undecided


def test_the_headline_says_what_the_verdicts_compared_with() -> None:
    judged = {"nodeid": "t.py::a", "verdict": {"status": "pass", "checks": [a_check()]}}
    first = {"nodeid": "t.py::a", "verdict": {"status": "no-baseline"}}
    assert headline.against({"machine_id": "m1", "tests": [judged]}) == (
        "against the stored baseline of machine m1"
    )
    assert headline.against({"machine_id": "m1", "tests": [first]}).startswith(
        "no stored baseline of machine m1 yet"
    )
    assert headline.headline({"tests": []}) == "nothing was measured"


def test_the_page_opens_on_the_failed_test_then_every_test_then_the_settings() -> None:
    failed = entry("t.py::test_pages[c2]", "regression", profile=PROFILE)
    passed = entry("t.py::test_static[c2]", "pass")
    page = render_html(ab_report(passed, failed))
    check(page)
    order = [
        page.index('<p class="headline">'),
        page.index('<section class="finding" id="f1">'),
        page.index("cpu_per_req:5%"),
        page.index("checksum (server.py)"),
        page.index("Differential flame graph"),
        page.index("<h2>Every test</h2>"),
        page.index("<h2>Comparison</h2>"),
        page.index("<h2>Measurements</h2>"),
        page.index('<section id="settings">'),
    ]
    assert order == sorted(order), order
    finding = page.split('<section class="finding" id="f1">')[1].split("</section>")[0]
    assert "test_pages[c2]" in finding and "test_static" not in finding
    assert '<a href="#m1"' in finding  # to its details, which link back
    details = page.split('id="m1"')[1]
    assert '<a href="#f1">at the top</a>' in details.split("</section>")[0]
    assert page.count('<section class="finding"') == 1  # the passed test is not there


def test_the_summary_puts_the_verdict_by_the_test_and_each_change_with_its_interval() -> None:
    page = render_html(ab_report(entry("t.py::a", "regression")))
    head = page.split('<table class="summary">')[1].split("</tr>")[0]
    assert head.index(">test<") < head.index(">verdict<") < head.index(">workload<")
    assert "baseline / A" not in head  # A's figures are in the checks' tables
    assert "rps -3.2% (-6.0..-0.4%); cpu_per_req +7.7% (+6.0..+9.4%)" in page


def test_every_chart_of_an_ab_comparison_puts_a_beside_b() -> None:
    (workload,) = comparisons([ab_entry()])
    for figure in workload.figures:
        labels = [label for label, _, _ in figure.legend]
        if "p50" in labels:  # the percentiles: a group per side
            assert "python A" in figure.svg and "python B" in figure.svg
        else:
            assert labels == ["python A", "python B"], (figure.title, labels)


def test_a_counted_run_shows_counts_and_no_timed_figure_as_the_servers() -> None:
    counted = {**COUNTED, "nodeid": "t.py::test_work[c20]", "concurrency": 1, "server": "work"}
    counted["repetitions"] = [
        {**r, "rps": 23.0, "p99_ms": 200.0, "cpu_per_req_us": 16316.0, "capacity_rps": 124.0}
        for r in counted["repetitions"]
    ]
    names = [name for name, _ in shown([counted], COLUMNS)]
    assert {"req/s", "p99 ms", "cpu/req us", "capacity~", "cpu %"}.isdisjoint(names)
    assert {"instr/req", "allocs/req", "syscalls/req"} <= set(names)
    assert users(counted) == "1 (counted)"  # its id says c20
    page = render_html({"tests": [counted]})
    check(page)
    for timed in ("16,316", ">23<", "200.00", ">124<"):
        assert timed not in page, timed
    assert "14,391.0" in page and "under Valgrind" in page
    assert "instructions per request (counted)" in page  # its comparison chart
    assert "Requests per second" not in page and "Latency per second" not in page
    text = render_markdown({"tests": [counted]})
    assert "| 1 \\(counted\\) |" not in text and "1 (counted)" in text
    assert "ran 1 connection, not the 20 of its id" in text


def test_an_unjudged_counted_figure_spread_wide_is_left_out_unless_verbose() -> None:
    reps = [
        {"counts": {**r["counts"], "ctx_switches_per_req": c}}
        for r, c in zip(COUNTED["repetitions"], (1.121, 13.551), strict=True)
    ]
    wide = {**COUNTED, "repetitions": reps, "base_repetitions": reps}
    quiet = "\n".join(counts.lines([wide]))
    assert "ctx switches" not in quiet and "instructions 14,391.0" in quiet
    loud = "\n".join(counts.lines([wide], verbose=True))
    assert "ctx switches (not judged) 1.121..13.551" in loud


def test_a_resolved_change_within_its_threshold_says_so_in_its_own_digits() -> None:
    check_ = {
        "check": "instructions_per_req:1%",
        "metric": "instructions_per_req",
        "outcome": "pass",
        "baseline": 14211.0,
        "current": 14212.7,
        "change": 0.00012,
        "low": 0.00004,
        "high": 0.0002,
        "detectable": 0.0001,
        "threshold": 0.01,
    }
    cells = verdicts.check_cells(check_)
    assert cells[3:] == ["+0.012%", "+0.004..+0.020%", ">= 0.010%", "pass (resolved, within 1%)"]


def test_per_repetition_http2_details_need_verbose() -> None:
    h2 = {"streams": 10, "server_streams": 10, "request_savings": 0.9, "response_savings": 0.8}
    reps = [{"repetition": i, "concurrency": 2, "in_flight": 20, "http2": h2} for i in (1, 2)]
    report = {"tests": [{"nodeid": "t.py::h2", "name": "GET / (HTTP/2)", "repetitions": reps}]}
    assert not any("HPACK" in line for line in terminal.summary(report))
    assert sum("HPACK" in line for line in terminal.summary(report, verbose=True)) == 2
    fewer = [{**r, "http2": {**h2, "server_streams": 4}} for r in reps]
    said = terminal.summary({"tests": [{**report["tests"][0], "repetitions": fewer}]})
    assert [line for line in said if "HTTP/2: " in line] == [
        "t.py::h2 [GET / (HTTP/2)]: HTTP/2: the server allowed 4 of the 10 streams asked "
        "(-v: each repetition's connections)"
    ]


def test_the_charts_over_time_of_an_ab_run_draw_both_sides() -> None:
    from pytest_webperf.report.html.timeline import measurement_charts, runs_of

    entry = ab_entry()
    series = [{"t": 1.0, "elapsed": 1.0, "requests": 100, "p50_ms": 1.0}]
    runs = runs_of(
        [{**r, "series": series} for r in entry["repetitions"]],
        [{**r, "series": series} for r in entry["base_repetitions"]],
        "main",
    )
    assert [label for label, _, _ in runs.key] == ["A (main)", "B (working tree)"]
    assert [css for css, _, _ in runs.boxes] == ["side-a", "side-b"]
    first = measurement_charts(runs)[0]
    assert first.svg.count('class="side-a"') == 4 and first.svg.count('class="side-b"') == 4
    alone = runs_of(entry["repetitions"])
    assert [css for css, _, _ in alone.boxes] == ["rep-1", "rep-2", "rep-3", "rep-4"]


def test_a_grpc_method_is_labelled_grpc_not_post() -> None:
    call = {"path": "/shop.Items/GetItem", "method": "POST", "name": "GetItem", "grpc": True}
    row = {"name": "GetItem", "method": "POST", "requests": 100, "rps": 50.0, "share": 1.0}
    grpc = {
        "nodeid": "t.py::test_items",
        "name": "gRPC /shop.Items/GetItem",
        "workload": {"mix": [call]},
        "endpoints": [row],
        "repetitions": [{"requests": 100, "duration_s": 2.0}],
    }
    lines = terminal.table([grpc])
    assert any("- gRPC GetItem" in line for line in lines) and "POST" not in "".join(lines)
    page = render_html({"tests": [grpc]})
    assert "POST" not in page and "<td>gRPC</td>" in page


def test_a_note_about_a_check_not_checked_is_said_once_as_its_line() -> None:
    open_check = a_check(
        check="p95:20%", metric="p95", outcome="undecided", checked=False, detectable=2.29
    )
    found = entry("t.py::a", "undecided")
    found["verdict"] = {
        "status": "undecided",
        "checks": [a_check(), open_check],
        "notes": ["p95: too noisy to judge 20%: could detect >= 229%", "rps improved"],
    }
    assert verdicts.not_checked(found)[0].startswith("p95:20%: not checked: could detect")
    assert verdicts.other_notes(found) == ["rps improved"]
    text = render_markdown(ab_report(found))
    assert "too noisy" not in text and "- note: rps improved" in text
