"""What an MQTT swarm does (sent to the swarm child inside ``SwarmSpec.mqtt``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class MqttLoad:
    """Each user is one MQTT client publishing seed 002's telemetry to ``<topic>/<clientId>``.

    ``interval_s`` > 0 paces every user at one message per interval (seed 002: 500 ms);
    0 is flat out: each user publishes its next message as soon as the last one is
    PUBCOMP-acknowledged (QoS 2) or PUBACKed (QoS 1), or sent (QoS 0).
    """

    port: int
    host: str = "127.0.0.1"
    topic: str = "telemetry"
    qos: int = 2
    interval_s: float = 0.5
    keepalive_s: int = 60
    clean_session: bool = True  # the publishers' sessions; the subscribers' are persistent
    client_prefix: str = "webperf"  # MQTT client ids are <prefix>-<clientId>
    report_path: str = ""  # where the child writes its per-client accounting at the end
    grace_s: float = 5.0  # at the end, how long to wait for outstanding acknowledgements
    window: int = 1  # flat out, the native user: messages in flight per client (paho: 1)
    sources: tuple[str, ...] = ()  # the native user: local IPv4 addresses to connect from
    tls: bool = False  # mqtts://: TLS to the broker (its certificate verified against tls_ca)
    tls_ca: str | None = None
    websocket: str = ""  # ws:// (wss:// with tls): the path of the broker's WebSocket, else TCP
    protocol: int = 4  # MQTT's protocol level: 4 is 3.1.1, 5 is 5.0

    def __post_init__(self) -> None:
        if self.qos not in (0, 1, 2):
            raise ValueError(f"qos must be 0, 1 or 2, not {self.qos!r}")
        if self.interval_s < 0:
            raise ValueError(f"interval must not be negative, not {self.interval_s!r}")
        if self.protocol not in (4, 5):
            raise ValueError(
                f"protocol must be 4 (MQTT 3.1.1) or 5 (MQTT 5.0), not {self.protocol!r}"
            )
        if not 1 <= self.window <= 65535:
            raise ValueError(f"window must be 1 to 65535 messages, not {self.window!r}")
        object.__setattr__(self, "sources", tuple(self.sources))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MqttLoad:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
