"""MQTT at QoS 2 against the real broker, subscribers and database, at small scale.

Every message a swarm publishes is followed to the observer and to the server's table;
a subscriber killed mid-run fails the measurement as a dying HTTP target does (one
measurement loop: ``loop.TargetDied``, never a hang), and a client sending garbage
does not stop a server from storing everybody else's messages.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from paho.mqtt import publish
from tests.e2e.mqtt_runs import measure_mqtt

from pytest_webperf.measurement.loop import TargetDied
from pytest_webperf.measurement.mqtt import MqttTelemetry, wiring
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.models.mqtt import Delivery, MqttResult
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.container import ContainerTarget

pytestmark = pytest.mark.e2e

CATALOG = Catalog(default_directories())
SUBSCRIBERS = [  # the composites: a subscriber and its broker (not a broker with its own table)
    s.name for s in CATALOG if s.kind != "mqtt" and isinstance(s.extra.get("mqtt"), dict)
]
PACED = MqttTelemetry(interval_s=0.2, drain_s=20, quiet_s=2)
SMALL = RunPlan(concurrency=20, duration_s=3, warmup_s=1, repeat=1)
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


def measure(
    target: ContainerTarget, telemetry: MqttTelemetry = PACED, plan: RunPlan = SMALL
) -> Measurement:
    return measure_mqtt(target, telemetry, plan, nodeid="e2e")


def _mqtt(target: ContainerTarget) -> MqttResult:
    result = measure(target).runs[0].mqtt
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


def test_a_subscriber_killed_mid_run_fails_the_measurement_like_an_http_target() -> None:
    with start_target(CATALOG, "go-mqtt") as target:
        server = next(c for c in target.containers if c.spec.name == "go-mqtt")
        assert server.container is not None
        wrapped = server.container.get_wrapped_container()
        kill = threading.Timer(2.0, wrapped.kill)
        plan = RunPlan(concurrency=20, duration_s=4, warmup_s=1, repeat=2)
        kill.start()
        try:
            with pytest.raises(TargetDied) as died:
                measure(target, MqttTelemetry(interval_s=0.2, drain_s=10, quiet_s=1), plan)
        finally:
            kill.cancel()
    assert "go-mqtt died during the measurement" in str(died.value)
    assert "go-mqtt is not running" in str(died.value)
    assert died.value.runs == ()  # it died in the first repetition


def test_a_bare_broker_flat_out_at_qos1_has_only_an_observer() -> None:
    with start_target(CATALOG, "mosquitto") as target:
        measurement = measure(
            target,
            MqttTelemetry(interval_s=0, qos=1, drain_s=10),
            RunPlan(concurrency=5, duration_s=2, warmup_s=0.5, repeat=1),
        )
    result = measurement.runs[0].mqtt
    assert result is not None and result.store is None
    assert measurement.runs[0].requests > 0
    _clean(result.observer, result.acked)


def test_mqtt_goes_through_the_http_rules_limit_and_placement(pytester: pytest.Pytester) -> None:
    """One loop: an MQTT run is judged against the target's CPU limit (not the machine's
    cores) and its generator is pinned under split placement, as an HTTP run is. Its
    publishers speak MQTT 5.0 (``protocol=5``) to a server that subscribes with 3.1.1:
    every message stored once all the same."""
    pytester.makepyfile(
        test_mq="""
def test_mq(webperf):
    target = webperf.server("go-mqtt", cpus=0.5)
    webperf.mqtt(target, concurrency=10, interval="200ms", duration="2s", warmup="0.5s",
                 repeat=1, drain="10s", quiet="2s", protocol=5)
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "--webperf-placement=split", "--webperf-json=mq.json"
    )
    result.assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "mq.json").read_text())["tests"][0]
    rep = entry["repetitions"][0]
    assert rep["server_cores"] == 0.5  # the limit, for generator-bound and capacity
    assert [g["cpus"] for g in rep["generator_processes"]] == [[0]]  # pinned apart
    assert entry["target"]["limits"] == {"cpus": 0.5, "memory": None, "cpuset": "1"}
    assert rep["mqtt"]["store"]["lost"] == 0 and rep["mqtt"]["store"]["duplicates"] == 0
    assert rep["mqtt"]["published"] > 0 and rep["mqtt"]["store"]["delivered"] > 0
    assert entry["name"] == "MQTT 5.0 qos2 every 200ms"


def test_a_store_that_falls_behind_shows_a_growing_delay_a_backlog_and_fails_its_check(
    pytester: pytest.Pytester,
) -> None:
    """Seed 002's "pause": a subscriber that stores slower than it receives (go-mqtt
    waiting 25 ms before each insert: 40 a second, for 100 a second sent). Every message
    stored is timed from its send to its row, second by second: the delay grows, what
    the drain did not see stored is backlog (late, not lost), and a limit on the delay's
    p99 fails the test."""
    pytester.makepyfile(
        test_slow="""
import pytest

@pytest.mark.webperf(compare_fail="store_delay_p99<1000,lost:0,dup:0")
def test_slow(webperf):
    target = webperf.server("go-mqtt", env={"STORE_DELAY_MS": "25"})
    webperf.mqtt(target, concurrency=20, interval="200ms", duration="3s", warmup="1s",
                 repeat=1, drain="3s", quiet="1s")
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:locust", "--webperf-json=slow.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*store_delay_p99_ms *ms breaks the limit store_delay_p99_ms<1000",
            "*stored * (lost 0, dup 0, backlog *, unexpected 0)*; p99 delay by second sent: "
            "0 s * ms, *",
        ]
    )
    rep = json.loads((pytester.path / "slow.json").read_text())["tests"][0]["repetitions"][0]
    store = rep["mqtt"]["store"]
    assert store["backlog"] > 0 and store["lost"] == 0 and store["duplicates"] == 0, store
    delays = [point["p50_ms"] for point in store["delay"]]
    assert len(delays) >= 3 and delays[-1] > delays[0] + 1000, delays  # it fell behind
    assert store["latency"]["p99_ms"] > 1000
