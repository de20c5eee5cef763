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
from pytest_webperf.swarm.engine import (
    K_CONNACK,
    K_CONNECT_ERRNO,
    K_CONNECT_TIMEOUT,
    K_REFUSED,
    K_TIMEOUT,
    K_TLS,
    Extension,
)
from pytest_webperf.swarm.mqttloop import Mqtt, resolve_mqtt_user

built = pytest.mark.skipif(mqttloop.unavailable() is not None, reason="MQTT loop not built")
EMPTY = (0, 0, 0, 0, [])


@built
@given(st.integers(min_value=0, max_value=(1 << 49) - 1))
def test_the_c_buckets_are_the_histograms(value: int) -> None:
    assert mqttloop.bucket_index(value) == bucket_index(value)


def take(*fails: tuple[int, int, int, bytes], **changes: Any) -> dict[str, Any]:
    """One ``Engine.take()``: its failures (kind, key, n, example)."""
    rows = [(kind, key, n, 0, 0, raw) for kind, key, n, raw in fails]
    data: dict[str, Any] = {"ok": 0, "bytes": 0, "fails": rows, "latency": EMPTY}
    data.update(changes)
    return data


def interval_from(data: dict[str, Any], timeout_s: float) -> Any:
    return Mqtt.interval(data, timeout_s)


def test_acknowledged_messages_are_requests_with_their_latency() -> None:
    interval = interval_from(
        take(ok=3, latency=(3, 600, 100, 300, [(100, 1), (200, 1), (300, 1)])), 5
    )
    assert (interval.requests, interval.errors) == (3, 0)
    assert interval.histogram.count == 3 and interval.histogram.max() == 300


def test_failures_are_named_as_the_paho_users_and_the_brokers_refusal() -> None:
    interval = interval_from(
        take(
            (K_TIMEOUT, 0, 2, b""),
            (K_CONNECT_TIMEOUT, 0, 1, b""),
            (K_CONNACK, 2, 4, b""),
            (K_CONNECT_ERRNO, 111, 1, b""),
            ok=1,
        ),
        5,
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
    monkeypatch.setattr(mqttloop, "ENGINE", Extension(None, "no compiler"))
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
    words = b"certificate verify failed: self-signed"
    interval = interval_from(take((K_TLS, 0, 2, words)), 5)
    assert interval.error_kinds == {"tls": 2}
    assert interval.error_examples["tls"] == "certificate verify failed: self-signed"


def test_the_websocket_upgrade_asks_for_the_mqtt_subprotocol() -> None:
    tail = mqttloop.upgrade_tail("127.0.0.1", 9001)
    assert tail == "Host: 127.0.0.1:9001\r\nSec-WebSocket-Protocol: mqtt\r\n"
    assert mqttloop.upgrade_tail("::1", 9001).startswith("Host: [::1]:9001\r\n")


def test_an_mqtt5_refusal_is_its_reason_code() -> None:
    interval = interval_from(take((K_REFUSED, 0x87, 1, b""), (K_CONNACK, 0x85, 1, b""), ok=2), 5)
    assert interval.error_kinds == {"mqtt_reason_135": 1, "mqtt_connack_133": 1}
    assert "client identifier not valid" in interval.error_examples["mqtt_connack_133"]
    with pytest.raises(ValueError, match="protocol must be 4"):
        MqttLoad(port=1883, protocol=3)
