"""More than one generator process: a Locust master and its workers, results merged exactly."""

from __future__ import annotations

import os

import pytest
from local_http import LocalServer

from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import SwarmSpec

BODY = b"<p>" + b"y" * 500 + b"</p>"


@pytest.mark.parametrize("user", ["lean", "native"])
def test_two_workers_merge_to_the_servers_count(user: str) -> None:
    """Each worker process has its own users (the native user: its own C loop)."""
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    with LocalServer("length", body=BODY) as server:
        outcome = run_swarm(
            SwarmSpec(
                host=server.url,
                users=20,
                duration_s=2.0,
                warmup_s=0.5,
                user_class=user,
                workers=2,
                cpus=cpus,
                workload=Workload(path="/page"),
            )
        )
    total = outcome.total
    assert total.requests > 0
    assert total.errors == 0
    assert total.bytes == total.requests * len(BODY)
    assert total.histogram.count == total.requests  # histograms added, none dropped
    assert sum(s.requests for s in outcome.series) == total.requests
    recorded = outcome.rolled_requests
    assert recorded is not None
    # everything the workers recorded was answered; at most one request per user in flight
    assert recorded <= server.counts.responses <= recorded + outcome.users
    assert outcome.users == 20
    assert outcome.locust_requests == recorded  # Locust's master got every worker's stats
    assert server.counts.connections == 20

    roles = sorted(g.role for g in outcome.generators)
    assert roles == ["master", "worker0", "worker1"]
    assert len({g.pid for g in outcome.generators}) == 3
    workers = [g for g in outcome.generators if g.role.startswith("worker")]
    assert all(g.cpu_s > 0 for g in workers)
    # each worker on one CPU of the set, round robin; the master may use all of them
    assert sorted(g.cpus for g in workers) == sorted((cpus[i % len(cpus)],) for i in range(2))


def test_a_local_worker_killed_mid_run_fails_it_by_name() -> None:
    import threading
    import time

    import psutil

    from pytest_webperf.errors import SwarmError

    swarm: list[int] = []

    def kill_a_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = psutil.Process(swarm[0]).children() if swarm else []  # "started"
            if len(workers) == 2 and server.counts.responses > 200:
                workers[1].kill()
                return
            time.sleep(0.1)

    with LocalServer("length", body=BODY) as server:
        killer = threading.Thread(target=kill_a_worker, daemon=True)
        killer.start()
        with pytest.raises(SwarmError) as failed:
            run_swarm(
                SwarmSpec(
                    host=server.url,
                    users=10,
                    duration_s=20.0,
                    user_class="lean",
                    workers=2,
                    workload=Workload(path="/page"),
                ),
                lambda event: (
                    swarm.append(int(event["pid"])) if event["type"] == "started" else None
                ),
            )
        killer.join(timeout=5)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("generator worker worker")
    assert "stopped answering the master during the run" in message
