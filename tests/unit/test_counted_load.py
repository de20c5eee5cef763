"""A counted measurement's load and settings, and what the reports say of it: count from
the call, the run's option or a marker; its plan (concurrency 1, 2 fresh instances at
least, no sampling profiler beside callgrind); the loads it refuses in one line; its
figures and cost in every renderer, its profile in instructions."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.handle import Webperf
from pytest_webperf.fixture.loads import counted_load, grpc_load, http_load
from pytest_webperf.measurement.count import CountedRequests
from pytest_webperf.profiling import valgrind
from pytest_webperf.report import counts, markdown, terminal, verdicts
from pytest_webperf.report.html import flame
from pytest_webperf.report.html import tables as html_tables
from pytest_webperf.settings.config import RunConfig, resolve
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.process import ProcessTarget


def _nothing(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("not expected here")


def handle(config: RunConfig) -> Webperf:
    return Webperf(
        nodeid="t.py::test",
        concurrency=100,
        config=config,
        catalog=_nothing,
        verdicts=_nothing,
        monitor_factory=_nothing,
    )


def call(**given: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict.fromkeys(
        (
            "path",
            "method",
            "body",
            "headers",
            "mix",
            "expect_status",
            "expect_body",
            "name",
            "concurrency",
            "duration",
            "warmup",
            "repeat",
            "user",
            "interval",
            "rate",
            "requests",
            "arrival_rate",
            "tls_ca",
            "count",
        )
    )
    args.update(keepalive=True, tls_resume=False, path="/hello", user="lean")
    args.update(given)
    return args


TARGET = ProcessTarget([sys.executable, "app.py"], name="app")


@pytest.fixture(autouse=True)
def valgrind_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether this machine has Valgrind is not what these tests are about."""
    monkeypatch.setattr(valgrind, "problem", lambda: None)


def test_no_valgrind_is_said_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(valgrind, "problem", lambda: "no valgrind here: apt-get install valgrind")
    with pytest.raises(OptionError, match="app: no valgrind here: apt-get install valgrind"):
        counted_load(handle(RunConfig())._measurer, TARGET, call(count=True))


def test_the_option_the_ini_and_a_marker_turn_counting_on() -> None:
    assert resolve({"count": True}, {}, {}).count is True
    assert resolve({}, {}, {"count": "true"}).count is True
    assert resolve({}, {"WEBPERF_COUNT": "1"}, {}).count is True
    assert RunConfig().with_overrides({"count": True}, "@pytest.mark.webperf").count is True
    with pytest.raises(OptionError, match="count"):
        RunConfig().with_overrides({"count": "sometimes"}, "@pytest.mark.webperf")


def test_a_counted_plan() -> None:
    measurer = handle(RunConfig(repeat=5))._measurer
    kind, plan, name = http_load(measurer, TARGET, call(count=True))
    assert isinstance(kind, CountedRequests) and kind.callers == 40
    assert (plan.concurrency, plan.repeat, plan.profile, plan.workers) == (1, 2, "off", 1)
    assert name == "GET /hello counted" and kind.workload.requests == 0  # sized by a probe
    _, plan, _ = counted_load(measurer, TARGET, call(count=True, repeat=1, concurrency=2))
    assert (plan.concurrency, plan.repeat) == (2, 2)  # two fresh instances at least
    ran = handle(RunConfig(repeat=4, sources={"repeat": "--webperf-repeat"}))._measurer
    assert counted_load(ran, TARGET, call(count=True))[1].repeat == 4
    off = handle(RunConfig(profile="off"))._measurer
    assert counted_load(off, TARGET, call(count=True))[0].callers == 0


def test_the_runs_count_option_counts_and_the_call_wins() -> None:
    measurer = handle(RunConfig(count=True))._measurer
    assert isinstance(http_load(measurer, TARGET, call())[0], CountedRequests)
    assert not isinstance(http_load(measurer, TARGET, call(count=False))[0], CountedRequests)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"interval": "1s"}, "leave out interval="),
        ({"rate": 10.0}, "leave out rate="),
        ({"user": "fast"}, "not by 'fast'"),
    ],
)
def test_what_a_counted_measurement_cannot_send_is_refused(
    given: dict[str, Any], said: str
) -> None:
    measurer = handle(RunConfig())._measurer
    with pytest.raises(OptionError, match=said):
        counted_load(measurer, TARGET, call(count=True, **given))


def test_a_mix_is_counted_in_its_fixed_order_and_a_grpc_call_over_http2() -> None:
    measurer = handle(RunConfig())._measurer
    mix = [Webperf.request("/a", weight=9), Webperf.request("/b", method="POST", weight=1)]
    kind, _, _ = counted_load(measurer, TARGET, call(count=True, mix=mix, path=None))
    assert kind.workload.ordered and kind.workload.sent(100) == {
        ("GET", "/a"): 90,
        ("POST", "/b"): 10,
    }
    grpc = {**call(), "method": "/test.Svc/Echo", "message": b"", "metadata": None}
    grpc.update(deadline=None, streams=None, count=True)
    for key in ("path", "body", "headers", "expect_status", "keepalive", "tls_resume"):
        grpc.pop(key)
    kind, _, name = grpc_load(measurer, TARGET, {**grpc, "user": None})
    assert isinstance(kind, CountedRequests) and kind.workload.http2, kind
    assert kind.workload.entries()[0].grpc and name.endswith("counted")


@pytest.mark.parametrize("source", ["--webperf-count", "t.py::test: @pytest.mark.webperf"])
@pytest.mark.parametrize(
    ("method", "said"),
    [("websocket", "the stream loop sends messages for a duration"), ("sse", "no N requests")],
)
def test_what_cannot_be_counted_is_refused_in_one_line_naming_where_count_came_from(
    source: str, method: str, said: str
) -> None:
    config = RunConfig(count=True, sources={"count": source})
    with pytest.raises(OptionError) as raised:
        getattr(handle(config), method)(TARGET)
    message = str(raised.value)
    assert "\n" not in message and said in message, message
    where = "@pytest.mark.webperf" if "mark" in source else "--webperf-count"
    assert f"webperf.{method} cannot be counted (count=True from {where})" in message


def test_a_running_server_cannot_be_counted() -> None:
    measurer = handle(RunConfig())._measurer
    with pytest.raises(OptionError, match="already running"):
        counted_load(measurer, ExternalTarget("http://127.0.0.1:9"), call(count=True))


def rep(instructions: float, *, tool: str = "callgrind (valgrind-3.19.0)") -> dict[str, Any]:
    return {
        "repetition": 1,
        "counts": {
            "requests": 1000,
            "instructions_per_req": instructions,
            "allocs_per_req": 0.002,
            "syscalls_per_req": 3.007,
            "syscall_tool": "perf stat (raw_syscalls:sys_enter)",
            "ctx_switches_per_req": 1.0,
            "run_s": 4.5,
            "slowdown": 12.0,
            "wall_slowdown": 5.2,
            "tool": tool,
            "notes": ["counted by x", "native code: nothing to pin"],
        },
    }


PROFILE = {
    "unit": "Ir",
    "tools": ["callgrind (valgrind-3.19.0)"],
    "pairs": 2,
    "tested": 15,
    "base_ir": 14211.0,
    "change_ir": 14391.0,
    "changes": [
        {
            "function": "hash_work (server)",
            "change_ir": 180.0,
            "low_ir": 180.0,
            "high_ir": 180.0,
            "base_ir": 2000.0,
            "change_side_ir": 2180.0,
            "base_inclusive_ir": 2000.0,
            "change_inclusive_ir": 2180.0,
            "change_total_ir": 180.0,
            "credible": True,
        }
    ],
    "requests": {"A": 2000, "B": 2000},
    "base_folded": "main;serve;hash_work 4000000\nmain;serve 24000000\n",
    "change_folded": "main;serve;hash_work 4360000\nmain;serve 24000000\n",
    "notes": [],
}
ENTRY = {
    "nodeid": "t.py::test",
    "name": "GET /work counted",
    "against": {"ref": "HEAD~1"},
    "repetitions": [rep(14391.0), rep(14391.0)],
    "base_repetitions": [rep(14211.0), rep(14211.0)],
    "verdict": {
        "status": "regression",
        "checks": [
            {
                "check": "instructions_per_req:1%",
                "metric": "instructions_per_req",
                "outcome": "fail",
                "baseline": 14211.0,
                "current": 14391.0,
                "change": 0.012666,
                "low": 0.012666,
                "high": 0.012666,
                "detectable": 0.0,
            }
        ],
    },
    "profile": PROFILE,
}


def test_the_terminal_says_each_sides_counts_and_what_they_cost() -> None:
    lines = counts.lines([ENTRY])
    assert lines[0].startswith("t.py::test [GET /work counted]: counted, 1,000 requests")
    assert lines[1] == (  # the entry's one check judges instructions only
        "  A: instructions 14,211.0, allocations (not judged) 0.002, syscalls (not judged) 3.007 "
        "(perf stat (raw_syscalls:sys_enter)), ctx switches (not judged) 1.000 per request"
    )
    assert "4 repetition(s) took 18.0 s" in lines[3] and "slowdown 12x" in lines[3]
    assert "  native code: nothing to pin" in lines and not any("counted by" in x for x in lines)
    assert counts.lines([{**ENTRY, "repetitions": [{"repetition": 1}]}]) == []


def test_a_failed_counted_check_names_the_function_that_grew() -> None:
    text = "\n".join(terminal.summary({"tests": [ENTRY]}))
    assert "instructions_per_req:1%" in text and "+1.27%" in text and ">= 0.00%" in text
    assert "    +180.0 Ir/req  hash_work (server) (inclusive +180.0)" in text
    lines = verdicts.profile_lines(ENTRY)
    assert lines[0] == "profile (B - A, instructions per request, counted):"
    unnamed = {**PROFILE, "changes": [{**PROFILE["changes"][0], "credible": False}]}  # type: ignore[dict-item]
    assert "no function named" in verdicts.profile_lines({**ENTRY, "profile": unnamed})[0]


def test_markdown_and_html_show_the_counts_and_the_profile_in_instructions() -> None:
    text = markdown.render_markdown({"tests": [ENTRY]})
    assert "### Counted" in text and "hash\\_work (server)" in text
    table = html_tables.profile_table(ENTRY)
    assert table is not None and table.rows[0].cells[3][0] == "+180.0"
    assert "2 pairs" in html_tables.profile_note(ENTRY)
    graph = flame.flame_graph(
        PROFILE["base_folded"],
        PROFILE["change_folded"],
        2000,
        2000,
        instructions=True,  # type: ignore[arg-type]
    )
    assert graph is not None and "instructions per request (+180.00)" in str(graph)


def test_a_source_frame_reads_by_its_own_and_unnamed_code_by_its_caller_with_the_fix() -> None:
    own = {"function": "render_work (app.py)", "change_ir": 2.0, "own_ir": 51193.3}
    own["change_total_ir"] = 51193.3
    assert counts.change_line(own) == (
        "+51,193.3 Ir/req  render_work (app.py) (with the library, runtime and unnamed code "
        "it calls; inclusive +51,193.3)"
    )
    held = {
        "function": "deflate (libz.so.1.2.13) > [unknown] (libz.so.1.2.13)",
        "change_ir": 568606.0,
        "change_total_ir": 568598.0,
        "unnamed": "libz.so.1.2.13",
    }
    line = counts.change_line(held, {"libz.so.1.2.13": "install zlib1g-dbgsym"})
    assert line.endswith(
        "(inclusive +568,598.0): libz.so.1.2.13 has no symbols; install zlib1g-dbgsym"
    )
    noted = {**PROFILE, "notes": ["Python functions are not named: CPython 3.11 ..."]}
    assert (
        counts.profile_lines(noted, 3)[-1]
        == "  note: Python functions are not named: CPython 3.11 ..."
    )
