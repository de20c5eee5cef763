"""One MQTT measurement: observer up, swarm publishes, delivery drains, every message accounted.

    target = webperf.server("go-mqtt")
    m = webperf.mqtt(target, concurrency=200, interval="500ms", qos=2)
    run = m.runs[0].mqtt   # MqttResult: published, acked, observer/store Delivery, tps

``MqttTelemetry`` is a ``loop.LoadKind``: its repetitions go through the same loop
as HTTP's (placement, the generator-bound rule, a target that dies). Per repetition:
start the observer (its own process, subscribed before anything is published), run the
swarm (warm-up + measured phase; the swarm stops publishing and gives outstanding
acknowledgements a grace), then wait until the observer and the store have everything
that was acknowledged or nothing has arrived for ``quiet`` seconds (bounded by
``drain``), and account. A server that dies mid-run fails the measurement as an HTTP
target does (``loop.TargetDied``), never a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from pytest_webperf.errors import SwarmError, TargetError
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.mqtt import MqttResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.models.workload import Workload
from pytest_webperf.mqtt.accounting import Published, account, delay_series, seed_tps
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.mqtt.store import TelemetryStore, container_sql
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target


@dataclass(frozen=True)
class MqttTelemetry:
    """Seed 002's load as a ``loop.LoadKind``: every user one MQTT client publishing
    telemetry at ``qos``, one message per ``interval_s`` (0: flat out), every message
    accounted for after the swarm (observer, the server's store)."""

    interval_s: float = 0.5
    qos: int = 2
    fresh = False
    drain_s: float = 60.0  # longest wait for deliveries after the swarm stopped
    # Nothing new for this long while messages are missing: they are lost, not late. Long
    # enough for a JVM's pause or a reconnect; a stalled broker (seed 002: minutes) shows
    # as backlog only with a drain longer than the stall.
    quiet_s: float = 10.0
    grace_s: float = 5.0
    observe: bool = True
    topic: str = "telemetry"
    user_class: str = "mqtt"  # the swarm's MQTT user: mqtt (paho) or mqtt-native (mqttloop)
    protocol: int = 4  # the publishers' MQTT: 4 is 3.1.1, 5 is 5.0 (the observer's is 3.1.1)

    @property
    def name(self) -> str:
        pace = f"every {self.interval_s * 1000:g}ms" if self.interval_s > 0 else "flat out"
        version = " 5.0" if self.protocol == 5 else ""  # 3.1.1's names are as they were
        return f"MQTT{version} qos{self.qos} {pace}"

    @property
    def workload(self) -> Workload:
        return Workload(path=f"{self.topic}/<clientId>", method=f"MQTT-QOS{self.qos}")

    def check(self, target: Target) -> None:
        wiring(target)

    @contextmanager
    def round(self, target: Target, plan: RunPlan, repetition: int) -> Iterator[MqttRound]:
        wired = wiring(target)
        since = time.time()
        with tempfile.TemporaryDirectory(prefix="webperf-mqtt-") as tmp:
            directory = Path(tmp)
            load = MqttLoad(
                host=wired.broker_host,
                port=wired.broker_port,
                topic=self.topic,
                qos=self.qos,
                interval_s=self.interval_s,
                grace_s=self.grace_s,
                client_prefix=f"webperf-{os.getpid()}-{repetition}",
                report_path=str(directory / "publishers.json"),
                tls=wired.tls,
                websocket=wired.websocket,
                protocol=self.protocol,
            )
            spec = replace(
                plan.swarm(
                    f"{wired.scheme}://{wired.broker_host}:{wired.broker_port}",
                    user_class=self.user_class,
                    mqtt=load,
                ),
                timeout_s=plan.timeout_s + self.grace_s,
            )
            longest = plan.warmup_s + plan.duration_s + self.drain_s + plan.concurrency / 10 + 120
            with observing(self, wired, directory, longest, plan.timeout_s) as seen:
                yield MqttRound(spec, self, plan.concurrency, wired, seen, since, load)


@dataclass
class MqttRound:
    """One MQTT repetition: after the swarm, drain and account every message."""

    spec: SwarmSpec
    telemetry: MqttTelemetry
    users: int
    wired: Wiring
    observer: Observer | None
    since: float
    load: MqttLoad

    def account(self, result: RunResult) -> RunResult:
        report = json.loads(Path(self.load.report_path).read_text())
        published = published_from(report)
        probes: dict[str, Probe] = {}
        if self.observer is not None:
            probes["observer"] = self.observer.received
        store, since = self.wired.store, self.since
        if store is not None:
            probes["store"] = lambda: store.count(since)
        acked = published.total - published.unacked_total
        telemetry = self.telemetry
        waited, arriving = drain(acked, probes, telemetry.drain_s, telemetry.quiet_s)
        seen = self.observer.finish() if self.observer is not None else None
        mqtt = mqtt_result(
            telemetry,
            self.users,
            report,
            published,
            seen=seen,
            store=store,
            since=since,
            arriving=arriving,
            waited=waited,
        )
        return replace(result, mqtt=mqtt)


@dataclass(frozen=True)
class Wiring:
    """Where the broker listens and how to read the server's store (None: no store)."""

    broker_port: int
    store: TelemetryStore | None
    broker_host: str = "127.0.0.1"  # --webperf-target-bind's address, where workers reach it
    tls: bool = False  # mqtts:// (server.toml ``tls = true``: mosquitto-tls)
    websocket: str = ""  # ws://: its path (server.toml ``[mqtt] transport = "websockets"``)

    @property
    def scheme(self) -> str:
        if self.websocket:
            return "wss" if self.tls else "ws"
        return "mqtts" if self.tls else "mqtt"


def websocket_of(spec: Any) -> str:
    """The WebSocket path of a broker whose ``[mqtt]`` table says ``transport =
    "websockets"`` (``path``, default ``/mqtt``), else "" (TCP)."""
    settings = spec.extra.get("mqtt")
    if isinstance(settings, dict) and settings.get("transport") == "websockets":
        return str(settings.get("path", "/mqtt"))
    return ""


def wiring(target: Target) -> Wiring:
    """The broker and store of a catalogue target: ``kind = "mqtt"`` itself, or the parts
    named in its server.toml ``[mqtt]`` table (``broker``, ``store``)."""
    spec = getattr(target, "spec", None)
    containers = getattr(target, "containers", None)
    if spec is None or containers is None:
        raise TargetError(
            f"{target.name}: MQTT runs need a catalogue target (a broker and "
            "its store in containers), not an external URL"
        )
    if spec.kind == "mqtt":
        return Wiring(
            target.port, None, target.host, tls=bool(spec.tls), websocket=websocket_of(spec)
        )
    if spec.mqtt_broker is None:
        raise TargetError(
            f"{target.name}: not an MQTT target: its server.toml has neither "
            'kind = "mqtt" nor an [mqtt] table naming its broker'
        )
    by_name = {c.spec.name: c for c in containers}
    broker = by_name[spec.mqtt_broker]
    settings = spec.extra.get("mqtt")
    store_part = settings.get("store") if isinstance(settings, dict) else None
    store = None
    if store_part in by_name:
        db = by_name[store_part]
        store = TelemetryStore(container_sql(db.container.get_wrapped_container(), db.port))
    return Wiring(broker.port, store, broker.host)


class Observer:
    """The observer process (``pytest_webperf.mqtt.observer``), bounded and always reaped."""

    def __init__(self, wired: Wiring, topic: str, qos: int, directory: Path, max_s: float) -> None:
        self.out = directory / "observer.json"
        self.status_path = Path(f"{self.out}.status")
        self.log = directory / "observer.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pytest_webperf.mqtt.observer",
                    "--host",
                    wired.broker_host,
                    "--port",
                    str(wired.broker_port),
                    "--topic",
                    f"{topic}/#",
                    "--qos",
                    str(qos),
                    "--out",
                    str(self.out),
                    "--max-seconds",
                    str(max_s),
                    *(["--tls"] if wired.tls else []),
                    *(["--websocket", wired.websocket] if wired.websocket else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError):
            return {}

    def wait_subscribed(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status().get("subscribed"):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise SwarmError(
            f"the MQTT observer did not subscribe within {timeout:.0f}s: {self._stderr()}"
        )

    def received(self) -> int:
        return int(self.status().get("received", 0))

    def finish(self) -> dict[str, Any]:
        """Stop it; what it saw."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        try:
            return dict(json.loads(self.out.read_text()))
        except (OSError, ValueError):
            raise SwarmError(f"the MQTT observer left no result: {self._stderr()}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def _stderr(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:] or "(no output)"
        except OSError:
            return "(no output)"


@contextmanager
def observing(
    telemetry: MqttTelemetry, wired: Wiring, directory: Path, longest_s: float, timeout_s: float
) -> Iterator[Observer | None]:
    if not telemetry.observe:
        yield None
        return
    observer = Observer(wired, telemetry.topic, telemetry.qos, directory, longest_s)
    try:
        observer.wait_subscribed(timeout_s)
        yield observer
    finally:
        observer.kill()


class Probe(Protocol):
    def __call__(self) -> int: ...


def drain(
    expected: int, probes: Mapping[str, Probe], timeout: float, quiet: float
) -> tuple[float, dict[str, bool]]:
    """Wait until every probe counts ``expected`` or none moved for ``quiet`` seconds.

    Returns the time waited and, per probe, whether it was still arriving at the cutoff."""
    start = time.monotonic()
    values = {name: -1 for name in probes}
    changed = dict.fromkeys(probes, start)
    while True:
        now = time.monotonic()
        for name, probe in probes.items():
            value = probe()
            if value != values[name]:
                values[name], changed[name] = value, now
        if all(v >= expected for v in values.values()):
            return now - start, dict.fromkeys(probes, False)
        if all(now - changed[n] >= quiet for n in probes) or now - start >= timeout:
            arriving = {n: values[n] < expected and now - changed[n] < quiet for n in probes}
            return now - start, arriving
        time.sleep(0.5)


def published_from(report: Mapping[str, Any]) -> Published:
    counts = {int(c): int(n) for c, n, _ in report["clients"]}
    unacked = {int(c): frozenset(int(s) for s in u) for c, _, u in report["clients"] if u}
    return Published(counts, unacked)


def mqtt_result(
    telemetry: MqttTelemetry,
    users: int,
    report: Mapping[str, Any],
    published: Published,
    *,
    seen: Mapping[str, Any] | None,
    store: TelemetryStore | None,
    since: float,
    arriving: Mapping[str, bool],
    waited: float,
) -> MqttResult:
    observed = stored = None
    span_end = 0.0
    if seen is not None:
        copies = [(int(c), s) for c, seqs in seen["seqs"].items() for s in seqs]
        observed = account(
            "observer",
            published,
            copies,
            still_arriving=arriving.get("observer", False),
            latency=Histogram.from_dict(seen["latency"]),
        )
        span_end = float(seen.get("last_rx", 0.0))
    tps = None
    if store is not None:
        rows = store.rows(since)
        latency = Histogram()
        latency.record_many(max(0, int((r.received_at - r.sent_at) * 1e6)) for r in rows)
        stored = replace(
            account(
                "store",
                published,
                [(r.client, r.seq) for r in rows],
                still_arriving=arriving.get("store", False),
                latency=latency,
            ),
            delay=delay_series(
                ((r.sent_at, r.received_at) for r in rows), float(report["first_sent"])
            ),
        )
        if rows:
            span_end = max(r.received_at for r in rows)
            tps = seed_tps(len(rows), float(report["first_sent"]), span_end)
    lag = Histogram.from_dict(report["pace_lag"])
    first = float(report["first_sent"])
    return MqttResult(
        qos=telemetry.qos,
        interval_s=telemetry.interval_s,
        users=users,
        published=published.total,
        acked=published.total - published.unacked_total,
        unacked=published.unacked_total,
        publish_errors=int(report["publish_errors"]),
        connect_failures=int(report["connect_failures"]),
        disconnects=int(report["disconnects"]),
        late=int(report["late"]),
        pace_lag=Latency.of(lag) if lag.count else None,
        observer=observed,
        store=stored,
        tps=tps,
        span_s=max(0.0, span_end - first) if first else 0.0,
        drain_s=waited,
    )
