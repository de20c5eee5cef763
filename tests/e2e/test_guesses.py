"""What a user guesses where the docs are silent: each wrong guess fails its test in one
line that names what to change, none passes, none shows a traceback (issue 31)."""

from __future__ import annotations

import json
import os
import re

import pytest
from tests.e2e.hello_server import HELLO_SERVER

pytest_plugins = ["pytester"]
QUICK = ["-p", "no:locust", "-W", "error", "--webperf-duration=1s", "--webperf-warmup=0"]
USERS = """
from locust import HttpUser, task

class Broken(HttpUser):
    def __init__(self, *args, **kwargs):
        raise ValueError("no user for you")

    @task
    def hello(self):
        self.client.get("/hello")
"""
BROKEN_IMPORT = 'raise ImportError("this module cannot be imported")\n'
# (test body, the one line it must fail with): each a guess a user made
GUESSES = {
    "concurrency_list": (
        "webperf.http(target, concurrency=[10, 50])",
        "test_guesses.py:*: OptionError: webperf.http(concurrency=[[]10, 50[]]): concurrency "
        "is one whole number of users >= 1; several concurrencies go in "
        "@pytest.mark.webperf(concurrency=[[]10, 50[]])*",
    ),
    "duration_words": (
        'webperf.http(target, duration="5 seconds")',
        "*OptionError: webperf.http(duration='5 seconds'): duration is a duration > 0 "
        "(e.g. '5s', '500ms', 2.5)",
    ),
    "repeat_zero": (
        "webperf.http(target, repeat=0)",
        "*OptionError: webperf.http(repeat=0): repeat is a whole number of repetitions >= 1*",
    ),
    "rate_string": (
        'webperf.http(target, rate="100")',
        "*OptionError: webperf.http(rate='100'): rate is a number of requests per second > 0*",
    ),
    "user_unknown": (
        'webperf.http(target, user="turbo")',
        "*OptionError: webperf.http(user='turbo'): user is 'auto', 'native', 'lean', 'fast' "
        "or 'module:UserClass'*",
    ),
    "env_int": (
        'webperf.process([sys.executable, "server.py"], env={"WORKERS": 4})',
        "*OptionError: webperf.process(env={'WORKERS': 4}): env is a mapping of environment "
        "names to strings*WORKERS=4 is not a string (write '4')",
    ),
    "health_url": (
        'webperf.process([sys.executable, "server.py"], health="http://127.0.0.1:8080/h")',
        "*OptionError: webperf.process(health='http://127.0.0.1:8080/h'): health is a path "
        "on the target*not a URL*",
    ),
    "timeout_string": (
        'webperf.process([sys.executable, "server.py"], startup_timeout="30s")',
        "*OptionError: webperf.process(startup_timeout='30s'): startup_timeout is a number "
        "of seconds > 0*",
    ),
    "server_zero_cpus": (
        'webperf.server("nginx", cpus=0)',
        "*OptionError: webperf.server(cpus=0): cpus is a number of CPUs > 0 (e.g. 1.5)",
    ),
    "mqtt_qos": (
        "webperf.mqtt(target, qos=3)",
        "*OptionError: webperf.mqtt(qos=3): qos is 0, 1 or 2",
    ),
    "user_crashes": (
        'webperf.http(target, user="users:Broken")',
        "*SwarmError: starting a user of 'users:Broken' failed: ValueError: no user for you "
        "(at users.py:*)",
    ),
    "user_missing": (
        'webperf.http(target, user="users:Missing")',
        "*Error: the user class 'users:Missing': module 'users' has no 'Missing', not a "
        "Locust User class*",
    ),
    "user_import_fails": (
        'webperf.http(target, user="broken_import:Anything")',
        "*Error: importing 'broken_import' failed: ImportError: this module cannot be "
        "imported (at *broken_import.py:1)",
    ),
}


def test_every_guess_fails_in_one_line_without_a_traceback(pytester: pytest.Pytester) -> None:
    tests = ["import sys", ""]
    for name, (call, _) in GUESSES.items():
        tests += [
            f"def test_{name}(webperf):",
            '    target = webperf.process([sys.executable, "server.py"], health="/")',
            f"    {call}",
            "",
        ]
    pytester.makepyfile(
        server=HELLO_SERVER, users=USERS, broken_import=BROKEN_IMPORT, test_guesses="\n".join(tests)
    )
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(*QUICK, "--webperf-concurrency=2", "--webperf-repeat=1")
    result.assert_outcomes(failed=len(GUESSES))
    text = result.stdout.str()
    no_traceback(text)
    assert "webperf regression" not in text  # none ran a measurement to its verdict
    for name, (_, line) in GUESSES.items():
        section = re.search(rf"_+ test_{name}\[c2\] _+\n(.*?)\n(?=_+ test_|=+ )", text, re.S)
        assert section is not None, name
        lines = section.group(1).strip().splitlines()
        assert len(lines) == 1, (name, lines)  # one line, said once
        assert re.fullmatch(_regex(line), lines[0]), (name, lines[0])


def no_traceback(text: str) -> None:
    """Neither Python's traceback nor pytest's (source lines, ``E`` lines, frames)."""
    assert "Traceback" not in text and "During handling" not in text
    assert (
        "\nE   " not in text
        and "pytest_webperf/" not in text
        and ".py:"
        not in "".join(
            line for line in text.splitlines() if line.startswith(("/", "src/", ".venv"))
        )
    )


def _regex(pattern: str) -> str:
    """fnmatch's * and [[] / []] as a regex."""
    escaped = re.escape(pattern.replace("[[]", "\0").replace("[]]", "\1"))
    return escaped.replace(r"\*", ".*").replace("\0", r"\[").replace("\1", r"\]")


KEYED = """
import sys
import pytest

{marker}
def test_hello(webperf):
    target = webperf.process([sys.executable, "server.py"], health="/hello")
    webperf.http(target, path="/hello"{kwarg})
"""


def test_the_baseline_key_follows_the_user_however_it_was_given(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved with --webperf-user=fast, the baseline is found when fast comes from the
    environment, the ini file, a marker or user=, and not with the default user."""
    pytester.makepyfile(server=HELLO_SERVER)
    args = [*QUICK, "--webperf-concurrency=2", "--webperf-repeat=1"]

    def run(*extra: str, marker: str = "", kwarg: str = "") -> pytest.RunResult:
        pytester.makepyfile(test_keyed=KEYED.format(marker=marker, kwarg=kwarg))
        return pytester.runpytest_subprocess(*args, *extra)

    saved = run("--webperf-user=fast", "--webperf-save")
    saved.assert_outcomes(passed=1)
    [directory] = [p.name for p in (pytester.path / "baselines").iterdir()]
    missing = "*no baseline (run with --webperf-save)*"
    ways = {
        "marker": {"marker": '@pytest.mark.webperf(user="fast")'},
        "keyword": {"kwarg": ', user="fast"'},
    }
    for way, edit in ways.items():
        result = run(**edit)
        assert missing not in result.stdout.str(), way
        result.stdout.fnmatch_lines([f"*machine * (tests with another HTTP user: {directory})"])
    monkeypatch.setenv("WEBPERF_USER", "fast")
    result = run()
    result.stdout.fnmatch_lines([f"*; machine {directory}"])
    assert missing not in result.stdout.str(), "environment"
    monkeypatch.delenv("WEBPERF_USER")
    result = run()  # the default user: another id, no baseline
    result.stdout.fnmatch_lines([missing])
    pytester.makeini("[pytest]\nwebperf_user = fast\n")
    result = run()
    result.stdout.fnmatch_lines([f"*; machine {directory}"])
    assert missing not in result.stdout.str(), "ini"
    assert [p.name for p in (pytester.path / "baselines").iterdir()] == [directory]


def test_a_user_that_raises_in_a_generator_worker_fails_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """With --webperf-workers=2 the users start in worker processes: the first
    failure is said once, naming the worker, as fast as the spawn."""
    pytester.makepyfile(
        server=HELLO_SERVER,
        users=USERS,
        test_workers="""
import sys

def test_crash(webperf):
    target = webperf.process([sys.executable, "server.py"], health="/")
    webperf.http(target, user="users:Broken")
""",
    )
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        *QUICK, "--webperf-concurrency=2", "--webperf-repeat=1", "--webperf-workers=2"
    )
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    no_traceback(text)
    lines = [line for line in text.splitlines() if "SwarmError" in line and "FAILED" not in line]
    assert len(lines) == 1
    assert re.fullmatch(
        r"test_workers\.py:\d+: SwarmError: starting a user of 'users:Broken' failed: "
        r"ValueError: no user for you \(at users\.py:\d+\) \(in worker\d\)",
        lines[0],
    ), lines[0]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to tell one from all")
def test_a_threaded_python_server_gets_one_core_of_capacity(pytester: pytest.Pytester) -> None:
    """The issue's estimate read as a fact: a ThreadingHTTPServer has a thread per
    connection, but runs Python one thread at a time: one core, said to be an estimate."""
    pytester.makepyfile(
        server=HELLO_SERVER,
        test_threaded="""
import sys

def test_threaded(webperf):
    target = webperf.process([sys.executable, "server.py"], health="/")
    webperf.http(target, path="/")
""",
    )
    result = pytester.runpytest_subprocess(
        *QUICK,
        "--webperf-duration=3s",  # samples of the measured phase, on a busy machine too
        "--webperf-concurrency=4",
        "--webperf-repeat=1",
        "--webperf-json=out.json",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test * workload * cpu/req us * capacity~ * verdict"])
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    (rep,) = entry["repetitions"]
    measured = [s for s in rep["resources"] if s["t"] >= 0]
    assert measured, rep["resources"]
    assert max(s["threads"] for s in measured) > 2, measured  # a thread per connection
    assert {s["usable_threads"] for s in measured} == {1}, measured
    assert rep["server_cores"] == 1.0, measured
    assert rep["capacity_estimate"] is True
    assert rep["capacity_rps"] == pytest.approx(1e6 / rep["cpu_per_req_us"], rel=1e-6)


@pytest.mark.parametrize(
    ("marker", "line"),
    [
        (
            'duration="soon"',
            "test_marked.py::test_marked: @pytest.mark.webperf duration='soon': 'soon' is "
            "not a duration (examples: 20s, 500ms, 2m)",
        ),
        ("users=5", "test_marked.py::test_marked: @pytest.mark.webperf: unknown setting 'users'*"),
        ("5", "test_marked.py::test_marked: @pytest.mark.webperf takes keywords only"),
    ],
)
def test_a_bad_marker_is_one_line_before_anything_runs(
    pytester: pytest.Pytester, marker: str, line: str
) -> None:
    pytester.makepyfile(
        test_marked=f"""
import pytest

@pytest.mark.webperf({marker})
def test_marked(webperf):
    raise AssertionError("never runs")
"""
    )
    result = pytester.runpytest_subprocess(*QUICK)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_marked.py*", line, "*short test summary*"])
    text = result.stdout.str()
    no_traceback(text)
    said = re.search(r"ERROR collecting test_marked\.py _+\n(.*?)\n=+ short", text, re.S)
    assert said is not None and len(said.group(1).strip().splitlines()) == 1, text
    assert "never runs" not in text
