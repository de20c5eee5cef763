"""Both MQTT users (the native loop and paho's) at QoS 0, 1 and 2 against the catalogue's
Mosquitto, and against a fault-injecting broker (``mqtt_broker.py``) whose dropped
PUBCOMPs, lost and duplicated messages and refused client ids are counted exactly as
the protocol implies."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.mqtt_broker import fault_broker
from tests.e2e.mqtt_runs import measure_mqtt

from pytest_webperf.measurement.loop import RunPlan
from pytest_webperf.measurement.mqtt import MqttTelemetry, published_from
from pytest_webperf.mqtt.accounting import Published, account
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.swarm import mqttloop
from pytest_webperf.swarm.mqttloop import MqttLoop
from pytest_webperf.swarm.runner import SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.container import ContainerTarget

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(mqttloop.unavailable() is not None, reason="MQTT loop not built"),
]
USERS = ["mqtt-native", "mqtt"]
SMALL = RunPlan(concurrency=10, duration_s=2, warmup_s=0.5, repeat=1)


@pytest.fixture(scope="module")
def mosquitto() -> Iterator[ContainerTarget]:
    with start_target(Catalog(default_directories()), "mosquitto") as target:
        yield target


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_every_message_is_acknowledged_and_observed_once(
    mosquitto: ContainerTarget, user: str, qos: int
) -> None:
    telemetry = MqttTelemetry(interval_s=0.1, qos=qos, drain_s=10, quiet_s=2, user_class=user)
    result = measure_mqtt(mosquitto, telemetry, SMALL, nodeid="e2e").runs[0].mqtt
    assert result is not None
    assert result.published >= 10 * 2 * 5  # 10 clients, 10 a second, for 2 s and more
    assert (result.acked, result.unacked) == (result.published, 0)
    assert (result.connect_failures, result.disconnects, result.publish_errors) == (0, 0, 0)
    observer = result.observer
    assert observer is not None
    assert observer.delivered == result.published
    assert (observer.duplicates, observer.lost, observer.missing, observer.unexpected) == (0,) * 4


def swarm(port: int, user: str, tmp_path: Path, **load: object) -> tuple[SwarmOutcome, dict]:  # type: ignore[type-arg]
    report = tmp_path / "publishers.json"
    spec = SwarmSpec(
        host=f"mqtt://127.0.0.1:{port}",
        users=4,
        duration_s=1.5,
        user_class=user,
        timeout_s=3,
        mqtt=MqttLoad(port=port, report_path=str(report), grace_s=1, client_prefix="t", **load),  # type: ignore[arg-type]
    )
    outcome = run_swarm(spec)
    return outcome, json.loads(report.read_text())


@pytest.mark.parametrize("user", USERS)
def test_a_dropped_pubcomp_leaves_the_message_unacknowledged_not_lost(
    user: str, tmp_path: Path
) -> None:
    with fault_broker(drop_pubcomp=5, lose=7, duplicate=11) as broker:
        outcome, report = swarm(broker.port, user, tmp_path, qos=2, interval_s=0.05)
    published = published_from(report)
    n = broker.messages  # the k-th (from 1) completed at the k-th PUBREL
    assert published.total == n == broker.pubrels > 40
    # every 5th PUBREL got no PUBCOMP: the publisher never heard it was completed
    assert published.unacked_total == n // 5
    seen = account("broker", published, broker.copies, still_arriving=False)
    # every 7th was acknowledged and never kept: lost, unless never acknowledged either
    assert seen.lost == seen.missing == n // 7 - n // 35
    assert seen.duplicates == n // 11 - n // 77  # every 11th kept twice (if kept at all)
    assert seen.delivered == n - n // 7 and seen.unexpected == 0
    assert outcome.total.errors == outcome.timeouts  # nothing else went wrong


@pytest.mark.parametrize("user", USERS)
def test_a_taken_client_id_is_refused_and_counted(user: str, tmp_path: Path) -> None:
    with fault_broker(taken=frozenset({"t-2", "t-3"}), refuse_delay_s=0.5) as broker:
        outcome, report = swarm(broker.port, user, tmp_path, qos=1, interval_s=0.05)
    assert broker.refused == 2
    assert outcome.kind("mqtt_connack_2") == 2
    assert report["connect_failures"] == 2
    published = published_from(report)
    assert {c for c, n in published.counts.items() if n} == {1, 4}
    assert published.unacked_total == 0
    assert isinstance(published, Published)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("server", ["mosquitto-tls", "mosquitto-ws"])
def test_every_message_over_tls_and_websocket_mqtt5(server: str, user: str) -> None:
    """mosquitto-tls's one listener speaks TLS only, mosquitto-ws's WebSocket only:
    publishers and observer over them, every message once; over WebSocket the
    publishers speak MQTT 5.0 (the observer 3.1.1)."""
    if server == "mosquitto-tls" and not mqttloop.tls_built():
        pytest.skip("the MQTT loop is built without TLS")
    protocol = 5 if server == "mosquitto-ws" else 4
    telemetry = MqttTelemetry(
        interval_s=0.1, qos=2, drain_s=10, quiet_s=2, user_class=user, protocol=protocol
    )
    with start_target(Catalog(default_directories()), server) as target:
        result = measure_mqtt(target, telemetry, SMALL, nodeid="e2e").runs[0].mqtt
    assert result is not None and result.published >= 10 * 2 * 5
    assert (result.acked, result.unacked, result.connect_failures) == (result.published, 0, 0)
    assert result.observer is not None and result.observer.delivered == result.published
    assert (result.observer.duplicates, result.observer.lost) == (0, 0)


@pytest.mark.parametrize("qos", [1, 2])
def test_the_loops_subscribers_get_every_message_once(mosquitto: ContainerTarget, qos: int) -> None:
    """The native loop's own subscribers (no Locust): one subscribes, five publish; it
    acknowledges each message at its QoS and counts it with its end-to-end latency."""
    loop = MqttLoop(
        "127.0.0.1",
        mosquitto.port,
        qos=qos,
        interval_s=0.02,
        topic=f"sub{qos}",
        client_prefix=f"e2e-sub{qos}",
        subscribe=f"sub{qos}/#",
    )
    try:
        loop.add(0, subscriber=True)
        deadline = time.monotonic() + 10
        while loop.state()["subscribed"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        for client in range(1, 6):
            loop.add(client, (client - 1) / 5)
        time.sleep(1.5)
        loop.stop_sending()
        while loop.state()["outstanding"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the last deliveries to the subscriber
        loop.take()
        ledger = loop.finish()
    finally:
        loop.finish()
    published = sum(n for _, n, _ in ledger)
    assert published >= 5 * 1.5 * 50 * 0.8
    assert all(not unacked for _, _, unacked in ledger)
    assert loop.received == published
    assert loop.e2e.count == published and loop.e2e.max() < 10_000_000


def test_an_idle_connection_is_kept_alive(tmp_path: Path) -> None:
    """Nothing to publish for longer than half the keep-alive: PINGREQ (and no timeout)."""
    with fault_broker() as broker:
        outcome, report = swarm(
            broker.port, "mqtt-native", tmp_path, qos=1, interval_s=30, keepalive_s=1
        )
    assert broker.pings >= 4  # 4 idle clients, 1.5 s, one PINGREQ each every 0.5 s or so
    assert outcome.total.errors == 0 and report["disconnects"] == 0
