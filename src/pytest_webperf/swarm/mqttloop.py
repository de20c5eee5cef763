"""The native MQTT loop's Python face: whether it is built, which MQTT user a run gets,
and its figures as the recorder's ``Interval`` (no gevent, no Locust: safe anywhere).

``_mqttloop`` is a C extension (``_mqttloop.c``: one epoll thread per generator process,
every user one MQTT 3.1.1 connection) built with the package where a C compiler and
Python's headers are found (Linux); where it is not, MQTT runs use the paho-mqtt user
(``swarm/child/paho.py``), as ``--webperf-user=lean`` or ``fast`` asks anyway.
"""

from __future__ import annotations

import base64
import errno
import os
import socket
from collections.abc import Sequence
from typing import Any

from pytest_webperf.errors import OptionError
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.extension import Tally, extension, histogram_from, socket_error
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    PROTOCOL,
    TIMEOUT,
    TLS,
    Interval,
    classify,
)

LOOP = extension("_mqttloop")
_mqttloop = LOOP.module

PAHO = "mqtt"  # the pure-Python user (paho-mqtt clients in the gevent hub)
NATIVE = "mqtt-native"  # this loop
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
    return LOOP.unavailable("the native MQTT loop")


def tls_built() -> bool:
    """Whether the native MQTT loop speaks TLS here (built with OpenSSL's headers)."""
    return LOOP.tls


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


def upgrade_request(host: str, port: int, path: str) -> bytes:
    """The HTTP request that opens an MQTT WebSocket (RFC 6455, subprotocol ``mqtt``); one
    random key for all of a loop's connections (the answer's Sec-WebSocket-Accept is not
    checked: a 101 is enough)."""
    key = base64.b64encode(os.urandom(16)).decode()
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return (
        f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: mqtt\r\n\r\n"
    ).encode()


def connack_kind(code: int) -> str:
    """The error kind of a refused CONNACK (``mqtt_connack_2``: identifier rejected)."""
    return f"mqtt_connack_{code}"


def interval_from(data: dict[str, Any], timeout_s: float) -> Interval:
    """One ``Engine.take()`` as an Interval, failures named as the paho user names them
    (``connect``, ``timeout``) or by what the broker said (``mqtt_connack_N``)."""
    tally = Tally()
    add = tally.add
    no_answer = f"no acknowledgement within {timeout_s:g} s"
    add(TIMEOUT, data["timeouts"], no_answer)
    add(CONNECT, data["connect_timeouts"], f"no CONNACK within {timeout_s:g} s")
    add(CLOSED, data["closed"], "the broker closed the connection")
    add(PROTOCOL, data["protocol"], "a malformed or unexpected MQTT packet")
    add(TLS, data.get("tls", 0), data.get("tls_message") or "TLS failed")
    for code, n in data["connack"].items():
        add(connack_kind(code), n, f"CONNACK refused: {CONNACK_REFUSED.get(code, code)}")
    for code, n in data.get("refused", {}).items():  # MQTT 5: a PUBACK/PUBREC's failure
        add(f"mqtt_reason_{code}", n, f"the broker refused the message (reason code {code:#x})")
    for number, n in data["connect_errno"].items():
        error = socket_error(number)
        add("emfile" if number == errno.EMFILE else CONNECT, n, str(error))
    for number, n in data["io_errno"].items():
        error = socket_error(number)
        add(classify(error), n, str(error))
    errors = sum(tally.kinds.values())
    return Interval(
        requests=data["ok"] + errors,
        errors=errors,
        bytes=data["bytes"],
        histogram=histogram_from(data["latency"]),
        error_kinds=tally.kinds,
        error_examples=tally.examples,
    )


class MqttLoop:
    """One generator process's native MQTT loop: connections added and removed by
    Locust's users; every packet built, sent and parsed by the C thread."""

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
        if _mqttloop is None:
            raise RuntimeError(unavailable())
        family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
        self.timeout_s = timeout_s
        self.engine = _mqttloop.Engine(
            int(family),
            address[0],
            port,
            qos,
            interval_s,
            window,
            timeout_s,
            topic,
            client_prefix,
            keepalive_s,
            clean_session,
            subscribe,
            protocol,
        )
        if sources:
            self.engine.bind_sources(list(sources))
        if tls:  # mqtts://: the C loop's own OpenSSL client (unverified without a CA)
            self.engine.use_tls(host, tls_ca)
        if websocket:  # ws:// (wss:// with tls): MQTT in binary frames after an upgrade
            self.engine.use_websocket(upgrade_request(host, port, websocket))
        self.received = 0  # subscribers: messages received, end-to-end latency
        self.e2e = Histogram()

    def add(self, client: int, fraction: float = 0.0, subscriber: bool = False) -> int:
        """A new connection for MQTT client number ``client``."""
        return int(self.engine.add(client, fraction, subscriber))

    def remove(self, handle: int) -> None:
        self.engine.remove(handle)

    def stop_sending(self) -> None:
        self.engine.stop_sending()

    def state(self) -> dict[str, Any]:
        connected, outstanding, subscribed, failures, disconnects, errors, first = (
            self.engine.state()
        )
        return {
            "connected": connected,
            "outstanding": outstanding,
            "subscribed": subscribed,
            "connect_failures": failures,
            "disconnects": disconnects,
            "publish_errors": errors,
            "first_sent": first,
        }

    def take(self) -> list[Interval]:
        """What was published (and acknowledged) since the last take (one part)."""
        data = self.engine.take()
        self.received += int(data["received"])
        self.e2e += histogram_from(data["e2e"])
        return [interval_from(data, self.timeout_s)]

    def pace(self) -> tuple[int, Histogram]:
        """Paced: how many messages were a whole period late, and every message's lag."""
        late, lag = self.engine.pace()
        return int(late), histogram_from(lag)

    def finish(self) -> list[tuple[int, int, list[int]]]:
        """Stop the thread, disconnect every client: the ledger, per publisher its
        client number, how many it published and which seqs were never acknowledged."""
        return [(int(c), int(n), list(u)) for c, n, u in self.engine.finish()]


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return LOOP.bucket_index(value_us)
