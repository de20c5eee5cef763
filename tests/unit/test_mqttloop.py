"""The native MQTT loop's Python face: its buckets are the histogram's, its figures
become the recorder's intervals, and ``--webperf-user`` picks the MQTT user."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.stats.histogram import bucket_index
from pytest_webperf.swarm import mqttloop
from pytest_webperf.swarm.extension import Extension
from pytest_webperf.swarm.mqttloop import interval_from, resolve_mqtt_user

built = pytest.mark.skipif(mqttloop.unavailable() is not None, reason="MQTT loop not built")
EMPTY = (0, 0, 0, 0, [])


@built
@given(st.integers(min_value=0, max_value=(1 << 49) - 1))
def test_the_c_buckets_are_the_histograms(value: int) -> None:
    assert mqttloop.bucket_index(value) == bucket_index(value)


def take(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "ok": 0,
        "bytes": 0,
        "timeouts": 0,
        "connect_timeouts": 0,
        "closed": 0,
        "protocol": 0,
        "late": 0,
        "received": 0,
        "received_bytes": 0,
        "connack": {},
        "connect_errno": {},
        "io_errno": {},
        "latency": EMPTY,
        "lag": EMPTY,
        "e2e": EMPTY,
    }
    data.update(changes)
    return data


def test_acknowledged_messages_are_requests_with_their_latency() -> None:
    interval = interval_from(
        take(ok=3, latency=(3, 600, 100, 300, [(100, 1), (200, 1), (300, 1)])), 5
    )
    assert (interval.requests, interval.errors) == (3, 0)
    assert interval.histogram.count == 3 and interval.histogram.max() == 300


def test_failures_are_named_as_the_paho_users_and_the_brokers_refusal() -> None:
    interval = interval_from(
        take(ok=1, timeouts=2, connect_timeouts=1, connack={2: 4}, connect_errno={111: 1}), 5
    )
    assert interval.error_kinds == {"timeout": 2, "connect": 2, "mqtt_connack_2": 4}
    assert interval.requests == 1 + 8 and interval.errors == 8
    assert "identifier rejected" in interval.error_examples["mqtt_connack_2"]
    assert "5 s" in interval.error_examples["timeout"]


def test_auto_is_the_native_loop_where_built_and_http_users_get_paho() -> None:
    expected = "mqtt" if mqttloop.unavailable() else "mqtt-native"
    assert resolve_mqtt_user("auto") == expected
    assert resolve_mqtt_user("lean") == resolve_mqtt_user("fast") == "mqtt"
    assert resolve_mqtt_user("mymod:User") == "mqtt"


def test_native_where_it_is_not_built_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqttloop, "LOOP", Extension(None, "no compiler"))
    with pytest.raises(OptionError, match="--webperf-user=native: the native MQTT loop"):
        resolve_mqtt_user("native")
    assert resolve_mqtt_user("auto") == "mqtt"


def test_a_window_outside_the_packet_ids_is_refused() -> None:
    with pytest.raises(ValueError, match="window must be 1 to 65535"):
        MqttLoad(port=1883, window=0)
    assert MqttLoad.from_dict(MqttLoad(port=1, sources=["127.0.0.2"]).to_dict()).sources == (  # type: ignore[arg-type]
        "127.0.0.2",
    )


def test_a_tls_failure_is_the_tls_kind_with_the_loops_words() -> None:
    interval = interval_from(take(tls=2, tls_message="certificate verify failed: self-signed"), 5)
    assert interval.error_kinds == {"tls": 2}
    assert interval.error_examples["tls"] == "certificate verify failed: self-signed"


def test_the_websocket_upgrade_asks_for_the_mqtt_subprotocol() -> None:
    head = mqttloop.upgrade_request("127.0.0.1", 9001, "/mqtt").decode()
    assert head.startswith("GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n")
    assert "Sec-WebSocket-Protocol: mqtt\r\n" in head and head.endswith("\r\n\r\n")
    assert "Host: [::1]:9001\r\n" in mqttloop.upgrade_request("::1", 9001, "/").decode()


def test_an_mqtt5_refusal_is_its_reason_code() -> None:
    interval = interval_from(take(ok=2, refused={0x87: 1}, connack={0x85: 1}), 5)
    assert interval.error_kinds == {"mqtt_reason_135": 1, "mqtt_connack_133": 1}
    assert "client identifier not valid" in interval.error_examples["mqtt_connack_133"]
    with pytest.raises(ValueError, match="protocol must be 4"):
        MqttLoad(port=1883, protocol=3)
