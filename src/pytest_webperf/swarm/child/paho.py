"""The swarm's MQTT user: paho-mqtt clients driven from the gevent hub (swarm child only).

One thread per client (``loop_start()``) breaks under gevent at a few hundred clients
(select() cannot watch descriptors above 1024) and costs ~2.5x the CPU. Instead each
client's socket gets libev read/write watchers that call paho's ``loop_read`` /
``loop_write`` in the hub, and one greenlet calls ``loop_misc`` (keepalive) for all.

Every message carries seed 002's fields plus ``seq`` (per client, from 0) and ``sentAt``
(Unix seconds), so that consumers can tell which message they got and when it was sent.
At the end (Locust's ``test_stopping``) the users stop publishing, outstanding
acknowledgements get ``grace_s`` to arrive, and the per-client accounting is written to
``MqttLoad.report_path`` for the parent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import ssl
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from locust import User, task
from locust.exception import StopUser
from paho.mqtt.client import Client, MQTTv5, MQTTv311
from paho.mqtt.enums import CallbackAPIVersion

from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.recorder import Recorder
from pytest_webperf.swarm.spec import SwarmSpec

READ, WRITE = 1, 2  # libev event masks
# MQTT 5's CONNACK reasons paho gives for 3.1.1's return codes, and those codes
V311_RETURN_CODES = {0x84: 1, 0x85: 2, 0x88: 3, 0x86: 4, 0x87: 5}


def payload(client_id: int, seq: int, sent_at: float, rng: random.Random) -> bytes:
    """Seed 002's JSON message, with the generator's sequence number and send time."""
    return json.dumps(
        {
            "clientId": client_id,
            "seq": seq,
            "sentAt": sent_at,
            "temp": round(rng.uniform(20, 40), 1),
            "humidity": round(rng.uniform(10, 90), 1),
            "light": round(rng.uniform(0, 100), 1),
        },
        separators=(",", ":"),
    ).encode()


class HubDriver:
    """Runs every client's network I/O from the gevent hub instead of a thread each."""

    def __init__(self) -> None:
        self.loop = gevent.get_hub().loop
        self.watchers: dict[Client, tuple[Any, Any]] = {}
        self.misc = gevent.spawn(self._misc_forever)

    def attach(self, client: Client) -> None:
        client.on_socket_open = self._open
        client.on_socket_close = self._close
        client.on_socket_register_write = self._want_write
        client.on_socket_unregister_write = self._done_writing

    def _open(self, client: Client, _userdata: Any, sock: Any) -> None:
        fd = sock.fileno()
        reader = self.loop.io(fd, READ)
        writer = self.loop.io(fd, WRITE)
        reader.start(self._guard(client.loop_read))
        self.watchers[client] = (reader, writer)

    def _close(self, client: Client, _userdata: Any, _sock: Any) -> None:
        for watcher in self.watchers.pop(client, ()):
            watcher.stop()
            watcher.close()

    def _want_write(self, client: Client, _userdata: Any, _sock: Any) -> None:
        pair = self.watchers.get(client)
        if pair is not None and not pair[1].active:
            pair[1].start(self._guard(client.loop_write))

    def _done_writing(self, client: Client, _userdata: Any, _sock: Any) -> None:
        pair = self.watchers.get(client)
        if pair is not None:
            pair[1].stop()

    @staticmethod
    def _guard(step: Callable[[], Any]) -> Callable[[], None]:
        """A watcher callback must never raise into the hub."""

        def call() -> None:
            # paho reports a broken connection through on_disconnect
            with contextlib.suppress(Exception):
                step()

        return call

    def _misc_forever(self) -> None:
        while True:
            gevent.sleep(1.0)
            for client in list(self.watchers):
                try:
                    client.loop_misc()
                except Exception:  # one broken client must not stop the others
                    continue


class Ledger:
    """What every user published and had acknowledged; written once at the end."""

    def __init__(self, load: MqttLoad, recorder: Recorder, to_file: bool = True) -> None:
        self.load = load
        self.recorder = recorder
        self.to_file = to_file  # else a worker's: the master merges and writes them
        self.report: dict[str, Any] | None = None
        self.published: dict[int, int] = {}
        self.outstanding: dict[int, dict[int, int]] = {}  # clientId -> {seq: mid}
        self.pace_lag = Histogram()
        self.late = 0
        self.connect_failures = 0
        self.disconnects = 0
        self.publish_errors = 0
        self.first_sent = 0.0
        self.stopping = False
        self.written = False

    def outstanding_total(self) -> int:
        return sum(len(v) for v in self.outstanding.values())

    def on_stopping(self, **_: Any) -> None:
        """Stop publishing, give outstanding acknowledgements a grace, write the report."""
        self.stopping = True
        deadline = time.monotonic() + self.load.grace_s
        while self.outstanding_total() and time.monotonic() < deadline:
            gevent.sleep(0.05)
        self.write()

    def write(self) -> None:
        if self.written:
            return
        self.written = True
        self.report = {
            "clients": [
                [cid, n, sorted(self.outstanding.get(cid, {}))]
                for cid, n in sorted(self.published.items())
            ],
            "pace_lag": self.pace_lag.to_dict(),
            "late": self.late,
            "connect_failures": self.connect_failures,
            "disconnects": self.disconnects,
            "publish_errors": self.publish_errors,
            "first_sent": self.first_sent,
            "stopped_at": time.time(),
        }
        if self.to_file and self.load.report_path:
            write_report(self.load.report_path, self.report)


def write_report(path: str, report: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as out:
        json.dump(report, out)
    os.replace(tmp, path)


def make_user(spec: SwarmSpec, index: int = 0) -> type[Any]:
    if spec.mqtt is None:
        raise ValueError("user_class 'mqtt' needs SwarmSpec.mqtt")
    load: MqttLoad = spec.mqtt
    numbers = itertools.count(spec.client_ids(index).start)
    state: dict[str, Any] = {}

    def shared(environment: Any) -> tuple[HubDriver, Ledger]:
        if not state:
            recorder: Recorder = environment.webperf_recorder
            ledger = Ledger(load, recorder, to_file=not spec.distributed)
            environment.webperf_ledger = ledger  # a worker hands its report to the master
            environment.events.test_stopping.add_listener(ledger.on_stopping)
            state.update(driver=HubDriver(), ledger=ledger)
        return state["driver"], state["ledger"]

    class MqttUser(User):
        """One MQTT client: connect, then publish paced (or flat out) until stopped."""

        host = spec.host
        webperf_records_itself = True

        def on_start(self) -> None:
            self.driver, self.ledger = shared(self.environment)
            self.client_id = next(numbers)
            self.rng = random.Random(self.client_id)
            self.seq = 0
            self.in_flight: dict[int, tuple[int, float]] = {}  # mid -> (seq, perf time)
            self.acked = gevent.event.Event()
            self.connected = gevent.event.Event()
            self.refused = 0  # a CONNACK's refusal, as MQTT 3.1.1's return code (or 5's reason)
            self.client = self._client()
            try:
                if load.protocol == 5:
                    self.client.connect(
                        load.host,
                        load.port,
                        keepalive=load.keepalive_s,
                        clean_start=load.clean_session,
                    )
                else:
                    self.client.connect(load.host, load.port, keepalive=load.keepalive_s)
                connected = self.connected.wait(timeout=spec.timeout_s)
            except OSError:
                connected = False
            if not connected or self.refused:
                self.ledger.connect_failures += 1
                self.recorder.record_error(
                    f"mqtt_connack_{self.refused}" if self.refused else "connect"
                )
                raise StopUser()

        @property
        def recorder(self) -> Recorder:
            return self.ledger.recorder

        def _client(self) -> Client:
            session = {"clean_session": load.clean_session} if load.protocol == 4 else {}
            client = Client(
                CallbackAPIVersion.VERSION2,
                client_id=f"{load.client_prefix}-{self.client_id}",
                protocol=MQTTv5 if load.protocol == 5 else MQTTv311,
                transport="websockets" if load.websocket else "tcp",
                **session,
            )
            if load.websocket:
                client.ws_set_options(path=load.websocket)
            if load.tls:  # mqtts://: verified against tls_ca if given, else not at all
                client.tls_set(
                    ca_certs=load.tls_ca,
                    cert_reqs=ssl.CERT_REQUIRED if load.tls_ca else ssl.CERT_NONE,
                )
                client.tls_insecure_set(not load.tls_ca)
            client.on_connect = self._on_connect
            client.on_disconnect = self._on_disconnect
            client.on_publish = self._on_publish
            self.driver.attach(client)
            return client

        def _on_connect(self, _c: Client, _u: Any, _flags: Any, reason: Any, _p: Any) -> None:
            if reason.is_failure:  # paho words 3.1.1's return codes as 5's reasons: back
                code = int(reason.value)
                self.refused = V311_RETURN_CODES.get(code, code) if load.protocol == 4 else code
            self.connected.set()

        def _on_disconnect(self, *_: Any) -> None:
            self.ledger.disconnects += 1

        def _on_publish(self, _c: Client, _u: Any, mid: int, reason: Any, _p: Any) -> None:
            entry = self.in_flight.pop(mid, None)
            if entry is None:
                return
            if reason.is_failure:  # MQTT 5: the broker refused it (stays unacknowledged)
                self.recorder.record_error(f"mqtt_reason_{int(reason.value)}")
                self.acked.set()
                return
            seq, sent = entry
            self.ledger.outstanding.get(self.client_id, {}).pop(seq, None)
            self.recorder.record(int((time.perf_counter() - sent) * 1e6), 0)
            self.acked.set()

        def _publish(self) -> None:
            now = time.time()
            body = payload(self.client_id, self.seq, now, self.rng)
            info = self.client.publish(f"{load.topic}/{self.client_id}", body, qos=load.qos)
            ledger = self.ledger
            if info.rc:
                ledger.publish_errors += 1
                self.recorder.record_error(f"mqtt_rc_{info.rc}")
                return
            if not ledger.first_sent:
                ledger.first_sent = now
            ledger.published[self.client_id] = self.seq + 1
            if load.qos:
                self.in_flight[info.mid] = (self.seq, time.perf_counter())
                ledger.outstanding.setdefault(self.client_id, {})[self.seq] = info.mid
            else:
                self.recorder.record(0, len(body))
            self.seq += 1
            self.acked.clear()
            self.client.loop_write()  # now, not at the hub's next turn

        @task
        def publish_forever(self) -> None:
            if load.interval_s > 0:
                self._paced()
            else:
                self._flat_out()

        def _paced(self) -> None:
            interval = load.interval_s
            due = time.monotonic() + self.rng.uniform(0, interval)  # spread the users' phases
            while not self.ledger.stopping:
                wait = due - time.monotonic()
                if wait > 0:
                    gevent.sleep(wait)
                    continue
                lag = -wait
                self.ledger.pace_lag.record(int(lag * 1e6))
                if lag > interval:  # behind by a whole slot: count it, do not burst to catch up
                    self.ledger.late += 1
                    due = time.monotonic()
                self._publish()
                due += interval

        def _flat_out(self) -> None:
            while not self.ledger.stopping:
                self._publish()
                if not load.qos:  # nothing to wait for: let the hub (and Locust's stop) run
                    gevent.sleep(0)
                elif not self.acked.wait(timeout=spec.timeout_s):
                    self.recorder.record_error("timeout")

        def on_stop(self) -> None:
            if hasattr(self, "client") and self.client.is_connected():
                self.client.disconnect()

    return MqttUser
