"""MQTT at QoS 2 against the real broker, subscribers and database, at small scale.

Every message a swarm publishes is followed to the observer and to the server's table;
a subscriber killed mid-run shows up as lost messages (not a hang), and a client sending
garbage does not stop a server from storing everybody else's messages.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from paho.mqtt import publish

from pytest_webperf.catalog import Catalog, default_directories
from pytest_webperf.models import Delivery, MqttResult
from pytest_webperf.mqtt.run import MqttPlan, measure_mqtt, wiring
from pytest_webperf.targets import start_target
from pytest_webperf.targets.container import ContainerTarget

pytestmark = pytest.mark.e2e

CATALOG = Catalog(default_directories())
SUBSCRIBERS = [s.name for s in CATALOG if isinstance(s.extra.get("mqtt"), dict)]
SMALL = MqttPlan(users=20, duration_s=3, warmup_s=1, interval_s=0.2, drain_s=20, quiet_s=2)
GARBAGE = [
    b"{not json",
    b"",
    b"[1, 2, 3]",
    b'{"clientId": 1}',
    b'{"clientId": "x", "temp": 1}',
    b"\xff\xfe\x00binary",
    json.dumps({"clientId": 1, "temp": 1, "humidity": 2, "light": None}).encode(),
]


@pytest.fixture(params=SUBSCRIBERS)
def subscriber(request: pytest.FixtureRequest) -> Iterator[ContainerTarget]:
    with start_target(CATALOG, request.param) as target:
        yield target


def _mqtt(target: ContainerTarget, plan: MqttPlan = SMALL) -> MqttResult:
    result = measure_mqtt(target, plan, nodeid="e2e").runs[0].mqtt
    assert result is not None
    return result


def _clean(delivery: Delivery | None, acked: int) -> None:
    assert delivery is not None
    assert delivery.delivered == acked
    assert (delivery.duplicates, delivery.missing, delivery.unexpected) == (0, 0, 0)


def test_every_message_reaches_the_observer_and_the_table(subscriber: ContainerTarget) -> None:
    result = _mqtt(subscriber)
    assert result.published > 20 * 3  # warm-up + 3 s at 5 messages/s per user
    assert result.acked == result.published and result.unacked == 0
    _clean(result.observer, result.acked)
    _clean(result.store, result.acked)
    assert result.store is not None and result.store.latency is not None
    assert result.tps is not None and result.tps > 0


def test_garbage_from_a_client_does_not_stop_the_server(subscriber: ContainerTarget) -> None:
    port = wiring(subscriber).broker_port
    publish.multiple(
        [{"topic": "telemetry/666", "payload": p, "qos": 2} for p in GARBAGE],
        hostname="127.0.0.1",
        port=port,
    )
    result = _mqtt(subscriber)
    subscriber.check_alive()
    _clean(result.store, result.acked)


def test_a_subscriber_killed_mid_run_shows_up_as_lost_messages() -> None:
    with start_target(CATALOG, "go-mqtt") as target:
        server = next(c for c in target.containers if c.spec.name == "go-mqtt")
        kill = threading.Timer(2.0, lambda: server.container.get_wrapped_container().kill())
        plan = MqttPlan(users=20, duration_s=4, warmup_s=1, interval_s=0.2, drain_s=10, quiet_s=1)
        kill.start()
        try:
            measurement = measure_mqtt(target, plan, nodeid="e2e")
        finally:
            kill.cancel()
    run = measurement.runs[0]
    result = run.mqtt
    assert result is not None and result.store is not None
    _clean(result.observer, result.acked)  # the broker itself was fine
    assert result.store.missing > 0
    assert result.store.lost == result.store.missing  # nothing arrived any more: lost
    assert any("died" in note for note in run.notes)


def test_a_bare_broker_flat_out_at_qos1_has_only_an_observer() -> None:
    with start_target(CATALOG, "mosquitto") as target:
        plan = MqttPlan(users=5, duration_s=2, warmup_s=0.5, interval_s=0, qos=1, drain_s=10)
        measurement = measure_mqtt(target, plan, nodeid="e2e")
    result = measurement.runs[0].mqtt
    assert result is not None and result.store is None
    assert measurement.runs[0].requests > 0
    _clean(result.observer, result.acked)
