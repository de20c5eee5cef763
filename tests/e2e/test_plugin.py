"""What a user sees: the plugin run through pytest in a subprocess, against real targets."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.interrupt import take_sigint

from pytest_webperf.targets.container import MANAGED, OWNER, sweep_stale_containers
from pytest_webperf.targets.engine import docker_client

pytest_plugins = ["pytester"]
QUICK = ["-p", "no:locust", "-W", "error", "--webperf-duration=1s", "--webperf-warmup=0.5s"]

HELLO = """
def test_hello(webperf):
    target = webperf.server("nginx")
    result = webperf.http(target, path="/hello")
    assert result.rps > 0
"""


def our_containers(owner_pid: int) -> list[str]:
    # listed, not inspected one by one: a parallel worker's container may go meanwhile
    containers = docker_client().api.containers(all=True, filters={"label": MANAGED})
    return [
        str(c["Names"][0]).lstrip("/")
        for c in containers
        if (c.get("Labels") or {}).get(OWNER, "").startswith(f"{owner_pid}:")
    ]


def test_concurrency_list_parametrizes_and_reports(pytester: pytest.Pytester, engine: None):
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess(
        *QUICK, "--webperf-concurrency=5,20", "--webperf-repeat=2", "--webperf-json=out.json", "-v"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            # progress lines come between a test's name and its result, as live logs do
            "*test_hello[[]c5[]]*",
            "webperf test_hello[[]c5[]] GET /hello: repetition 1/2 done, * req/s, 0 errors*",
            "*PASSED*",
            "*test_hello[[]c20[]]*",
            "webperf test_hello[[]c20[]] GET /hello: repetition 2/2 done*",
            "*PASSED*",
            "*= webperf =*",
            "test * workload * server * users * req/s * requests * errors * timeouts * p50 ms*",
            "test_hello[[]c5[]] * GET /hello * nginx * 5 *",
            "test_hello[[]c20[]] * GET /hello * nginx * 20 *",
            "*no baseline (run with --webperf-save)*",
            "webperf: JSON report written to out.json",
        ]
    )
    report = json.loads((pytester.path / "out.json").read_text())
    assert report["schema"] == 1
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert set(tests) == {"test_static.py::test_hello[c5]", "test_static.py::test_hello[c20]"}
    for test in tests.values():
        assert test["server"] == "nginx" and len(test["repetitions"]) == 2
        for run in test["repetitions"]:
            assert run["rps"] > 0 and run["errors"] == 0
            assert run["rps"] == pytest.approx(run["requests"] / run["duration_s"], rel=0.05)
            assert run["duration_s"] == pytest.approx(1.0, rel=0.2)
            assert run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"]
            assert sum(s["requests"] for s in run["series"]) == run["requests"]
    assert our_containers(os.getpid()) == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--webperf-concurrency=abc", "*--webperf-concurrency*'abc' is not a whole number*"),
        ("--webperf-concurrency=0", "*--webperf-concurrency*'0' must be at least 1*"),
        ("--webperf-concurrency=-5", "*--webperf-concurrency*must be at least 1*"),
        ("--webperf-duration=xyz", "*--webperf-duration*'xyz' is not a duration*"),
        ("--webperf-repeat=0", "*--webperf-repeat*must be at least 1*"),
    ],
)
def test_bad_option_is_a_usage_error(pytester: pytest.Pytester, option: str, message: str):
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess("-p", "no:locust", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_bad_ini_value_names_the_ini_option(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nwebperf_duration = soon\n")
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess("-p", "no:locust")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*webperf_duration*'soon' is not a duration*"])


def test_target_url_loads_a_running_server(pytester: pytest.Pytester, local_server: str):
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess(
        *QUICK,
        "--webperf-concurrency=4",
        "--webperf-repeat=1",
        f"--webperf-target-url={local_server}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_hello[[]c4[]] * GET /hello * nginx * 4 *"])


def test_remote_target_url_is_refused(pytester: pytest.Pytester):
    pytester.makepyfile(test_static=HELLO)
    result = pytester.runpytest_subprocess(
        *QUICK, "--webperf-target-url=http://192.0.2.1:80", "--webperf-repeat=1"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*is not a loopback address*--webperf-allow-remote-target*"])
    assert "Traceback" not in result.stdout.str()


def test_server_that_fails_to_start_shows_its_logs(pytester: pytest.Pytester, engine: None):
    broken = pytester.path / "catalog" / "broken"
    broken.mkdir(parents=True)
    (broken / "server.toml").write_text('name = "broken"\nstartup_timeout = 20\n')
    (broken / "Dockerfile").write_text(
        'FROM debian:bookworm-slim\nCMD ["sh", "-c", "echo boom: cannot bind $PORT >&2; exit 3"]\n'
    )
    pytester.makepyfile(
        test_broken="""
        def test_broken(webperf):
            webperf.http(webperf.server("broken"))
    """
    )
    result = pytester.runpytest_subprocess(*QUICK, f"--webperf-servers={broken.parent}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TargetError: broken is not running (status exited, exit code 3)*",
            "*last lines of the server's log*",
            "*boom: cannot bind*",
        ]
    )
    assert our_containers(os.getpid()) == []


@contextlib.contextmanager
def pytest_in_background(
    pytester: pytest.Pytester, duration: str
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A pytest run of HELLO in a subprocess, once its swarm is running: (process, its
    containers). The process is always reaped."""
    pytester.makepyfile(test_static=HELLO)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *QUICK,
            f"--webperf-duration={duration}",
            "--webperf-repeat=1",
            "--webperf-concurrency=5",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=take_sigint,  # noqa: PLW1509 (a signal disposition only)
    )
    try:
        names = wait_for_containers(process.pid)
        time.sleep(2)  # the swarm is running now
        yield process, names
    finally:
        process.kill()
        process.wait()


def wait_for_containers(pid: int, timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = our_containers(pid)
        if names:
            return names
        time.sleep(0.2)
    raise AssertionError(f"no container of pid {pid} appeared within {timeout}s")


def test_server_dying_mid_run_fails_the_test_with_logs(pytester: pytest.Pytester, engine: None):
    with pytest_in_background(pytester, "8s") as (process, names):
        docker_client().containers.get(names[0]).kill()
        output, _ = process.communicate(timeout=120)
    assert process.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "TargetDied: nginx died during the measurement: nginx is not running" in output
    assert our_containers(process.pid) == []


def test_ctrl_c_mid_run_leaves_no_container(pytester: pytest.Pytester, engine: None):
    with pytest_in_background(pytester, "30s") as (process, _):
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert "KeyboardInterrupt" in output
    assert our_containers(process.pid) == [], output


def test_containers_of_a_killed_run_are_swept(engine: None):
    client = docker_client()
    image = "debian:bookworm-slim"
    stale = client.containers.run(
        image,
        ["sleep", "300"],
        detach=True,
        network_mode="host",
        labels={MANAGED: "1", OWNER: "999999:1.00"},  # an owner that does not exist
    )
    try:
        assert stale.name in sweep_stale_containers()
        listed = client.api.containers(all=True)
        assert stale.name not in [str(c["Names"][0]).lstrip("/") for c in listed]
    finally:
        with contextlib.suppress(Exception):
            stale.remove(force=True)


def test_user_test_file_shape_works_in_repo_suites():
    """The suites directory is collected with the plugin and its ids end with -cN."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "suites/test_static_io.py",
            "--webperf-concurrency=100,500",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    assert ids and all(line.endswith(("-c100]", "-c500]")) for line in ids), ids


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_work_with_the_plugin_loaded(pytester: pytest.Pytester, flag: str):
    result = pytester.runpytest_subprocess("-p", "no:locust", flag)
    assert result.ret == 0
    if flag == "--help":
        result.stdout.fnmatch_lines(
            ["performance regression gates (pytest-webperf):", "*--webperf-compare-fail=*"]
        )


def test_advice_is_said_once_and_is_not_a_failure_reason(
    pytester: pytest.Pytester, local_server: str
):
    pytester.makepyfile(
        test_static="""
        import pytest

        def test_hello(webperf):
            webperf.http(webperf.server("nginx"), path="/hello")

        @pytest.mark.webperf(compare_fail="p99_ms<0.001")
        def test_strict(webperf):
            webperf.http(webperf.server("nginx"), path="/hello")
        """
    )
    result = pytester.runpytest_subprocess(
        *QUICK,
        "--webperf-concurrency=2,4",
        "--webperf-repeat=1",
        f"--webperf-target-url={local_server}",
    )
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    failures = out.split("= webperf =")[0]
    assert "breaks the limit p99_ms<0.001" in failures and "no baseline" not in failures
    result.stdout.fnmatch_lines(
        [
            "no baseline (run with --webperf-save)",
            "  applies to 4 measurements: test_static.py::test_hello[[]c2[]] [[]GET /hello[]], *",
        ]
    )
    assert out.count("no baseline (run with --webperf-save)") == 1


def test_progress_lines_reach_the_log_past_the_capture(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_progress="""
        from pytest_webperf.run.screen import progress_for
        from pytest_webperf.models.progress import RepetitionDone
        from pytest_webperf.report.live import PlainLines

        def test_progress(request):
            progress = progress_for(request.config)
            assert isinstance(progress, PlainLines)  # not a terminal
            progress.done(RepetitionDone(request.node.nodeid, "GET /x", "", 1, 3, 10, 5.0, 0, None))
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:locust", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_progress.py::test_progress ", "webperf test_progress GET /x: repetition 1/3 done*"]
    )


def test_min_repeat_beats_a_marker_and_verbose_says_where_settings_came_from(
    pytester: pytest.Pytester, local_server: str
):
    pytester.makepyfile(
        test_static="""
        import pytest

        @pytest.mark.webperf(repeat=1)
        def test_hello(webperf):
            webperf.http(webperf.server("nginx"), path="/hello")
        """
    )
    result = pytester.runpytest_subprocess(
        *QUICK,
        "-v",
        "--webperf-concurrency=2",
        "--webperf-min-repeat=2",
        f"--webperf-target-url={local_server}",
        "--webperf-json=out.json",
    )
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert len(test["repetitions"]) == 2
    result.stdout.fnmatch_lines(
        [
            "webperf settings:",
            "  test_static.py::test_hello[[]c2[]]: concurrency=2 duration=1s warmup=0.5s "
            "repeat=2 (from --webperf-min-repeat, over @pytest.mark.webperf's 1)",
        ]
    )
