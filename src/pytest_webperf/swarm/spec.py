"""What the parent asks a swarm child to do (sent as JSON on its stdin)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.longlived.load import StreamLoad
from pytest_webperf.models.workload import Workload
from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.swarm.stamp import CpuProbe, probes_of
from pytest_webperf.swarm.trust.allowance import Endpoint, endpoint_of
from pytest_webperf.swarm.trust.secret import SECRET_ENV, Secret


def split_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) -> (host, port); ValueError if it is not one."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (example: 127.0.0.1:5557)")
    return host, int(port)


def on_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, or * (every interface)
        return False


@dataclass(frozen=True)
class Remote:
    """Remote generator workers: the master binds ``bind`` (HOST:PORT) and waits up to
    ``wait_s`` for ``workers`` of them (``webperf worker --master HOST:PORT``).

    ``secret`` (never sent anywhere: the swarm child gets it in its environment) is
    the one the workers must hold; without it the master listens on loopback only,
    unless ``trusted_network`` says the network is trusted."""

    workers: int
    bind: str = "127.0.0.1:5557"
    wait_s: float = 60.0
    trusted_network: bool = False
    secret: Secret | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"remote generator workers: at least one, not {self.workers}")
        split_address(self.bind)

    def unguarded(self, secret: Secret | None) -> str | None:
        """Why the master may not listen at ``bind`` with ``secret`` (one line), or None."""
        if secret is not None or self.trusted_network or on_loopback(split_address(self.bind)[0]):
            return None
        return (
            f"the swarm's master would listen at {self.bind}, beyond loopback, with no "
            f"secret, so any host could join the run: set {SECRET_ENV} or "
            "--webperf-secret-file=PATH (and the same secret for every `webperf worker`: "
            f"{SECRET_ENV} or --secret-file PATH), or --webperf-trusted-network if every "
            "host on that network is trusted"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "bind": self.bind,
            "wait_s": self.wait_s,
            "trusted_network": self.trusted_network,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Remote:
        trusted = bool(data.get("trusted_network", False))
        return cls(int(data["workers"]), str(data["bind"]), float(data["wait_s"]), trusted)


@dataclass(frozen=True)
class SwarmSpec:
    host: str  # http://127.0.0.1:PORT (https:// for a target that speaks TLS)
    users: int
    duration_s: float
    warmup_s: float = 0.0
    spawn_rate: float = 0.0  # users per second; 0: all users within about a second
    workload: Workload = field(default_factory=Workload)
    user_class: str = "fast"  # "fast", "lean", or "module:Class" (a user's own Locust User)
    timeout_s: float = 10.0  # a request unanswered for this long counts as a timeout
    interval_s: float = 1.0  # snapshot interval
    workers: int = 1  # generator processes: >1 runs a Locust master with this many workers
    cpus: tuple[int, ...] = ()  # pin generator processes here (workers: one CPU each, round robin)
    mqtt: MqttLoad | None = None  # what user_class "mqtt" publishes
    stream: StreamLoad | None = None  # what user_class "websocket" or "sse" does
    remote: Remote | None = None  # generator workers on other machines join the master
    tls_ca: str | None = None  # https: verify the certificate against this CA file (else not)
    tls_resume: bool = False  # https: a new connection resumes the last one's TLS session
    # the target's parts, whose CPU the child stamps at the measured phase's bounds
    cpu_probes: tuple[CpuProbe, ...] = ()

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError(f"a swarm needs at least one user, not {self.users}")
        if self.workers < 0 or (self.workers == 0 and self.remote is None):
            raise ValueError(f"a swarm needs at least one generator process, not {self.workers}")
        if any(cpu < 0 for cpu in self.cpus):
            raise ValueError(f"CPU numbers are >= 0, not {self.cpus}")
        if self.distributed and self.users < self.processes:
            raise ValueError(
                f"{self.users} users cannot keep {self.processes} generator "
                "workers busy: use fewer --webperf-workers (or --webperf-remote-workers)"
            )

    @property
    def remote_workers(self) -> int:
        return self.remote.workers if self.remote is not None else 0

    @property
    def distributed(self) -> bool:
        """A Locust master with worker processes (local ones, remote ones or both)."""
        return self.workers > 1 or self.remote is not None

    @property
    def local_workers(self) -> int:
        """Worker processes the master starts on this machine."""
        return self.workers if self.distributed else 0

    @property
    def processes(self) -> int:
        """Load-generating processes: local workers and remote ones (or the one local)."""
        return self.local_workers + self.remote_workers if self.distributed else 1

    def client_ids(self, index: int) -> range:
        """The MQTT client numbers (a stream's connection ids) generator process ``index``
        (0-based over local and remote workers) may use: disjoint ranges of ``users``
        each, so no two processes ever share an id, however Locust splits the users."""
        return range(1 + index * self.users, 1 + (index + 1) * self.users)

    @property
    def endpoints(self) -> list[Endpoint]:
        """Every (host, port) its users connect to: the target, an MQTT broker."""
        endpoints = [endpoint_of(self.host)]
        if self.mqtt is not None:
            endpoints.append((self.mqtt.host.lower(), self.mqtt.port))
        return endpoints

    @property
    def effective_spawn_rate(self) -> float:
        return self.spawn_rate if self.spawn_rate > 0 else float(max(self.users, 1))

    @property
    def opening_s(self) -> float:
        """Longest a stream swarm's connections may take to open before the warm-up: the
        connect gate lets ``max_connecting`` through at once (per process), each within
        the timeout; 0 for other swarms."""
        if self.stream is None:
            return 0.0
        rounds = self.users / max(1, self.stream.max_connecting) / self.processes
        return self.timeout_s * (1 + rounds)

    @property
    def ending_s(self) -> float:
        """A stream swarm's end: its drain, then every close answered in time."""
        if self.stream is None:
            return 0.0
        return self.stream.drain_s + self.stream.close_timeout_s

    @property
    def deadline_s(self) -> float:
        """Longest the child may live: spawn + warm-up + measurement + teardown."""
        spawn = self.users / self.effective_spawn_rate
        workers = 60 if self.distributed else 0  # starting them and their connections to the master
        remote = self.remote.wait_s if self.remote is not None else 0.0
        streams = self.opening_s + self.ending_s
        return (
            spawn * 3
            + self.warmup_s
            + self.duration_s
            + self.timeout_s
            + 60
            + workers
            + remote
            + streams
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "users": self.users,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "spawn_rate": self.spawn_rate,
            "workload": self.workload.to_dict(),
            "user_class": self.user_class,
            "timeout_s": self.timeout_s,
            "interval_s": self.interval_s,
            "workers": self.workers,
            "cpus": list(self.cpus),
            "mqtt": None if self.mqtt is None else self.mqtt.to_dict(),
            "stream": None if self.stream is None else self.stream.to_dict(),
            "remote": None if self.remote is None else self.remote.to_dict(),
            "tls_ca": self.tls_ca,
            "tls_resume": self.tls_resume,
            "cpu_probes": [probe.to_dict() for probe in self.cpu_probes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SwarmSpec:
        return cls(
            host=str(data["host"]),
            users=int(data["users"]),
            duration_s=float(data["duration_s"]),
            warmup_s=float(data.get("warmup_s", 0)),
            spawn_rate=float(data.get("spawn_rate", 0)),
            workload=Workload.from_dict(data.get("workload", {})),
            user_class=str(data.get("user_class", "fast")),
            timeout_s=float(data.get("timeout_s", 10)),
            interval_s=float(data.get("interval_s", 1)),
            workers=int(data.get("workers", 1)),
            cpus=tuple(int(cpu) for cpu in data.get("cpus", ())),
            mqtt=MqttLoad.from_dict(data["mqtt"]) if data.get("mqtt") else None,
            stream=StreamLoad.from_dict(data["stream"]) if data.get("stream") else None,
            remote=Remote.from_dict(data["remote"]) if data.get("remote") else None,
            tls_ca=str(data["tls_ca"]) if data.get("tls_ca") else None,
            tls_resume=bool(data.get("tls_resume", False)),
            cpu_probes=probes_of(data.get("cpu_probes", ())),
        )
