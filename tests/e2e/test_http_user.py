"""The lean and native HTTP users against a local Python server: framing, failures,
exact counting.

Small swarms for a few seconds each, through the real child process (``run_swarm``).
Every test but the one on users' own classes runs on both generators: they count alike.
"""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import pytest
from local_http import LocalServer

from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.recorder import CONNECT, TIMEOUT
from pytest_webperf.swarm.runner import SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec

USERS = 20
GENERATORS = ["lean", "native"]
BODY = b"<p>" + b"x" * 1000 + b"</p>"


def swarm(
    url: str,
    *,
    users: int = USERS,
    duration_s: float = 2.0,
    timeout_s: float = 5.0,
    user_class: str = "lean",
    cpus: tuple[int, ...] = (),
) -> SwarmOutcome:
    return run_swarm(
        SwarmSpec(
            host=url,
            users=users,
            duration_s=duration_s,
            warmup_s=0.5,
            timeout_s=timeout_s,
            user_class=user_class,
            cpus=cpus,
            workload=Workload(path="/page"),
        )
    )


@pytest.fixture(params=GENERATORS)
def user(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def assert_counted_like_the_server(
    outcome: SwarmOutcome, server: LocalServer, per_task: int = 1
) -> None:
    """Everything we recorded was answered; the server answered at most what the users
    had in flight when the swarm stopped (the rest of a task: one request in a closed loop)."""
    recorded = outcome.rolled_requests
    assert recorded is not None
    assert recorded <= server.counts.responses <= recorded + outcome.users * per_task


def test_counts_requests_and_bytes_exactly(user: str) -> None:
    with LocalServer("length", body=BODY) as server:
        outcome = swarm(server.url, user_class=user)
    total = outcome.total
    assert total.requests > 0
    assert total.errors == 0
    assert total.bytes == total.requests * len(BODY)
    assert total.histogram.count == total.requests
    assert_counted_like_the_server(outcome, server)
    assert server.counts.connections == USERS  # keep-alive: one connection per user
    assert outcome.locust_requests == outcome.rolled_requests  # Locust's stats fed in full
    assert [g.role for g in outcome.generators] == ["local"]
    assert outcome.generator_cpu_s > 0


def test_chunked_bodies_are_decoded_and_counted(user: str) -> None:
    with LocalServer("chunked", body=BODY) as server:
        outcome = swarm(server.url, user_class=user)
    total = outcome.total
    assert total.requests > 0
    assert total.errors == 0
    assert total.bytes == total.requests * len(BODY)
    assert_counted_like_the_server(outcome, server)


def test_connection_close_servers_get_a_new_connection_per_request(user: str) -> None:
    with LocalServer("close", body=BODY) as server:
        outcome = swarm(server.url, user_class=user)
    total = outcome.total
    assert total.requests > 0
    assert total.errors == 0
    assert total.bytes == total.requests * len(BODY)
    assert_counted_like_the_server(outcome, server)
    assert server.counts.connections >= server.counts.responses


def test_a_stalled_server_yields_timeouts_and_the_run_ends(user: str) -> None:
    with LocalServer("stall") as server:
        outcome = swarm(server.url, users=5, duration_s=2.5, timeout_s=0.5, user_class=user)
    total = outcome.total
    assert total.requests > 0
    assert total.errors == total.requests
    assert total.error_kinds == {TIMEOUT: total.requests}
    assert total.histogram.count == 0  # no response, no latency
    assert outcome.timeouts == total.requests
    assert outcome.connect_errors == 0
    # each user times out about every 0.5 s: a timeout is detected, not waited out forever
    assert server.counts.connections > 5


def test_resets_are_counted_and_connections_reestablished(user: str) -> None:
    with LocalServer("reset", body=BODY, reset_every=7) as server:
        outcome = swarm(server.url, user_class=user)
    total = outcome.total
    assert total.error_kinds.get("reset", 0) > 0
    assert set(total.error_kinds) <= {"reset", "closed"}
    assert total.requests - total.errors > 0
    assert server.counts.connections > USERS  # reconnected after the resets
    assert total.bytes == (total.requests - total.errors) * len(BODY)


def test_refused_connections_are_connect_errors_not_timeouts(user: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = swarm(f"http://127.0.0.1:{port}", users=3, duration_s=1.0, user_class=user)
    total = outcome.total
    assert total.requests > 0
    assert total.error_kinds == {CONNECT: total.requests}
    assert outcome.connect_errors == total.requests
    assert outcome.timeouts == 0


def test_generator_is_pinned_where_asked(user: str) -> None:
    cpu = min(os.sched_getaffinity(0))
    with LocalServer("length") as server:
        outcome = swarm(server.url, users=5, duration_s=1.0, cpus=(cpu,), user_class=user)
    assert [g.cpus for g in outcome.generators] == [(cpu,)]


def test_users_subclass_lean_http_user_with_their_own_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop_users.py").write_text(
        textwrap.dedent("""
        from locust import task
        from pytest_webperf.swarm.child.lean import LeanHttpUser

        class Shop(LeanHttpUser):
            @task
            def browse(self):
                page = self.get("/page", keep_body=True)
                if page.body != b"<h1>Hello World</h1>":
                    self.stop()  # a wrong body ends the user: the test sees too few requests
                self.request("POST", "/cart", body=b'{"item": 1}', name="cart")
    """)
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    with LocalServer("length") as server:
        outcome = swarm(server.url, users=4, duration_s=1.5, user_class="shop_users:Shop")
    total = outcome.total
    assert total.errors == 0
    assert total.requests > 100
    assert_counted_like_the_server(outcome, server, per_task=2)
    assert outcome.locust_requests == outcome.rolled_requests
