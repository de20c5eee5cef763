"""The differential profile in the reports: the terminal's top functions under an open
CPU, throughput or latency check (or why none is named, or that the time went
elsewhere), the HTML report's ranked table and folded stacks."""

from __future__ import annotations

import re
from typing import Any

from test_report_ab import a_check, ab_entry, ab_report
from test_report_html import check

from pytest_webperf.report.html.page import render_html
from pytest_webperf.report.terminal import summary


def change(function: str, us: float) -> dict[str, Any]:
    return {
        "function": function,
        "change_us": us,
        "low_us": us - 5,
        "high_us": us + 5,
        "base_us": 10.0,
        "change_total_us": us,
    }


PROFILE = {
    "tools": ["perf"],
    "pairs": 4,
    "tested": 12,
    "confidence": 0.95,
    "family_alpha": 0.05,
    "dispersion": 2.5,
    "explained": 0.85,
    "total_change_us": 10.0,
    "cpu": {"base_us": 130.0, "change_us": 10.0, "change": 0.077, "low": 0.03, "high": 0.12},
    "repetitions": [{"leaves": {}, "rate_hz": {"perf": 1999}}],
    "base_repetitions": [{"leaves": {}, "rate_hz": {"perf": 1999}}],
    "changes": [
        change("sha256_block_data_order (libcrypto.so.3)", 31.2),
        change("ngx_http_parse_request_line (nginx)", -12.0),
        change("memcpy (libc.so.6)", 8.0),
        change("fourth (nginx)", 6.5),
    ],
    "samples": {"A": 400, "B": 420},
    "requests": {"A": 10_000, "B": 9_000},
    "base_folded": "main;a<b> 3\n",
    "change_folded": "main;a<b> 4\n",
    "notes": [],
}


def test_the_top_three_functions_go_under_a_failed_cpu_check() -> None:
    lines = summary(ab_report(ab_entry(profile=PROFILE)))
    at = lines.index("  profile (B - A, CPU per request; 400 samples of A, 420 of B):")
    assert lines[at + 1 : at + 5] == [
        "    +31.2 µs/req (+26.2..+36.2)  sha256_block_data_order (libcrypto.so.3)",
        "    -12.0 µs/req (-17.0..-7.0)  ngx_http_parse_request_line (nginx)",
        "    +8.0 µs/req (+3.0..+13.0)  memcpy (libc.so.6)",
        "    the named functions explain 85% of +10.0 µs/req",
    ]
    assert not any("fourth" in line for line in lines)


def test_nothing_is_said_when_every_check_passes() -> None:
    entry = ab_entry(profile=PROFILE)
    entry["verdict"]["checks"] = [
        a_check(),
        a_check(check="errors:0", metric="errors", outcome="fail"),
    ]
    assert not any("profile" in line for line in summary(ab_report(entry)))


def test_a_latency_check_without_a_cpu_change_says_the_time_went_elsewhere() -> None:
    elsewhere = "the target's CPU per request did not move (+0.5%, -2.0..+3.0%): elsewhere"
    entry = ab_entry(profile={**PROFILE, "changes": [], "elsewhere": elsewhere})
    entry["verdict"]["checks"] = [a_check(), a_check(check="p95:20%", metric="p95", outcome="fail")]
    assert f"  profile: {elsewhere}" in summary(ab_report(entry))


def test_why_there_is_no_profile_or_no_function_is_said_under_the_check() -> None:
    lines = summary(ab_report(ab_entry(profile={"why": "no perf binary"})))
    assert "  no CPU profile: no perf binary" in lines
    unresolved = "no function's change is resolved with 400 samples on the smaller side"
    lines = summary(
        ab_report(ab_entry(profile={**PROFILE, "changes": [], "unresolved": unresolved}))
    )
    assert any(line.endswith(f"420 of B): {unresolved}") for line in lines), lines


def test_the_html_report_ranks_the_functions_and_offers_the_stacks() -> None:
    page = render_html(ab_report(ab_entry(profile=PROFILE)))
    check(page)
    assert "CPU profile: B - A per request" in page
    assert page.index("sha256_block_data_order") < page.index("ngx_http_parse_request_line")
    assert 'download="A.folded"' in page and 'download="B.folded"' in page
    assert "main%3Ba%3Cb%3E%203" in page  # the stacks, URL-encoded, never raw markup
    assert "fourth (nginx)" in page  # the table has every function, not the top 3
    assert "Sampled by perf at 1999 Hz (400 samples of A, 420 of B)" in page
    page = render_html(ab_report(ab_entry(profile={"why": "perf cannot sample here"})))
    assert "No CPU profile: perf cannot sample here" in page
    assert "CPU profile" not in render_html(ab_report(ab_entry()))


def test_the_flame_graph_colours_b_by_its_change_against_a() -> None:
    from pytest_webperf.report.html.flame import flame_graph

    svg = flame_graph(
        "main;grew 10\nmain;shrank 30\nmain;same 20\n",
        "main;grew 30\nmain;shrank 10\nmain;same 20\nmain;<new> 5\n",
        1000,
        1000,
    )
    assert svg is not None
    boxes = dict(re.findall(r"<title>([^:<]+):.*?fill=\"(rgb\([^)]*\))\"", str(svg)))
    assert boxes["grew"].startswith("rgb(255,") and boxes["grew"] != "rgb(255,255,255)"
    assert boxes["shrank"].endswith(",255)") and boxes["shrank"] != "rgb(255,255,255)"
    assert boxes["same"] == "rgb(255,255,255)"
    assert "&lt;new&gt;" in str(svg) and "<new>" not in str(svg)
    assert flame_graph("", "", 1000, 1000) is None
    assert flame_graph("a 1\n", "a 1\n", 0, 1000) is None
    assert flame_graph("not folded", "a 1\n", 1, 1) is None


def test_the_markdown_summary_says_it_under_the_checks() -> None:
    from pytest_webperf.report.markdown import render_markdown

    text = render_markdown(ab_report(ab_entry(profile=PROFILE)))
    assert "- profile (B - A, CPU per request; 400 samples of A, 420 of B):" in text
    assert "- +31.2 µs/req (+26.2..+36.2) sha256\\_block\\_data\\_order (libcrypto.so.3)" in text
