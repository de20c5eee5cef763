"""Generator workers from elsewhere: ``webperf worker`` processes (started here, not
children of the swarm) join the swarm's master on loopback, get the run's spec from
it, and their requests are counted exactly; one killed mid-run fails the run by
name; a master nobody joins fails within its wait; a bad master address is a
one-line error."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from local_http import LocalServer
from tests.e2e.hello_server import HELLO_SERVER
from tests.e2e.remote import WEBPERF, free_port, start_worker, stop

from pytest_webperf.errors import SwarmError
from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import Remote, SwarmSpec

pytestmark = pytest.mark.e2e
pytest_plugins = ["pytester"]

BODY = b"<p>" + b"z" * 200 + b"</p>"


@pytest.fixture
def address() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def worker(address: str) -> Iterator[subprocess.Popen[str]]:
    process = start_worker(address)
    yield process
    stop(process)


def spec(
    url: str, address: str, *, users: int = 12, duration_s: float = 2.0, user: str = "lean"
) -> SwarmSpec:
    return SwarmSpec(
        host=url,
        users=users,
        duration_s=duration_s,
        warmup_s=0.5,
        user_class=user,
        workers=1,
        workload=Workload(path="/page"),
        remote=Remote(1, address, wait_s=30),
    )


def test_a_remote_worker_joins_and_is_counted_exactly(
    address: str, worker: subprocess.Popen[str]
) -> None:
    with LocalServer("length", body=BODY) as server:
        outcomes = [run_swarm(spec(server.url, address)) for _ in range(2)]  # one worker, two runs
        responses = server.counts.responses
    rolled = 0
    for outcome in outcomes:
        total = outcome.total
        assert total.requests > 0 and total.errors == 0
        assert total.histogram.count == total.requests
        assert total.bytes == total.requests * len(BODY)
        assert sum(s.requests for s in outcome.series) == total.requests  # series complete
        assert len(outcome.series) == 2  # 2 s of 1 s intervals, from the master's clock
        assert outcome.locust_requests == outcome.rolled_requests  # Locust saw every worker
        assert outcome.users == 12
        roles = sorted(g.role for g in outcome.generators)
        assert roles[:2] == ["master", "remote1@" + os.uname().nodename]
        assert roles[2] == "worker0"
        remote = next(g for g in outcome.generators if g.remote)
        assert remote.cpu_s > 0  # its CPU came over the wire
        assert outcome.rolled_requests is not None
        rolled += outcome.rolled_requests
    # everything recorded was answered; at most one request per user in flight per run
    assert rolled <= responses <= rolled + 2 * 12
    assert worker.poll() is None  # still serving: the next run, the next test


def test_with_no_local_worker_every_request_is_the_remote_s(
    address: str, worker: subprocess.Popen[str]
) -> None:
    """--webperf-workers=0: this machine runs the master only, the load is remote."""
    with LocalServer("length", body=BODY) as server:
        outcome = run_swarm(dataclasses.replace(spec(server.url, address), workers=0))
        responses = server.counts.responses
    total = outcome.total
    assert total.requests > 0 and total.errors == 0
    assert sum(s.requests for s in outcome.series) == total.requests
    assert outcome.locust_requests == outcome.rolled_requests
    assert outcome.rolled_requests is not None
    assert outcome.rolled_requests <= responses <= outcome.rolled_requests + 12
    assert sorted(g.role for g in outcome.generators) == [
        "master",
        "remote1@" + os.uname().nodename,
    ]


def test_a_worker_killed_mid_run_fails_it_by_name(address: str) -> None:
    process = start_worker(address)
    try:
        with LocalServer("length", body=BODY) as server:

            def kill_the_remote_run() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # the supervisor's child: the Locust worker
                    children = psutil.Process(process.pid).children()
                    if children and server.counts.responses > 200:
                        children[0].kill()
                        return
                    time.sleep(0.1)

            killer = threading.Thread(target=kill_the_remote_run, daemon=True)
            killer.start()
            started = time.monotonic()
            with pytest.raises(SwarmError) as failed:
                run_swarm(spec(server.url, address, duration_s=20.0))
            killer.join(timeout=5)
        message = str(failed.value)
        assert "\n" not in message
        assert f"generator worker remote1@{os.uname().nodename}" in message
        assert "this repetition fails" in message
        assert time.monotonic() - started < 60  # named soon, not at the run's deadline
    finally:
        stop(process)


def test_a_master_nobody_joins_fails_within_its_wait(address: str) -> None:
    with LocalServer("length", body=BODY) as server:
        started = time.monotonic()
        with pytest.raises(SwarmError) as failed:
            run_swarm(
                SwarmSpec(
                    host=server.url,
                    users=4,
                    duration_s=1.0,
                    workers=1,
                    remote=Remote(2, address, wait_s=3),
                )
            )
        waited = time.monotonic() - started
    message = str(failed.value)
    assert message == (
        f"only 0 of 2 remote generator workers joined the master at {address} within 3s: "
        f"start them with `webperf worker --master {address}` (reachable there, port open)"
    )
    assert waited < 60


@pytest.mark.parametrize(
    ("master", "says"),
    [
        ("nonsense", "'nonsense' is not HOST:PORT"),
        ("no-such-host.invalid:5557", "cannot resolve 'no-such-host.invalid'"),
        ("127.0.0.1:{port}", "no master listened at 127.0.0.1:{port} within 1s"),
    ],
)
def test_webperf_worker_with_a_bad_master_says_so(master: str, says: str) -> None:
    port = free_port()
    done = subprocess.run(
        [WEBPERF, "worker", "--master", master.format(port=port), "--idle-exit", "1s"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines  # one line, naming the address
    assert lines[0].startswith("webperf worker: error: ")
    assert says.format(port=port) in lines[0]


def test_the_session_end_tells_the_worker_to_exit(
    address: str, worker: subprocess.Popen[str]
) -> None:
    from pytest_webperf.settings.scaleout import farewell

    said = farewell(Remote(1, address), wait_s=30)
    assert said == "1 remote worker(s) told"
    out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0
    assert "the master ended the session after 0 run(s)" in out


TEST_ON_BIND = """
import sys

def test_bound(webperf):
    target = webperf.process([sys.executable, "server.py"], name="bound-py")
    assert target.url.startswith("http://127.0.0.2:")
    result = webperf.http(target, path="/x")
    assert result.requests > 0 and result.errors == 0


def test_bound_catalogue_server(webperf):
    target = webperf.server("nginx")
    assert target.url.startswith("http://127.0.0.2:")
    result = webperf.http(target, path="/hello")
    assert result.requests > 0 and result.errors == 0
"""


def test_the_plugin_waits_for_a_remote_worker_and_binds_the_target(
    pytester: pytest.Pytester,
) -> None:
    """Through pytest's options: the run waits for the remote worker at every
    repetition, the targets (a process, a catalogue server) listen on the bind address
    (127.0.0.2: loopback, but not the default), the master's address too (the worker
    loads that address only), and the session's end sends the worker home."""
    address = f"127.0.0.2:{free_port()}"
    worker = start_worker(address)
    try:
        pytester.makepyfile(server=HELLO_SERVER, test_bound=TEST_ON_BIND)
        result = pytester.runpytest_subprocess(
            "-p",
            "no:locust",
            "--webperf-concurrency=6",
            "--webperf-duration=1s",
            "--webperf-warmup=0.5s",
            "--webperf-repeat=2",
            "--webperf-remote-workers=1",
            f"--webperf-master-bind={address}",
            "--webperf-remote-wait=30s",
            "--webperf-target-bind=127.0.0.2",
            "--webperf-json=out.json",
        )
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["*end of session: 1 remote worker(s) told*"])
        tests = json.loads((pytester.path / "out.json").read_text())["tests"]
        assert len(tests) == 2
        for run in (run for test in tests for run in test["repetitions"]):
            roles = sorted(p["role"] for p in run["generator_processes"])
            assert roles == ["master", f"remote1@{os.uname().nodename}", "worker0"]
            assert sum(s["requests"] for s in run["series"]) == run["requests"]
        out, _ = worker.communicate(timeout=30)
        assert worker.returncode == 0, out
        assert "the master ended the session after 4 run(s)" in out
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)


def test_the_worker_container_with_host_networking_joins(address: str, tmp_path: Path) -> None:
    """``webperf build worker``'s image, run as another machine would (host network),
    with the native loop it compiled for its own Python (the wheel it installs is pure),
    and the run's secret in a file as deploy/kubernetes mounts it (mode 0440, the group
    of the image's user, nobody)."""
    from pytest_webperf.commands.worker_image import ensure_worker_image
    from pytest_webperf.swarm.trust.secret import secret_from
    from pytest_webperf.targets.container import MANAGED, OWNER, SESSION, SESSION_ID, _owner
    from pytest_webperf.targets.engine import docker_client

    secret = tmp_path / "secret"
    secret.write_text("k" * 64 + "\n")
    if os.geteuid() == 0:
        os.chown(secret, 0, 65534)  # nogroup, as fsGroup: 65534 makes it in the pod
        secret.chmod(0o440)
    else:
        secret.chmod(0o444)
    tag = ensure_worker_image()
    container = docker_client().containers.run(
        tag,
        ["--master", address, "--idle-exit", "60s", "--secret-file", "/var/run/webperf/secret"],
        network_mode="host",
        detach=True,
        volumes={str(secret): {"bind": "/var/run/webperf/secret", "mode": "ro"}},
        labels={MANAGED: "1", SESSION: SESSION_ID, OWNER: _owner(), "webperf.part": "worker"},
    )
    try:
        with LocalServer("length", body=BODY) as server:
            remote = Remote(1, address, wait_s=30, secret=secret_from("k" * 64, "test"))
            outcome = run_swarm(
                dataclasses.replace(spec(server.url, address, user="native"), remote=remote)
            )
        total = outcome.total
        assert total.requests > 0 and total.errors == 0
        assert sum(s.requests for s in outcome.series) == total.requests
        remote = [g for g in outcome.generators if g.remote]
        assert len(remote) == 1 and remote[0].cpu_s > 0
        assert outcome.locust_requests == outcome.rolled_requests
    finally:
        container.remove(force=True)
