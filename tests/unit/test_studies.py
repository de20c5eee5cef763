"""The seed studies beside this run: matching, ordering, wording."""

from __future__ import annotations

from typing import Any

from pytest_webperf.report import studies
from pytest_webperf.report.terminal import summary


def entry(test: str, server: str, path: str, users: int, rps: float, **extra: Any) -> dict:
    return {
        "nodeid": f"suites/{test}[{server}-{path}-c{users}]",
        "name": f"GET {path}",
        "server": server,
        "concurrency": users,
        "workload": {"path": path},
        "rps": rps,
        "repetitions": extra.pop("repetitions", []),
        **extra,
    }


C10K = "test_seed004_c10k.py::test_c10k"


def test_the_studys_ordering_holds_or_not_per_workload_and_users() -> None:
    entries = [
        entry(C10K, "nginx", "/500b", 100, 46_524),
        entry(C10K, "python-uv", "/500b", 100, 28_316),
        entry(C10K, "node", "/500b", 100, 11_327),
        entry(C10K, "nginx", "/20kb", 100, 10_000),
        entry(C10K, "node", "/20kb", 100, 12_000),  # node ahead of nginx: differs
        entry("test_other.py::test_c10k", "nginx", "/500b", 100, 1),  # not the suite
    ]
    small, large = studies.compare(entries)
    assert small["path"] == "/500b" and small["users"] == 100 and small["study_users"] == 10_000
    assert small["ranking"] == ["nginx", "python-uv", "node"] and small["holds"]
    assert small["study"] == {"nginx": 15_674, "python-uv": 9_420, "node": 3_775}
    assert large["ranking"] == ["node", "nginx"] and not large["holds"]
    text = studies.lines([small, large])
    assert text[1] == (
        "  seed 004 /500b, 100 users here (10,000 in the study), req/s: nginx 46,524 "
        "(study 15,674), python-uv 28,316 (study 9,420), node 11,327 (study 3,775); "
        "here nginx > python-uv > node: the study's ordering holds"
    )
    assert text[2].endswith("differs from the study's nginx > node")


def test_a_study_without_figures_is_ranked_and_one_server_is_no_comparison() -> None:
    test = "test_seed001_proxy_cache.py::test_proxy_cache"
    (cache,) = studies.compare(
        [
            entry(test, "nginx-cache", "/hello", 200, 900),
            entry(test, "varnish", "/hello", 200, 1200),
        ]
    )
    assert cache["study"]["varnish"] is None and not cache["holds"]
    assert "varnish 1,200 (ranked)" in studies.lines([cache])[1]
    assert studies.compare([entry(test, "varnish", "/hello", 200, 1200)]) == []
    assert studies.lines([]) == []


def test_seed000_compares_requests_per_repetition() -> None:
    test = "test_seed000_apache_vs_node.py::test_apache_vs_node"
    reps = [{"requests": 1000}, {"requests": 3000}]
    (found,) = studies.compare(
        [
            entry(test, "apache-php", "/hello", 100, 0, repetitions=reps),
            entry(test, "node", "/hello", 100, 0, repetitions=[{"requests": 5000}]),
        ]
    )
    assert found["here"] == {"node": 5000, "apache-php": 2000} and found["holds"]


def test_the_terminal_summary_shows_the_studies() -> None:
    entries = [entry(C10K, "nginx", "/500b", 100, 2.0), entry(C10K, "node", "/500b", 100, 1.0)]
    out = summary({"tests": entries})
    assert any(line.startswith("webperf: the studies' figures") for line in out)


def test_the_html_report_has_a_studies_table() -> None:
    from pytest_webperf.report.html import render_html

    entries = [entry(C10K, "nginx", "/500b", 100, 2.0), entry(C10K, "node", "/500b", 100, 1.0)]
    page = render_html({"tests": entries})
    assert "<h2>The studies</h2>" in page
    assert "nginx 2, node 1" in page and "nginx 15,674, node 3,775" in page
    assert "<h2>The studies</h2>" not in render_html({"tests": entries[:1]})


def test_paced_load_every_server_kept_up_with_ranks_nothing() -> None:
    test = "test_mqtt_qos2.py::test_http_telemetry"
    paced = {"workload": {"path": "/telemetry", "interval_s": 0.5}}
    kept = [
        {**entry(test, "go-mqtt", "/telemetry", 1000, 1999), **paced},
        {**entry(test, "tomcat-mqtt", "/telemetry", 1000, 2239), **paced},
    ]
    (found,) = studies.compare(kept)
    assert found["holds"] is None
    assert studies.lines([found])[1].endswith(
        "every server kept the offered rate: no ranking at this load"
    )
    behind = [kept[0], {**kept[1], "rps": 900.0}]  # tomcat fell behind its 2,000/s
    (found,) = studies.compare(behind)
    assert found["holds"] is True and found["ranking"] == ["go-mqtt", "tomcat-mqtt"]
