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
PROXY = "test_seed001_proxy_cache.py::test_proxy_cache"


def reps(*rps: float, bound: bool = False, asked: int | None = None) -> list[dict]:
    """Repetitions on fresh instances, as the report holds them."""
    return [
        {
            "repetition": i,
            "instance": i,
            "rps": value,
            "generator_bound": bound,
            **({"requests_asked": asked, "time_taken_s": asked / value} if asked else {}),
        }
        for i, value in enumerate(rps)
    ]


def measured(test: str, server: str, path: str, users: int, *rps: float, **extra: Any) -> dict:
    return entry(test, server, path, users, sum(rps) / len(rps), repetitions=reps(*rps, **extra))


def test_the_studys_ordering_holds_reversed_or_not_separated_per_workload_and_users() -> None:
    entries = [
        measured(C10K, "nginx", "/500b", 100, 46_000, 47_000, 46_500),
        measured(C10K, "python-uv", "/500b", 100, 28_000, 28_600, 28_300),
        measured(C10K, "node", "/500b", 100, 11_300, 11_400, 11_280),
        measured(C10K, "nginx", "/20kb", 100, 10_000, 10_100, 9_900),
        measured(C10K, "node", "/20kb", 100, 12_000, 12_100, 11_900),  # node ahead: reversed
        entry("test_other.py::test_c10k", "nginx", "/500b", 100, 1),  # not the suite
    ]
    small, large = studies.compare(entries)
    assert small["path"] == "/500b" and small["users"] == 100 and small["study_users"] == 10_000
    assert small["ranking"] == ["nginx", "python-uv", "node"]
    assert small["status"] == "holds" and small["holds"] is True
    assert [(p["first"], p["second"], p["status"]) for p in small["pairs"]] == [
        ("nginx", "python-uv", "holds"),
        ("python-uv", "node", "holds"),
    ]
    assert small["study"] == {"nginx": 15_674, "python-uv": 9_420, "node": 3_775}
    assert large["ranking"] == ["node", "nginx"] and large["status"] == "reversed"
    assert large["holds"] is False
    (pair,) = large["pairs"]
    assert pair["high"] < 1 < 1 / pair["low"] and abs(pair["ratio"] - 10_000 / 12_000) < 1e-9
    text = studies.lines([small, large])
    assert text[1].startswith(
        "  seed 004 /500b, 100 users here (10,000 in the study), req/s: nginx 46,500 "
        "(study 15,674), python-uv 28,300 (study 9,420), node 11,327 (study 3,775); "
        "nginx/python-uv 1.64x, 95% CI "
    )
    assert text[1].endswith("the study's nginx > python-uv > node: holds")
    assert text[2].startswith("  seed 004 /20kb") and "nginx/node 0.83x, 95% CI 0.8" in text[2]
    assert text[2].endswith("the study's nginx > node: reversed")


def test_one_repetition_each_is_not_separated_and_says_so() -> None:
    (cache,) = studies.compare(
        [
            measured(PROXY, "nginx-cache", "/hello", 200, 38_552),
            measured(PROXY, "varnish", "/hello", 200, 35_427),
        ]
    )
    assert cache["status"] == "not separated" and cache["holds"] is None
    assert "one repetition cannot separate anything" in studies.lines([cache])[1]


def test_a_generator_bound_side_is_not_ranked_and_the_line_says_what_would_fix_it() -> None:
    (cache,) = studies.compare(
        [
            measured(PROXY, "nginx-cache", "/hello", 200, 38_000, 38_500, 39_000),
            measured(PROXY, "varnish", "/hello", 200, 30_000, 30_500, 31_000, bound=True),
        ]
    )
    assert cache["status"] == "not ranked" and cache["holds"] is None
    (line,) = studies.lines([cache])[1:]
    assert "varnish was generator-bound in 3 of 3 repetitions" in line
    assert "the comparison measured the generator" in line and "--webperf-workers" in line


def test_short_counted_runs_and_shared_cores_are_noted_under_the_line() -> None:
    entries = [
        measured(PROXY, "nginx-cache", "/hello", 200, 38_000, 38_500, asked=20_000),
        measured(PROXY, "varnish", "/hello", 200, 30_000, 30_500, asked=20_000),
    ]
    shared = {"mode": "auto", "target_cpuset": None, "generator_cpus": []}
    (cache,) = studies.of_report({"tests": entries, "placement": shared, "machine": {"cores": 2}})
    assert cache["notes"][0].startswith("counted repetitions shorter than 5 s (nginx-cache 2 of 2")
    assert cache["notes"][1].startswith("server and generator shared the machine's 2 cores")
    text = studies.lines([cache])
    assert text[2].startswith("    note: counted repetitions") and text[3].startswith("    note: ")
    apart = {"mode": "split", "target_cpuset": "2-3", "generator_cpus": [0, 1]}
    (cache,) = studies.of_report({"tests": entries, "placement": apart, "machine": {"cores": 4}})
    assert len(cache["notes"]) == 1


def test_a_study_without_figures_is_ranked_and_one_server_is_no_comparison() -> None:
    test = PROXY
    (cache,) = studies.compare(
        [
            entry(test, "nginx-cache", "/hello", 200, 900),
            entry(test, "varnish", "/hello", 200, 1200),
        ]
    )
    assert cache["study"]["varnish"] is None and cache["ranking"] == ["varnish", "nginx-cache"]
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
    assert found["here"] == {"node": 5000, "apache-php": 2000}
    assert found["status"] == "not separated"  # node ran once


def test_the_terminal_summary_shows_the_studies() -> None:
    entries = [entry(C10K, "nginx", "/500b", 100, 2.0), entry(C10K, "node", "/500b", 100, 1.0)]
    out = summary({"tests": entries})
    assert any(line.startswith("webperf: the studies' figures") for line in out)


def test_the_html_report_has_a_studies_table() -> None:
    from pytest_webperf.report.html.page import render_html

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
    assert found["holds"] is None and found["status"] == "not ranked" and found["pairs"] == []
    assert studies.lines([found])[1].endswith(
        "every server kept the offered rate: no ranking at this load"
    )
    behind = [  # tomcat fell behind its 2,000/s
        {**measured(test, "go-mqtt", "/telemetry", 1000, 1999, 1998, 2000), **paced},
        {**measured(test, "tomcat-mqtt", "/telemetry", 1000, 900, 910, 905), **paced},
    ]
    (found,) = studies.compare(behind)
    assert found["holds"] is True and found["ranking"] == ["go-mqtt", "tomcat-mqtt"]


def test_a_short_counted_repetition_shows_its_note_on_its_line() -> None:
    from pytest_webperf.measurement.repetition import short_count
    from pytest_webperf.report.table import counted_lines

    note = short_count(20_000, 0.519)
    assert note.startswith("short count: 20,000 requests took 0.52 s, under 5 s")
    rep = {"repetition": 1, "requests": 20_000, "requests_asked": 20_000, "time_taken_s": 0.519}
    e = entry(PROXY, "nginx-cache", "/hello", 200, 38_536)
    (line,) = counted_lines([{**e, "repetitions": [{**rep, "notes": ["other", note]}]}])
    assert line.endswith("KB/s; " + note)
    (line,) = counted_lines([{**e, "repetitions": [rep]}])
    assert line.endswith("KB/s")


def test_markdown_and_html_render_the_pairs_and_the_notes() -> None:
    from pytest_webperf.report.html.page import render_html
    from pytest_webperf.report.markdown import render_markdown

    report = {
        "tests": [
            measured(PROXY, "nginx-cache", "/hello", 200, 38_000, 38_500, 39_000),
            measured(PROXY, "varnish", "/hello", 200, 20_000, 20_500, 21_000),
        ],
        "placement": {"mode": "auto", "target_cpuset": None, "generator_cpus": []},
        "machine": {"cores": 2},
    }
    (found,) = studies.of_report(report)
    assert found["status"] == "holds"
    pair = studies.pair_text(found["pairs"][0])
    assert pair.startswith("nginx-cache/varnish 1.88x, 95% CI ") and pair.endswith(": holds")
    markdown = render_markdown(report)
    assert "### The studies" in markdown and "95% CI" in markdown
    assert "  - note: server and generator shared the machine's 2 cores" in markdown
    page = render_html(report)
    assert pair in page and "server and generator shared the machine&#39;s 2 cores" in page
    assert "<td>holds</td>" in page


MQTT = "test_mqtt_qos2.py::test_mqtt_qos2"


def mqtt_entry(server: str, users: int, *tps: float) -> dict:
    """An MQTT QoS 2 run paced at 500 ms: its repetitions' seed-002 throughput."""
    repetitions = [
        {"repetition": i, "instance": i, "rps": users * 2.0, "mqtt": {"tps": value,
         "interval_s": 0.5, "users": users}}
        for i, value in enumerate(tps)
    ]  # fmt: skip
    return {
        **entry(MQTT, server, "telemetry/<clientId>", users, users * 2.0),
        "repetitions": repetitions,
    }


def test_seed_002s_mqtt_collapse_is_judged_on_the_share_of_the_offered_rate_stored() -> None:
    servers = ("go-mqtt", "node-mqtt", "tomcat-mqtt")
    kept = [mqtt_entry(s, 800, 1_590, 1_585) for s in servers]
    (line,) = studies.compare(kept)
    assert line["metric"] == "tps" and line["study_users"] == 800 and line["kept"] is True
    assert line["collapse"]["reproduced"] == []
    assert line["collapse"]["study"]["go-mqtt"] == 680 / 1_600
    text = studies.verdict_text(line)
    assert text.startswith("every server kept the offered rate")
    assert "the study's collapse (its servers stored 22%-42% of the offered rate): not " in text
    # node stores three quarters of the offered 2,000 msg/s: the collapse, for it alone
    fell = [mqtt_entry("go-mqtt", 1000, 1_990, 1_985), mqtt_entry("node-mqtt", 1000, 1_500, 1_490)]
    (line,) = studies.compare(fell)
    assert line["kept"] is False and line["collapse"]["reproduced"] == ["node-mqtt"]
    assert studies.verdict_text(line).endswith("reproduced here for node-mqtt 75%")
    # below the study's 800 users there is no collapse to judge
    (low,) = studies.compare([mqtt_entry(s, 200, 399, 400) for s in servers])
    assert low["study_users"] == 600 and "collapse" not in low
    assert (
        studies.verdict_text(low) == "every server kept the offered rate: no ranking at this load"
    )
