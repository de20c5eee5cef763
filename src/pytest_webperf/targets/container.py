"""Catalogue servers in containers: host networking, a free loopback port, health-checked.

Ryuk (testcontainers' reaper) is off: its image cannot be pulled offline. Every
container carries labels naming this process (pid + start time) and session, so
that the process removes its own at exit, and any later process removes the
ones whose owner is gone (a killed run).
"""

from __future__ import annotations

import os
import resource
import signal
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

import docker.errors
import psutil
from docker.types import Ulimit
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.targets.base import (
    Probe,
    free_port,
    health_failure,
    wait_healthy,
)
from pytest_webperf.targets.catalog import Catalog, CountStart, ServerSpec
from pytest_webperf.targets.engine import docker_client, run_in
from pytest_webperf.targets.http2 import probe_health
from pytest_webperf.targets.images import ensure_counted_image, ensure_image, image_config
from pytest_webperf.targets.runtime import PINNINGS, Pinning, runtime_of
from pytest_webperf.targets.wrap import MOUNT, Wrap

testcontainers_config.ryuk_disabled = True

MANAGED = "webperf.managed"
SESSION = "webperf.session"
OWNER = "webperf.owner"
SESSION_ID = uuid.uuid4().hex[:12]
NOFILE_WANTED = 1048576  # C10K and beyond: the server's own limit is not what we measure


def nofile_limit() -> int:
    """The open-files limit to give containers: as high as the engine may grant.

    A container cannot exceed the hard limit of the daemon that starts it (runc
    fails with "error setting rlimit type 7" otherwise), and without
    CAP_SYS_RESOURCE nobody can raise it; our own hard limit stands in for the
    daemon's when its /proc entry is unreadable."""
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == "dockerd":
            try:
                return min(NOFILE_WANTED, proc.rlimit(psutil.RLIMIT_NOFILE)[1])
            except psutil.Error:
                break
    return min(NOFILE_WANTED, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def _owner() -> str:
    return f"{os.getpid()}:{psutil.Process().create_time():.2f}"


def _owner_alive(owner: str) -> bool:
    try:
        pid, started = owner.split(":")
        return f"{psutil.Process(int(pid)).create_time():.2f}" == started
    except (ValueError, psutil.Error):
        return False


def _listed(label: str) -> list[dict[str, Any]]:
    """The containers carrying ``label``, as the engine lists them (id, names, labels):
    not inspected one by one, so one another process removes meanwhile is not an error
    (docker-py's ``containers.list`` inspects each, and raised NotFound for a container
    a parallel pytest worker had just removed)."""
    found: list[dict[str, Any]] = docker_client().api.containers(all=True, filters={"label": label})
    return found


def sweep_stale_containers() -> list[str]:
    """Remove containers whose owning pytest process is gone; their names (one another
    process removed, or is removing, meanwhile counts as removed)."""
    removed = []
    for container in _listed(MANAGED):
        if not _owner_alive((container.get("Labels") or {}).get(OWNER, "")):
            try:
                docker_client().api.remove_container(container["Id"], force=True)
            except docker.errors.NotFound:
                pass  # another process removed it meanwhile
            except docker.errors.APIError as exc:  # another process is removing it
                if exc.status_code != 409:
                    raise
            names = container.get("Names") or [container["Id"][:12]]
            removed.append(str(names[0]).lstrip("/"))
    return removed


_swept: list[bool] = []


def _sweep_once() -> None:
    """Sweep what killed runs left, the first time this process starts a container."""
    if not _swept:
        _swept.append(True)
        sweep_stale_containers()


def remove_session_containers() -> int:
    """Remove every container this process started (also ones still being created)."""
    containers = _listed(f"{SESSION}={SESSION_ID}")
    for container in containers:
        with suppress(docker.errors.NotFound):
            docker_client().api.remove_container(container["Id"], force=True)
    return len(containers)


@dataclass(frozen=True)
class Limits:
    """CPU and memory limits of a target container (None: unlimited)."""

    cpus: float | None = None
    memory: str | None = None
    cpuset: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "memory": self.memory, "cpuset": self.cpuset}

    def docker_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.cpus:
            kwargs["nano_cpus"] = int(self.cpus * 1e9)
        if self.memory:
            kwargs["mem_limit"] = self.memory
        if self.cpuset:
            kwargs["cpuset_cpus"] = self.cpuset
        return kwargs


@dataclass
class ServerContainer:
    """One running container of one catalogue server."""

    spec: ServerSpec
    part: str
    image: str
    port: int
    env: dict[str, str]
    limits: Limits
    host: str = "127.0.0.1"  # where it listens
    container: DockerContainer | None = field(default=None, repr=False)
    wrap: Wrap | None = None  # the tool it starts under (a counted measurement's)

    def start(self) -> None:
        image, env = self.image, self.env
        extra: dict[str, Any] = {}
        if self.wrap is not None:
            image, extra = self._wrapped(self.wrap)
            env = self.wrap.pinning.applied(self.env)
        container = DockerContainer(image).with_kwargs(
            network_mode="host",
            labels={MANAGED: "1", SESSION: SESSION_ID, OWNER: _owner(), "webperf.part": self.part},
            ulimits=[Ulimit(name="nofile", soft=nofile_limit(), hard=nofile_limit())],
            **self.limits.docker_kwargs(),
            **extra,
        )
        container.with_name(f"webperf-{self.part}-{self.port}-{SESSION_ID}")
        if self.wrap is not None and self.wrap.directory is not None:
            container.with_volume_mapping(self.wrap.directory, MOUNT, "rw")
        for key, value in env.items():
            container.with_env(key, value)
        self.container = container
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise TargetError(f"{self.part}: the engine refused to start it: {exc}") from None
        self._wait_healthy()

    def command(self) -> list[str]:
        """What it runs: its counted start's command, else the image's entrypoint and
        command."""
        count = self.spec.count
        if count is not None and count.command:
            return list(count.command)
        config = image_config(self.image)
        return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]

    def _wrapped(self, wrap: Wrap) -> tuple[str, dict[str, Any]]:
        """The image and the engine's options of a start under ``wrap``: the counted
        image (Valgrind on top) when it needs valgrind, the command wrapped, docker's init
        as PID 1 (vgdb misbehaves with valgrind as PID 1), the wrap's directory mounted
        and the right to ptrace (vgdb wakes a process blocked in a system call). ASLR stays
        on: the engine's seccomp profile refuses ``setarch -R``'s personality."""
        debug = self.spec.count.debug_symbols if self.spec.count is not None else ()
        image = ensure_counted_image(self.image, debug) if wrap.valgrind else self.image
        extra: dict[str, Any] = {"entrypoint": wrap.argv(self.command(), MOUNT, aslr=False)}
        if wrap.valgrind:
            extra.update(init=True, cap_add=["SYS_PTRACE"])
        return image, extra

    def beside(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        """``argv`` run inside the container (``docker exec``), killed past ``timeout``."""
        return run_in(self._wrapped_container().id, argv, timeout)

    def _wait_healthy(self) -> None:
        spec = self.spec
        slowdown = self.wrap.slowdown if self.wrap is not None else 1.0
        spec = replace(spec, startup_timeout=spec.startup_timeout * slowdown)

        def probe() -> Probe:
            return probe_health(
                self.host,
                self.port,
                spec.health,
                tls=spec.tls,
                tls_option=f"tls = true in {spec.directory / 'server.toml'}",
            )

        answer = wait_healthy(probe, self.check_alive, spec.startup_timeout)
        if not answer.ready:
            where = f"{spec.health} on {self.host}:{self.port}"
            fix = f"serve it, or set health = ... in {spec.directory / 'server.toml'}"
            raise TargetError(
                health_failure(self.part, where, answer, spec.startup_timeout, fix), self.logs()
            )

    def _wrapped_container(self) -> Any:
        if self.container is None:
            raise TargetError(f"{self.part} was never started")
        return self.container.get_wrapped_container()

    def check_alive(self) -> None:
        wrapped = self._wrapped_container()
        try:
            wrapped.reload()
        except docker.errors.NotFound:
            raise TargetError(f"{self.part}: its container was removed from outside") from None
        state = wrapped.attrs["State"]
        if not state.get("Running"):
            raise TargetError(f"{self.part} is not running ({stopped(state)})", self.logs())

    def pid(self) -> int:
        """The container's init process on this host (attrs read at create time say 0)."""
        wrapped = self._wrapped_container()
        if not wrapped.attrs["State"].get("Pid"):
            wrapped.reload()
        pid = int(wrapped.attrs["State"]["Pid"])
        if pid <= 0:
            raise TargetError(f"{self.part} has no running process", self.logs())
        return pid

    def logs(self) -> str:
        try:
            logs = self._wrapped_container().logs(stdout=True, stderr=True)
            return str(logs.decode(errors="replace"))
        except (docker.errors.APIError, TargetError):
            return ""

    def stop(self) -> None:
        if self.container is not None:
            with suppress(docker.errors.NotFound):
                self.container.stop()


class ContainerTarget:
    """A catalogue server and everything it depends on, each in its own container."""

    def __init__(
        self,
        catalog: Catalog,
        name: str,
        *,
        limits: Limits | None = None,
        env: Mapping[str, str] | None = None,
        bind: str | None = None,
    ) -> None:
        self.catalog = catalog
        self.spec = catalog.get(name)
        self.name = name
        # --webperf-target-bind: the server listens there, and so does the broker of an MQTT
        # composite (the load goes to it); every other dependency stays on loopback.
        self.bind = bind
        self.exposed = {name} | ({self.spec.mqtt_broker} if self.spec.mqtt_broker else set())
        for server in sorted(self.exposed) if bind is not None else ():
            if catalog.get(server).bind_env is None:
                raise OptionError(
                    f"--webperf-target-bind={bind}: {server} listens on loopback only (its "
                    "server.toml has no bind_env naming the variable that takes its address)"
                )
        self.host = bind or "127.0.0.1"
        self.port = 0
        self.limits = limits or Limits(cpus=self.spec.cpus, memory=self.spec.memory)
        self.part_env = self._split_env(env or {})
        self.containers: list[ServerContainer] = []
        self._stack = ExitStack()
        self.wrap: Wrap | None = None  # the tool the server itself starts under (``relaunch``)

    @property
    def url(self) -> str:
        return f"{'https' if self.spec.tls else 'http'}://{self.host}:{self.port}"

    def __enter__(self) -> ContainerTarget:
        docker_client()  # a clear error first when no engine answers
        _sweep_once()
        try:
            self.port = self._start(self.spec, self.name, self.limits, self.part_env[self.name])
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def restart(self) -> None:
        """Remove every container and start them afresh (new process instances, new
        ports): results then average over instances (``--webperf-restart-every``)."""
        self.relaunch(None)

    def relaunch(self, wrap: Wrap | None) -> None:
        """Every container afresh, the server itself under ``wrap`` (None: as shipped);
        its dependencies as shipped."""
        self.wrap = wrap
        self._stack.close()
        self.containers = []
        try:
            self.port = self._start(self.spec, self.name, self.limits, self.part_env[self.name])
        except BaseException:
            self._stack.close()
            raise

    def _start(self, spec: ServerSpec, part: str, limits: Limits, extra: Mapping[str, str]) -> int:
        """Start ``spec`` after its dependencies; its port."""
        env = {**spec.env, **extra}
        for index, dep in enumerate(spec.depends):
            dep_spec = self.catalog.get(dep.server)
            dep_part = self._part_name(dep.server, index)
            dep_limits = Limits(cpus=dep_spec.cpus, memory=dep_spec.memory, cpuset=limits.cpuset)
            env[dep.port_env] = str(
                self._start(dep_spec, dep_part, dep_limits, self.part_env.get(dep.server, {}))
            )
        port = free_port()
        env[spec.port_env] = str(port)
        for name in spec.extra_ports:
            env[name] = str(free_port())
        host = "127.0.0.1"
        if self.bind is not None and spec.name in self.exposed and spec.bind_env is not None:
            env[spec.bind_env] = host = self.bind
        server = ServerContainer(
            spec, part, ensure_image(self.catalog.image_spec(spec)), port, env, limits, host
        )
        if part == self.name:
            server.wrap = self.wrap
        self._stack.callback(server.stop)
        server.start()
        self.containers.append(server)
        return port

    def _split_env(self, env: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """``KEY`` goes to the server itself, ``part.KEY`` to the part (a dependency) named
        so: ``{"mosquitto.MOSQUITTO_MAX_INFLIGHT_MESSAGES": "20"}`` for a composite."""
        names = {spec.name for spec in self.catalog.closure(self.name)}
        split: dict[str, dict[str, str]] = {self.name: {}}
        for key, value in env.items():
            part, dot, name = key.rpartition(".")
            if dot and part not in names:
                raise OptionError(
                    f"env {key!r} for {self.name}: no part {part!r} (its parts: "
                    f"{', '.join(sorted(names))})"
                )
            split.setdefault(part if dot else self.name, {})[name] = str(value)
        return split

    def _part_name(self, server: str, index: int) -> str:
        taken = {c.part for c in self.containers}
        return server if server not in taken else f"{server}-{index + 1}"

    def parts(self) -> Mapping[str, int]:
        return {c.part: c.pid() for c in self.containers}

    def _server(self) -> ServerContainer:
        for server in self.containers:
            if server.part == self.name:
                return server
        raise TargetError(f"{self.name} is not running")

    def beside(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        """``argv`` run in the server's container."""
        return self._server().beside(argv, timeout)

    def seen(self, directory: str) -> str:
        return MOUNT

    def pinning(self) -> Pinning:
        """Its ``[count]`` table's: a refusal, the runtime named there or read from the
        command's program name, with the table's environment on top."""
        count = self.spec.count or CountStart()
        where = self.spec.directory / "server.toml"
        if count.refuse:
            return Pinning("native", refused=f"{count.refuse} ([count] in {where})")
        runtime = count.runtime or runtime_of(self._server().command(), look=False)
        base = PINNINGS[runtime]
        note = base.note + (f"; {where} [count] env " if count.env else "")
        note += " ".join(f"{k}={v}" for k, v in count.env.items())
        return replace(base, env={**base.env, **count.env}, note=note)

    def check_alive(self) -> None:
        for server in self.containers:
            server.check_alive()

    def logs(self) -> str:
        return "\n".join(f"=== {c.part} ===\n{c.logs()}" for c in self.containers)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "container",
            "url": self.url,
            "server": self.name,
            "limits": self.limits.to_dict(),
            "parts": {c.part: {"image": c.image, "port": c.port} for c in self.containers},
        }


def stopped(state: Mapping[str, Any]) -> str:
    """Why a container stopped, from its ``State``: OOM-killed, a signal, or its exit code."""
    code = state.get("ExitCode")
    status = f"status {state.get('Status')}"
    if state.get("OOMKilled"):
        return f"OOM-killed: it reached its memory limit; {status}, exit code {code}"
    if isinstance(code, int) and code > 128:  # the shell's convention: 128 + signal
        with suppress(ValueError):
            return f"killed by {signal.Signals(code - 128).name}; {status}, exit code {code}"
    return f"{status}, exit code {code}"


@contextmanager
def start_target(catalog: Catalog, name: str, **kwargs: Any) -> Iterator[ContainerTarget]:
    """``with start_target(catalog, "nginx") as target:`` — up, healthy, removed on exit."""
    with ContainerTarget(catalog, name, **kwargs) as target:
        yield target
