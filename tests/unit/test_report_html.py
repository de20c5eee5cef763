"""The HTML report: well-formed, escaped, one section per measurement, finite charts."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pytest_webperf.models.measurement import Measurement, RunResult, Verdict
from pytest_webperf.models.mqtt import Delivery, MqttResult
from pytest_webperf.models.samples import GeneratorSample, Latency, ResourceSample, Snapshot
from pytest_webperf.models.workload import Workload
from pytest_webperf.report.html.page import render_html, write_html
from pytest_webperf.report.json_report import report
from pytest_webperf.stats.histogram import Histogram

VOID = {"meta", "br", "input", "img", "hr", "link", "col", "wbr"}


def run(
    rep: int,
    *,
    seconds: int = 5,
    rps: float = 1000.0,
    parts: Sequence[str] = ("nginx",),
    errors: int = 0,
    warmup: int = 2,
    seed: int = 0,
    with_cgroup: bool = True,
    mqtt: MqttResult | None = None,
) -> RunResult:
    """A plausible repetition built from the models (as the plugin builds them)."""
    rnd = random.Random(seed * 100 + rep)
    histogram = Histogram()
    histogram.record_many(int(rnd.lognormvariate(7, 0.8)) for _ in range(int(rps) * seconds // 10))
    series = tuple(
        Snapshot(
            t=t + 1.0,
            elapsed=1.0,
            users=50,
            requests=int(rps * rnd.uniform(0.8, 1.2)),
            errors=errors if t == 2 else 0,
            timeouts=errors // 2 if t == 2 else 0,
            bytes=20_000,
            p50_ms=1.0 + rnd.random(),
            p95_ms=4 + rnd.random(),
            p99_ms=9 + rnd.random() * 3,
        )
        for t in range(seconds)
    )
    resources = tuple(
        ResourceSample(
            t=float(t),
            part=part,
            cpu_percent=rnd.uniform(40, 90) * (i + 1),
            rss_mb=30 + t * 2 + 40 * i,
            processes=3,
            threads=3,
            cgroup_cpu_percent=rnd.uniform(40, 95) if with_cgroup else None,
            cgroup_memory_mb=25 + t * 2 if with_cgroup else None,
        )
        for t in range(-warmup, seconds + 1)
        for i, part in enumerate(parts)
    )
    generator = tuple(
        GeneratorSample(t=float(t), cpu_percent=rnd.uniform(60, 99), processes=2)
        for t in range(-warmup, seconds + 1)
    )
    requests = sum(s.requests for s in series)
    return RunResult(
        repetition=rep,
        concurrency=50,
        duration_s=float(seconds),
        requests=requests,
        errors=errors,
        timeouts=errors // 2,
        connect_errors=0,
        bytes=20_000 * seconds,
        latency=Latency.of(histogram),
        series=series,
        histogram=histogram,
        resources=resources,
        generator=generator,
        error_kinds={"HTTP 503": errors} if errors else {},
        server_cpu_seconds=requests * 150e-6,
        mqtt=mqtt,
    )


def measurement(
    nodeid: str = "suites/test_x.py::test_hello[nginx-c50]",
    *,
    name: str = "GET /x",
    server: str = "nginx",
    concurrency: int = 50,
    runs: Sequence[RunResult] = (),
    verdict: Verdict | None = None,
) -> Measurement:
    return Measurement(
        nodeid=nodeid,
        name=name,
        server=server,
        concurrency=concurrency,
        workload=Workload(path="/x"),
        runs=tuple(runs or (run(1), run(2))),
        target={"kind": "container", "url": "http://127.0.0.1:1"},
        verdict=verdict or Verdict("no-baseline", notes=("no baseline",)),
    )


def make_report(measurements: Sequence[Measurement]) -> dict[str, Any]:
    return report(
        measurements,
        {
            "config": {"concurrency": [50], "repeat": 2},
            "machine": {"cpu_model": "Test CPU", "cores": 2},
        },
    )


class TagChecker(HTMLParser):
    """Fails on a closing tag that does not close the innermost open element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.starts: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, attrs))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check(page: str) -> TagChecker:
    checker = TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    return checker


def coordinates(page: str) -> list[str]:
    """Every number in an SVG geometry attribute or path."""
    values = re.findall(r'\b(?:x|y|x1|x2|y1|y2|width|height|cx|cy)="([^"]*)"', page)
    values += [
        n
        for d in re.findall(r'\bd="([^"]*)"', page)
        for n in re.findall(r"[-+0-9.a-zA-Z]+", re.sub(r"[MLVHZ]", " ", d))
    ]
    return values


def assert_finite(page: str) -> None:
    numbers = coordinates(page)
    assert numbers
    for value in numbers:
        assert math.isfinite(float(value)), value


def test_a_report_is_well_formed_with_one_section_per_measurement() -> None:
    measurements = [
        measurement(f"suites/test_x.py::test_hello[nginx-c{c}]", concurrency=c)
        for c in (10, 50, 100)
    ]
    page = render_html(make_report(measurements))
    assert page.startswith("<!DOCTYPE html>")
    checker = check(page)
    sections = [a for tag, a in checker.starts if tag == "section"]
    assert [dict(a)["id"] for a in sections] == ["m0", "m1", "m2", "settings"]
    assert "Test CPU" in page.split('id="settings"')[1]  # the machine, last
    assert_finite(page)


def test_the_page_is_self_contained() -> None:
    page = render_html(make_report([measurement()]))
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_text_from_the_report_is_escaped() -> None:
    nasty = "suites/t.py::test_x[<script>alert(\"x\")</script>-'q'&amp]"
    verdict = Verdict("regression", reasons=("p95 <b>+40%</b> & more",))
    page = render_html(
        make_report([measurement(nasty, name="GET /a?b=<i>", server='se"rv', verdict=verdict)])
    )
    check(page)
    assert "<script>alert" not in page
    assert "<b>+40%" not in page and "<i>" not in page
    checker = check(page)
    assert any(nasty in t for t in checker.text)  # shown as written, whatever the entities
    assert any("p95 <b>+40%</b> & more" in t for t in checker.text)


def test_verdicts_are_shown_with_their_status_and_reasons() -> None:
    page = render_html(
        make_report(
            [
                measurement(verdict=Verdict("regression", reasons=("rps -12% (limit -5%)",))),
                measurement(
                    "suites/t.py::test_y",
                    verdict=Verdict("generator-bound", notes=("generator at 99% CPU",)),
                ),
            ]
        )
    )
    assert 'class="badge regression"' in page and 'class="badge generator-bound"' in page
    assert "rps -12% (limit -5%)" in page and "generator at 99% CPU" in page


def test_empty_resources_missing_fields_zero_requests_single_repetition() -> None:
    bare = RunResult(
        repetition=1,
        concurrency=50,
        duration_s=3.0,
        requests=0,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=Latency.of(Histogram()),
        series=tuple(
            Snapshot(
                t=t,
                elapsed=1.0,
                users=50,
                requests=0,
                errors=0,
                timeouts=0,
                bytes=0,
                p50_ms=None,
                p95_ms=None,
                p99_ms=None,
            )
            for t in (1.0, 2.0, 3.0)
        ),
    )
    data = make_report([measurement(runs=[bare], verdict=Verdict("pass"))])
    entry = data["tests"][0]
    for key in ("target", "workload", "rps"):
        del entry[key]
    for key in ("cpu_per_req_us", "mqtt", "error_kinds", "histogram", "resources"):
        del entry["repetitions"][0][key]
    page = render_html(data)
    check(page)
    assert_finite(page)
    assert "no data" in page  # the empty charts say so instead of drawing nothing
    assert 'type="checkbox"' not in page  # nothing to toggle with one repetition


def test_an_entry_without_repetitions_or_verdict_still_renders() -> None:
    page = render_html({"tests": [{"nodeid": "a::b", "name": "x", "server": "s"}]})
    check(page)
    assert "No repetition was recorded" in page and "no verdict" in page


def test_an_empty_report_renders() -> None:
    page = render_html({})
    check(page)
    assert "Nothing was measured" in page


def test_resources_are_charted_per_part_with_the_warm_up_marked() -> None:
    runs = [run(1, parts=("nginx-cache", "apache")), run(2, parts=("nginx-cache", "apache"))]
    page = render_html(make_report([measurement(runs=runs)]))
    for title in ("Server CPU — nginx-cache", "Server memory — apache", "Load generator CPU"):
        assert f"<figcaption>{title}</figcaption>" in page
    assert 'class="warmup"' in page
    assert_finite(page)


def test_comparisons_put_servers_side_by_side_per_workload() -> None:
    measurements = [
        measurement(f"s.py::t[{srv}-c{c}]", server=srv, concurrency=c, name=w)
        for w in ("GET /a", "GET /b")
        for srv in ("nginx", "node")
        for c in (10, 50)
    ]
    page = render_html(make_report(measurements))
    assert page.count(": Requests per second</figcaption>") == 2
    assert page.count(": Latency percentiles</figcaption>") == 2
    assert "<title>node, 50 users: " in page  # one bar per server per user count


def test_mqtt_figures_are_shown() -> None:
    latency = Latency(1, 2, 3, 4, 5, 6, 7)
    mqtt = MqttResult(
        qos=2,
        interval_s=0.5,
        users=10,
        published=1000,
        acked=1000,
        unacked=0,
        observer=Delivery("observer", 1002, 1000, 2, 0, 0, 0, latency=latency),
        tps=97.5,
    )
    page = render_html(make_report([measurement(runs=[run(1, mqtt=mqtt)])]))
    assert "MQTT accounting" in page and "dup 2" in page  # table.delivery's words
    assert "MQTT throughput" in page


def test_fifty_measurements_stay_a_reasonable_size() -> None:
    runs = [run(r, seconds=20, rps=200, seed=1) for r in range(1, 6)]
    measurements = [measurement(f"s.py::t[c{i}]", concurrency=i, runs=runs) for i in range(50)]
    page = render_html(make_report(measurements))
    assert len(page.encode()) < 6_000_000
    assert " open>" not in page  # a big report opens with its charts folded


def test_write_html_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.html"
    write_html(target, make_report([measurement()]))
    first = target.read_text()
    write_html(target, {"tests": []})
    assert target.read_text() != first and "Nothing was measured" in target.read_text()
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]
    assert target.stat().st_mode & 0o777 == 0o644
