"""The native MQTT user: Locust users whose messages the C loop publishes (swarm only).

As the native HTTP user (``native_http.py``): Locust spawns, counts, stops and distributes
the users; each user *is* one MQTT connection of its process's ``mqttloop.MqttLoop`` (the
native engine speaking MQTT), added when Locust starts it and removed when Locust stops
it. The engine's thread connects, publishes (paced or flat out, QoS 0/1/2 with the whole handshake),
acknowledges and keeps the connection alive outside the GIL; what it completed joins
the recorder at every roll, and at the end (Locust's ``test_stopping``) it stops
publishing, gives outstanding acknowledgements ``grace_s``, and hands the paho user's
ledger (``mqtt.Ledger``'s report: per client published and unacknowledged seqs) to
the parent or the master.
"""

from __future__ import annotations

import atexit
import itertools
import random
import time
from typing import Any, ClassVar

import gevent
from gevent.event import Event
from locust import User, task

from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.swarm.child.loop_user import LoopUser
from pytest_webperf.swarm.child.paho import write_report
from pytest_webperf.swarm.mqttloop import MqttLoop
from pytest_webperf.swarm.spec import SwarmSpec


class NativeLedger:
    """The loop's accounting at the end, in the paho user's report format."""

    def __init__(self, load: MqttLoad, loop: MqttLoop, to_file: bool) -> None:
        self.load = load
        self.loop = loop
        self.to_file = to_file  # else a worker's: the master merges and writes them
        self.report: dict[str, Any] | None = None

    def on_stopping(self, **_: Any) -> None:
        """Stop publishing, give outstanding acknowledgements a grace, write the report."""
        if self.report is not None:
            return
        self.loop.stop_sending()
        deadline = time.monotonic() + self.load.grace_s
        while self.loop.state()["outstanding"] and time.monotonic() < deadline:
            gevent.sleep(0.05)
        self.write()

    def write(self) -> None:
        clients = self.loop.finish()
        late, lag = self.loop.pace()
        state = self.loop.state()
        self.report = {
            "clients": [[c, n, unacked] for c, n, unacked in sorted(clients)],
            "pace_lag": lag.to_dict(),
            "late": late,
            "connect_failures": state["connect_failures"],
            "disconnects": state["disconnects"],
            "publish_errors": state["publish_errors"],
            "first_sent": state["first_sent"],
            "stopped_at": time.time(),
        }
        if self.to_file and self.load.report_path:
            write_report(self.load.report_path, self.report)


class NativeMqttUser(LoopUser):
    """One MQTT connection of the process's native loop (the swarm's own user class)."""

    abstract = True
    loop: ClassVar[MqttLoop]
    ledger: ClassVar[NativeLedger]
    numbers: ClassVar[itertools.count[int]]

    @task
    def hold(self) -> None:
        client = next(self.numbers)
        handle = self.loop.add(client, random.random())
        try:
            Event().wait()  # until Locust stops this user
        finally:  # the connection goes with the user (after the end: a no-op)
            self.loop.remove(handle)


def make_user(spec: SwarmSpec, index: int = 0) -> type[User]:
    """The swarm's native MQTT user for ``spec.mqtt`` (``--webperf-user=native`` or
    ``auto`` where the loop is built)."""
    if spec.mqtt is None:
        raise ValueError("user_class 'mqtt-native' needs SwarmSpec.mqtt")
    load = spec.mqtt
    loop = MqttLoop(
        load.host,
        load.port,
        qos=load.qos,
        interval_s=load.interval_s,
        topic=load.topic,
        client_prefix=load.client_prefix,
        window=load.window,
        timeout_s=spec.timeout_s,
        keepalive_s=load.keepalive_s,
        clean_session=load.clean_session,
        sources=load.sources,
        tls=load.tls,
        tls_ca=load.tls_ca,
        websocket=load.websocket,
        protocol=load.protocol,
    )
    atexit.register(loop.finish)

    class WebperfNativeMqttUser(NativeMqttUser):
        pass

    WebperfNativeMqttUser.host = spec.host
    WebperfNativeMqttUser.loop = loop
    WebperfNativeMqttUser.ledger = NativeLedger(load, loop, to_file=not spec.distributed)
    WebperfNativeMqttUser.numbers = itertools.count(spec.client_ids(index).start)
    WebperfNativeMqttUser.channel = (f"MQTT-QOS{load.qos}", f"{load.topic}/<clientId>")
    return WebperfNativeMqttUser
