"""An MQTT measurement without the fixture: every repetition of an MQTT swarm against a
target as one Measurement (the measurement loop with MQTT's kind of load), for the
end-to-end tests that drive the loop directly."""

from __future__ import annotations

from pytest_webperf.measurement.loop import run_repetitions
from pytest_webperf.measurement.mqtt import MqttTelemetry
from pytest_webperf.measurement.plan import MonitorFactory, RunPlan, no_monitor
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.targets.base import Target


def measure_mqtt(
    target: Target,
    telemetry: MqttTelemetry,
    plan: RunPlan,
    *,
    nodeid: str,
    name: str | None = None,
    monitor_factory: MonitorFactory = no_monitor,
) -> Measurement:
    """Every repetition of an MQTT swarm against ``target``, as one Measurement (the
    measurement loop of ``measurement/loop.py`` with this kind of load)."""
    runs = run_repetitions(target, telemetry, plan, monitor_factory=monitor_factory)
    return Measurement(
        nodeid=nodeid,
        name=name or telemetry.name,
        server=target.name,
        concurrency=plan.concurrency,
        workload=telemetry.workload,
        runs=tuple(runs),
        target=target.describe(),
    )
