"""MQTT over several generator processes: each has its own client-id range, the master
merges their ledgers, and every message is accounted for (0 lost, 0 duplicated),
with two local workers (paho's user) and with one local and one remote (``webperf
worker``: the native user, where built), which publish to the broker's bind address."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.e2e.mqtt_runs import measure_mqtt

from pytest_webperf.measurement.mqtt import MqttTelemetry
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.swarm.mqttloop import resolve_mqtt_user
from pytest_webperf.swarm.spec import Remote
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories

pytestmark = pytest.mark.e2e

CATALOG = Catalog(default_directories())
WEBPERF = str(Path(sys.executable).with_name("webperf"))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("remote", "user"),
    [(False, "mqtt"), (True, resolve_mqtt_user("auto"))],  # paho's locally, native remote
    ids=["2-local", "1-local-1-remote-native"],
)
def test_forty_paced_qos2_clients_over_two_processes_lose_nothing(remote: bool, user: str) -> None:
    # the remote case as across machines: the master and the broker listen on one address
    # (127.0.0.2, loopback but not the default), the one address the worker loads
    address = f"127.0.0.2:{free_port()}" if remote else f"127.0.0.1:{free_port()}"
    worker = None
    if remote:
        worker = subprocess.Popen(
            [WEBPERF, "worker", "--master", address, "--idle-exit", "60s"],
            start_new_session=True,
        )
    plan = RunPlan(
        concurrency=40,
        duration_s=3,
        warmup_s=1,
        repeat=1,
        workers=1 if remote else 2,
        remote=Remote(1, address, 30) if remote else None,
    )
    try:
        # every process publishes to the broker's bind address
        with start_target(CATALOG, "mosquitto", bind="127.0.0.2" if remote else None) as target:
            measurement = measure_mqtt(
                target,
                MqttTelemetry(interval_s=0.2, qos=2, drain_s=20, quiet_s=2, user_class=user),
                plan,
                nodeid="e2e",
            )
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    (run,) = measurement.runs
    result = run.mqtt
    assert result is not None
    assert result.published > 40 * 3  # warm-up + 3 s at 5 messages/s per client
    assert result.acked == result.published and result.unacked == 0
    observer = result.observer
    assert observer is not None
    assert observer.delivered == result.acked
    assert (observer.duplicates, observer.missing, observer.unexpected) == (0, 0, 0)
    roles = sorted(p["role"] for p in run.generator_processes)
    expected = ["master", f"remote1@{os.uname().nodename}", "worker0"]
    assert roles == (expected if remote else ["master", "worker0", "worker1"])
