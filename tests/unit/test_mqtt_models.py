"""MQTT run figures survive the JSON round trip; the swarm spec carries the MQTT load."""

from __future__ import annotations

import json

import pytest

from pytest_webperf.measurement.mqtt import MqttTelemetry
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.mqtt import Delivery, MqttResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.spec import SwarmSpec


def _latency() -> Latency:
    h = Histogram()
    h.record_many([1000, 2000, 50_000])
    return Latency.of(h)


def test_mqtt_result_round_trips_through_json() -> None:
    result = MqttResult(
        qos=2,
        interval_s=0.5,
        users=10,
        published=100,
        acked=99,
        unacked=1,
        late=2,
        pace_lag=_latency(),
        observer=Delivery("observer", 100, 99, 1, 0, 0, 0, latency=_latency()),
        store=Delivery("store", 98, 98, 0, 1, 1, 0),
        tps=9.5,
        span_s=10.5,
        drain_s=1.0,
    )
    run = RunResult(
        repetition=1,
        concurrency=10,
        duration_s=10,
        requests=99,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=_latency(),
        series=(),
        mqtt=result,
    )
    again = RunResult.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.mqtt == result


def test_runs_without_mqtt_stay_without() -> None:
    run = RunResult(
        repetition=1,
        concurrency=1,
        duration_s=1,
        requests=1,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=_latency(),
        series=(),
    )
    assert RunResult.from_dict(run.to_dict()).mqtt is None


def test_swarm_spec_carries_the_mqtt_load() -> None:
    load = MqttLoad(port=1883, interval_s=0, qos=1, report_path="/tmp/x.json")
    spec = SwarmSpec(
        host="mqtt://127.0.0.1:1883", users=5, duration_s=1, user_class="mqtt", mqtt=load
    )
    assert SwarmSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).mqtt == load
    assert SwarmSpec.from_dict(SwarmSpec(host="h", users=1, duration_s=1).to_dict()).mqtt is None


@pytest.mark.parametrize("bad", [{"qos": 3}, {"interval_s": -1}])
def test_mqtt_load_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        MqttLoad(port=1, **bad)  # type: ignore[arg-type]


def test_an_mqtt5_load_is_named_apart_from_3_1_1() -> None:
    """Baselines are kept per name: a 5.0 run is never judged against a 3.1.1 one, and
    3.1.1's names are as they were."""
    assert MqttTelemetry(interval_s=0.5, qos=2).name == "MQTT qos2 every 500ms"
    assert MqttTelemetry(interval_s=0, qos=1, protocol=5).name == "MQTT 5.0 qos1 flat out"
