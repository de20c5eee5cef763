"""MQTT on the native engine (no gevent, no Locust: safe anywhere): whether it is built,
which MQTT user a run gets, MQTT's options (``Mqtt``) and its figures as the recorder's
``Interval`` (``mqtt_connack_N`` for a refused CONNACK), and ``MqttLoop``: the engine
speaking MQTT as the native MQTT user and scripts drive it, clients by number.

The engine (``swarm/engine.py``; ``native/mqtt.c``: every user one MQTT 3.1.1 or 5
connection, over TCP, TLS or WebSocket) is built with the package where a C compiler and
Python's headers are found (Linux); where it is not, MQTT runs use the paho-mqtt user
(``swarm/child/paho.py``), as ``--webperf-user=lean`` or ``fast`` asks anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_webperf.errors import OptionError
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.engine import (
    ENGINE,
    K_CLOSED,
    K_CONNACK,
    K_CONNECT_TIMEOUT,
    K_PROTOCOL,
    K_REFUSED,
    K_TIMEOUT,
    Failure,
    NativeEngine,
    histogram_from,
    named_interval,
    transport_failure,
)
from pytest_webperf.swarm.recorder import CLOSED, CONNECT, PROTOCOL, TIMEOUT, Interval
from pytest_webperf.swarm.streamloop import PUBLISHER, SUBSCRIBER, websocket_failure

PAHO = "mqtt"  # the pure-Python user (paho-mqtt clients in the gevent hub)
NATIVE = "mqtt-native"  # the native engine's
# what a refused CONNACK's return code means (MQTT 3.1.1, 3.2.2.3): the error kind names it
CONNACK_REFUSED = {
    1: "unacceptable protocol version",
    2: "identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
    0x80: "unspecified error",  # MQTT 5's reason codes
    0x84: "unsupported protocol version",
    0x85: "client identifier not valid",
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
}


def unavailable() -> str | None:
    """Why the native MQTT loop cannot run here, or None."""
    return ENGINE.unavailable("the native MQTT loop")


def tls_built() -> bool:
    """Whether the native MQTT loop speaks TLS here (built with OpenSSL's headers)."""
    return ENGINE.tls


def resolve_mqtt_user(requested: str) -> str:
    """The MQTT user a run gets for ``--webperf-user``: ``auto`` is the native loop where
    it is built, else paho's; ``native`` where it is not built is an error; anything else
    (``lean``, ``fast``, a user's own class: HTTP users) is paho's."""
    if requested == "native":
        why = unavailable()
        if why is not None:
            raise OptionError(f"--webperf-user=native: {why}; use lean (paho-mqtt) for MQTT")
        return NATIVE
    if requested == "auto":
        return PAHO if unavailable() else NATIVE
    return PAHO


def upgrade_tail(host: str, port: int) -> str:
    """The headers of the WebSocket upgrade that opens an MQTT connection after the
    upgrade's own (RFC 6455: native/ws.c writes them): Host, the subprotocol ``mqtt``."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"Host: {authority}\r\nSec-WebSocket-Protocol: mqtt\r\n"


def connack_kind(code: int) -> str:
    """The error kind of a refused CONNACK (``mqtt_connack_2``: identifier rejected)."""
    return f"mqtt_connack_{code}"


def failure_name(row: Failure, timeout_s: float) -> tuple[str, str]:
    """(error kind, example) of one of the C side's failures, named as the paho user names
    them (``connect``, ``timeout``) or by what the broker said (``mqtt_connack_N``)."""
    kind, key, _, _, _, raw = row
    named = transport_failure(kind, key, raw) or websocket_failure(kind, key, raw, timeout_s)
    if named is not None:
        return named
    if kind == K_TIMEOUT:
        return TIMEOUT, f"no acknowledgement within {timeout_s:g} s"
    if kind == K_CONNECT_TIMEOUT:
        return CONNECT, f"no CONNACK within {timeout_s:g} s"
    if kind == K_CLOSED:
        return CLOSED, "the broker closed the connection"
    if kind == K_PROTOCOL:
        return PROTOCOL, "a malformed or unexpected MQTT packet"
    if kind == K_CONNACK:
        return connack_kind(key), f"CONNACK refused: {CONNACK_REFUSED.get(key, key)}"
    if kind == K_REFUSED:  # MQTT 5: a PUBACK/PUBREC's failure
        return f"mqtt_reason_{key}", f"the broker refused the message (reason code {key:#x})"
    return "failure", f"failure {kind}/{key}"


@dataclass(frozen=True)
class Mqtt:
    """MQTT's options: publishers at ``qos`` to ``topic``/<client> (paced every
    ``interval_s``, else flat out with ``window`` in flight), subscribers to ``subscribe``;
    client ids ``client_prefix``-<n>; MQTT 3.1.1 (``version`` 4) or 5; over WebSocket at
    the path ``websocket`` (its upgrade's headers ``ws_tail``)."""

    protocol: ClassVar[str] = "mqtt"
    qos: int
    topic: str
    client_prefix: str
    interval_s: float = 0.0
    window: int = 1
    keepalive_s: int = 60
    clean_session: bool = True
    subscribe: str = ""
    version: int = 4
    websocket: str = ""
    ws_tail: str = ""

    def options(self) -> dict[str, Any]:
        return {
            "qos": self.qos,
            "period_s": self.interval_s,
            "window": self.window,
            "topic": self.topic,
            "client_prefix": self.client_prefix,
            "keepalive_s": self.keepalive_s,
            "clean_session": self.clean_session,
            "filter": self.subscribe,
            "protocol": self.version,
            "websocket": self.websocket,
            "ws_tail": self.ws_tail,
        }

    @staticmethod
    def name(row: Failure, timeout_s: float) -> tuple[str, str]:
        return failure_name(row, timeout_s)

    @staticmethod
    def interval(data: dict[str, Any], timeout_s: float) -> Interval:
        """What was published (and acknowledged) in one ``take()``, failures named."""
        return named_interval(failure_name, data, timeout_s, None)


class MqttLoop:
    """One generator process's engine speaking MQTT, as its Locust users and scripts drive
    it: connections by client number, the ledger per publisher at the end."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        qos: int,
        interval_s: float,
        topic: str,
        client_prefix: str,
        window: int = 1,
        timeout_s: float = 10.0,
        keepalive_s: int = 60,
        clean_session: bool = True,
        subscribe: str = "",
        sources: Sequence[str] = (),
        tls: bool = False,
        tls_ca: str | None = None,
        websocket: str = "",
        protocol: int = 4,
    ) -> None:
        session = Mqtt(
            qos=qos,
            topic=topic,
            client_prefix=client_prefix,
            interval_s=interval_s,
            window=window,
            keepalive_s=keepalive_s,
            clean_session=clean_session,
            subscribe=subscribe,
            version=protocol,
            websocket=websocket,  # ws:// (wss:// with tls): MQTT in binary frames
            ws_tail=upgrade_tail(host, port) if websocket else "",
        )
        self.engine = NativeEngine(
            host, port, session, timeout_s=timeout_s, tls=tls, tls_ca=tls_ca, sources=sources
        )
        self.e2e = Histogram()  # subscribers: every message's end-to-end latency
        self.received = 0
        self.ledger: dict[str, Any] | None = None

    def add(self, client: int, fraction: float = 0.0, subscriber: bool = False) -> int:
        """A new connection for MQTT client number ``client`` (paced: its first message at
        ``fraction`` of a period)."""
        return self.engine.add(fraction, client, SUBSCRIBER if subscriber else PUBLISHER)

    def remove(self, handle: int) -> None:
        """DISCONNECT and close; what it had in flight stays outstanding."""
        self.engine.remove(handle)

    def stop_sending(self) -> None:
        self.engine.stop_sending()

    def state(self) -> dict[str, Any]:
        state = self.engine.state()
        return {
            "connected": state["open"],
            "outstanding": state["outstanding"],
            "subscribed": state["subscribed"],
            "connect_failures": state["open_failures"],
            "disconnects": state["drops"],
            "publish_errors": state["publish_errors"],
            "first_sent": state["first_sent"],
        }

    def take(self) -> list[Interval]:
        """What was published (and acknowledged) since the last take; what the
        subscribers received joins ``received`` and ``e2e``."""
        parts = self.engine.engine.take()
        self.received += int(parts[0]["received"])
        self.e2e += histogram_from(parts[0]["e2e"])
        return [Mqtt.interval(parts[0], self.engine.timeout_s)]

    def finish(self) -> list[tuple[int, int, list[int]]]:
        """Stop the thread, disconnect every client: per publisher its client number, how
        many it published and which seqs were never acknowledged."""
        if self.ledger is None:
            self.ledger = self.engine.finish()
        return [(int(c), int(n), list(u)) for c, n, u in self.ledger["clients"]]

    def pace(self) -> tuple[int, Histogram]:
        """Paced: how many messages were a whole period late, and every message's lag
        (the whole run's: after ``finish``)."""
        ledger = self.ledger or {"late": 0, "pace_lag": (0, 0, 0, 0, [])}
        return int(ledger["late"]), histogram_from(ledger["pace_lag"])


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return ENGINE.bucket_index(value_us)
