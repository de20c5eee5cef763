"""How many MQTT connections can this machine hold, every message accounted? By hand,
not in CI.

    .venv/bin/python benchmarks/mqtt_scale.py [--users 19000] [--workers 2]
                                              [--user mqtt-native] [--interval 10s]
                                              [--qos 1] [--duration 30s] [--spawn-rate 2000]

One MQTT measurement (``webperf.mqtt``'s loop: observer, swarm, drain, accounting)
against the catalogue's Mosquitto with ``--users`` connections over ``--workers``
local generator processes, paced (one message per client per ``--interval``).
Meanwhile the resident memory of the generator processes and of the broker is
sampled every second: the peak over the connections is the memory per connection
(the kernel's socket buffers are not in it). Printed: the accounting (published,
acknowledged, delivered to the observer once, lost, duplicated), connect failures,
the open-files limits that bound it, and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from pytest_webperf.measurement.loop import RunPlan
from pytest_webperf.measurement.mqtt import MqttTelemetry
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.values import parse_duration

# one MQTT measurement outside pytest: the e2e tests' helper (not part of the plugin)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from mqtt_runs import measure_mqtt


class Sampler:
    """Peak resident memory of this process's swarm children and of the broker."""

    def __init__(self, broker_pid: int) -> None:
        self.broker = psutil.Process(broker_pid)
        self.broker_base = self.broker.memory_info().rss
        self.peak_generators = 0
        self.peak_broker = 0
        self.peak_processes = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            generators = [
                p
                for p in psutil.Process().children(recursive=True)
                if "pytest_webperf.swarm" in " ".join(self.cmdline(p))
            ]
            rss = sum(self.rss(p) for p in generators)
            self.peak_generators = max(self.peak_generators, rss)
            self.peak_processes = max(self.peak_processes, len(generators))
            self.peak_broker = max(self.peak_broker, self.rss(self.broker))

    @staticmethod
    def cmdline(p: psutil.Process) -> list[str]:
        try:
            return p.cmdline()
        except psutil.Error:
            return []

    @staticmethod
    def rss(p: psutil.Process) -> int:
        try:
            return int(p.memory_info().rss)
        except psutil.Error:
            return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=19000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--user", default="mqtt-native", choices=("mqtt-native", "mqtt"))
    parser.add_argument("--interval", default="10s")
    parser.add_argument("--qos", type=int, default=1)
    parser.add_argument("--duration", default="30s")
    parser.add_argument("--spawn-rate", type=float, default=2000.0)
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"load average at start: {Path('/proc/loadavg').read_text().strip()}")
    print(f"open files here: soft {soft}, hard {hard}")
    telemetry = MqttTelemetry(
        interval_s=parse_duration(args.interval),
        qos=args.qos,
        drain_s=60,
        quiet_s=10,
        user_class=args.user,
    )
    plan = RunPlan(
        concurrency=args.users,
        duration_s=parse_duration(args.duration),
        warmup_s=5,
        repeat=1,
        workers=args.workers,
        spawn_rate=args.spawn_rate,
        timeout_s=30,
    )
    with start_target(Catalog(default_directories()), "mosquitto") as target:
        container: Any = target.containers[0].container.get_wrapped_container()
        container.reload()
        broker_pid = int(container.attrs["State"]["Pid"])
        limits = Path(f"/proc/{broker_pid}/limits").read_text()
        soft_b, hard_b = limits.split("Max open files")[1].split()[:2]
        print(f"broker's open files: soft {soft_b}, hard {hard_b}")
        sampler = Sampler(broker_pid)
        sampler.thread.start()
        started = time.monotonic()
        measurement = measure_mqtt(target, telemetry, plan, nodeid="scale")
        sampler.stop.set()
        wall = time.monotonic() - started
    run = measurement.runs[0]
    result = run.mqtt
    assert result is not None
    print(f"wall {wall:.0f} s; generator processes: {sampler.peak_processes}")
    print(
        f"published {result.published}, acked {result.acked}, unacked {result.unacked}, "
        f"connect failures {result.connect_failures}, disconnects {result.disconnects}, "
        f"late {result.late}"
    )
    if result.pace_lag is not None:
        lag = result.pace_lag
        print(
            f"pace lag: p50 {lag.p50_ms:.1f} ms, p99 {lag.p99_ms:.1f} ms, max {lag.max_ms:.0f} ms"
        )
    if result.observer is not None:
        o = result.observer
        print(
            f"observer: delivered {o.delivered}, duplicates {o.duplicates}, lost {o.lost}, "
            f"backlog {o.backlog}, unexpected {o.unexpected}"
        )
    print(f"errors by kind (measured phase): {dict(run.error_kinds)}")
    users = max(args.users, 1)
    print(
        f"peak RSS: generators {sampler.peak_generators / 2**20:.0f} MiB "
        f"({sampler.peak_generators / users / 1024:.1f} KiB per connection); broker "
        f"{sampler.peak_broker / 2**20:.0f} MiB "
        f"({(sampler.peak_broker - sampler.broker_base) / users / 1024:.1f} KiB per connection)"
    )
    print(f"load average at end: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
