"""The swarm's HTTP user on Locust's stock FastHttpUser (imported in the child only)."""

from __future__ import annotations

from typing import Any

from locust import FastHttpUser, constant, task

from pytest_webperf.swarm.spec import SwarmSpec


def make_user(spec: SwarmSpec) -> type[Any]:
    workload = spec.workload
    headers = dict(workload.headers) or None
    body: Any = workload.body or None  # bytes go through as they are

    class WebperfFastHttpUser(FastHttpUser):
        host = spec.host
        wait_time = constant(0)  # closed loop, like wrk: next request as soon as one completes
        network_timeout = spec.timeout_s
        connection_timeout = spec.timeout_s
        webperf_quick_stop = True  # marked stopping, it stops at its next wait()

        @task
        def request(self) -> None:
            self.client.request(
                workload.method, workload.path, data=body, headers=headers, name=workload.path
            )

    return WebperfFastHttpUser
