"""An MQTT repetition's result as saved: where the messages went, per consumer (Delivery),
and the run's accounting (MqttResult)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pytest_webperf.models.samples import Latency, _known


@dataclass(frozen=True)
class DelayPoint:
    """The publish-to-store delay of the messages sent in one second of a run: a
    subscriber or a broker that falls behind shows it growing from second to second."""

    t_s: int  # the second they were sent in, from the run's first send
    count: int  # messages sent in that second that were stored
    p50_ms: float
    p99_ms: float
    max_ms: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DelayPoint:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Delivery:
    """Where one consumer's copy of an MQTT run went (the observer, or the server's store).

    ``missing`` counts PUBCOMP-acknowledged messages (QoS 2; PUBACK at QoS 1) that this
    consumer never got by the cutoff; they are ``backlog`` if deliveries were still
    arriving at the cutoff (late, not gone), else ``lost``.
    """

    consumer: str  # "observer" or "store"
    received: int  # every copy, duplicates included
    delivered: int  # distinct (clientId, seq) among the published
    duplicates: int  # copies beyond the first of the same (clientId, seq)
    missing: int
    lost: int
    backlog: int
    unexpected: int = 0  # copies with a (clientId, seq) never published in this run
    latency: Latency | None = None  # send -> receipt (observer) or send -> row (store)
    # the store's publish-to-store delay per second of sending (the store only: its rows
    # carry both times)
    delay: tuple[DelayPoint, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["latency"] = None if self.latency is None else self.latency.to_dict()
        data["delay"] = [point.to_dict() for point in self.delay]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Delivery:
        known = _known(cls, data)
        latency = known.get("latency")
        known["latency"] = None if latency is None else Latency.from_dict(latency)
        known["delay"] = tuple(DelayPoint.from_dict(p) for p in known.get("delay", ()))
        return cls(**known)


@dataclass(frozen=True)
class MqttResult:
    """One MQTT repetition's accounting: every message published, acknowledged, delivered.

    Covers the whole swarm (warm-up included: a message lost in warm-up is still lost).
    ``tps`` is seed 002's throughput: messages the server stored / (last row's time -
    first send), so a stalled broker lowers it as it did in the seed.
    """

    qos: int
    interval_s: float  # 0: flat out
    users: int
    published: int
    acked: int  # PUBCOMP (QoS 2) / PUBACK (QoS 1) received by the publishers
    unacked: int  # still unacknowledged after the grace at the end
    publish_errors: int = 0
    connect_failures: int = 0
    disconnects: int = 0
    late: int = 0  # paced sends more than one interval behind schedule
    pace_lag: Latency | None = None  # how late sends were against their schedule
    observer: Delivery | None = None
    store: Delivery | None = None
    tps: float | None = None
    span_s: float = 0.0  # first send to last stored row (or last delivery)
    drain_s: float = 0.0  # time waited after the swarm stopped

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("pace_lag", "observer", "store"):
            value = getattr(self, name)
            data[name] = None if value is None else value.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MqttResult:
        known = _known(cls, data)
        if known.get("pace_lag") is not None:
            known["pace_lag"] = Latency.from_dict(known["pace_lag"])
        for name in ("observer", "store"):
            if known.get(name) is not None:
                known[name] = Delivery.from_dict(known[name])
        return cls(**known)
