"""The server catalogue: ``servers/<name>/server.toml`` + Dockerfile + app files.

An image is built from the server's directory plus the shared workload assets
(``assets/`` in the build context) and any shared directories it names in
``include`` (``include/<dir>/``), and tagged ``webperf/<name>:<hash>``, the
hash covering every file of the context, so an unchanged server is never
rebuilt.

Where the built-in catalogue is: a wheel ships the repository's ``servers/`` as
``pytest_webperf/servers/`` (copied in by ``setup.py``'s build step); a source
checkout or an editable install uses the repository's own ``servers/``. Either
way the files are the same, so are the content hashes, so an image is built once
whichever way its server was found. Users' directories come after the built-in
one, so their ``servers/<name>`` replaces a shipped entry of the same name.
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.assets import workload_files
from pytest_webperf.targets.runtime import PINNINGS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KINDS = ("http", "mqtt", "tcp", "grpc")  # grpc: loaded by webperf.grpc, health "grpc"
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PACKAGED_DIR = Path(__file__).resolve().parents[1] / "servers"  # installed from a wheel
_CHECKOUT_DIR = Path(__file__).resolve().parents[3] / "servers"  # src/ layout: the repository's
BUILTIN_DIR = _PACKAGED_DIR if _PACKAGED_DIR.is_dir() else _CHECKOUT_DIR
DEFAULT_HEALTH = {"http": "/health", "grpc": "grpc"}
# what a client speaks to a server (``protocols`` in server.toml), and the kinds of
# server that may say each: "http1" HTTP/1.1, "http2" HTTP/2 (h2 by ALPN with tls =
# true, h2c with prior knowledge without), "grpc" unary gRPC, "mqtt" MQTT (over TCP, TLS
# or WebSocket, as its [mqtt] table says), "websocket" and "sse" the [streams] routes
PROTOCOLS = {
    "http1": ("http",),
    "http2": ("http", "grpc"),
    "grpc": ("grpc",),
    "mqtt": ("mqtt", "http"),
    "websocket": ("http",),
    "sse": ("http",),
}
# read by the modules that use them
OWNED_ELSEWHERE = ("telemetry_store", "mqtt", "settings", "streams")


@dataclass(frozen=True)
class Dependency:
    """Another catalogue server this one needs, and the env var that tells it where."""

    server: str
    port_env: str


@dataclass(frozen=True)
class CountStart:
    """How a server starts for a counted measurement (``[count]`` in its server.toml):
    its runtime (else read from the image's command), a command of its own (one process
    that valgrind can follow: nginx without its master), environment added, or why it
    cannot be counted."""

    runtime: str | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    refuse: str | None = None
    # Debian packages whose -dbgsym the counted image installs (their code named, not held)
    debug_symbols: tuple[str, ...] = ()


COUNT_KEYS = ("runtime", "command", "env", "refuse", "debug_symbols")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def _count(raw: object, path: Path) -> CountStart | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not set(raw) <= set(COUNT_KEYS):
        unknown = sorted(set(raw) - set(COUNT_KEYS)) if isinstance(raw, dict) else raw
        raise CatalogError(f"{path}: [count] takes {', '.join(COUNT_KEYS)}, not {unknown!r}")
    runtime = raw.get("runtime")
    if runtime is not None and runtime not in PINNINGS:
        raise CatalogError(f"{path}: [count] runtime = {runtime!r}: one of {', '.join(PINNINGS)}")
    env = raw.get("env", {})
    if not isinstance(env, dict):
        raise CatalogError(f"{path}: [count] env must be a table of strings")
    refuse = raw.get("refuse")
    if refuse is not None and (not isinstance(refuse, str) or not refuse.strip()):
        raise CatalogError(f"{path}: [count] refuse is one line saying why it is not counted")
    command = raw.get("command")
    debug = _str_tuple(raw.get("debug_symbols", []), "count.debug_symbols", path)
    wrong = [p for p in debug if not _PACKAGE.match(p)]
    if wrong:
        raise CatalogError(
            f"{path}: [count] debug_symbols = {wrong!r}: Debian package names (zlib1g), "
            "whose -dbgsym the counted image installs"
        )
    return CountStart(
        runtime=runtime,
        command=None if command is None else _str_tuple(command, "count.command", path),
        env={str(k): str(v) for k, v in env.items()},
        refuse=refuse,
        debug_symbols=debug,
    )


@dataclass(frozen=True)
class ServerSpec:
    name: str
    directory: Path
    kind: str = "http"
    description: str = ""
    port_env: str = "PORT"
    bind_env: str | None = None  # where it takes its listen address (else loopback only)
    extra_ports: tuple[str, ...] = ()
    health: str = "/health"
    startup_timeout: float = 120.0
    tls: bool = False  # it speaks HTTPS (its own certificate, not verified by default)
    routes: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    depends: tuple[Dependency, ...] = ()
    cpus: float | None = None
    memory: str | None = None
    notes: str = ""
    image_from: str | None = None  # reuse another catalogue server's image (e.g. "go")
    include: tuple[Path, ...] = ()  # shared directories added to the build context
    # paths (from its directory) that also decide whether it changed since an A/B base,
    # beside its image's build context: what the image does not hold but the run uses
    watch: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)  # keys other modules own (mqtt, ...)
    count: CountStart | None = None  # its counted start ([count]), None: the image's command
    # what it is loaded in (``PROTOCOLS``), the first the one a suite loads it with
    protocols: tuple[str, ...] = ()

    @property
    def image_repo(self) -> str:
        return f"webperf/{self.name}"

    @property
    def mqtt_broker(self) -> str | None:
        """The part an MQTT load connects to: the server itself (``kind = "mqtt"``), the
        one its ``[mqtt]`` table names as ``broker``, or None (not an MQTT target)."""
        if self.kind == "mqtt":
            return self.name
        settings = self.extra.get("mqtt")
        broker = settings.get("broker") if isinstance(settings, dict) else None
        return str(broker) if broker else None


def _str_tuple(raw: object, key: str, path: Path) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise CatalogError(f"{path}: '{key}' must be a list of strings")
    return tuple(raw)


def _dependencies(raw: object, path: Path) -> tuple[Dependency, ...]:
    if not isinstance(raw, list):
        raise CatalogError(f"{path}: 'depends' must be an array of tables ([[depends]])")
    deps = []
    for entry in raw:
        if not isinstance(entry, dict) or set(entry) != {"server", "port_env"}:
            raise CatalogError(f"{path}: each [[depends]] needs exactly 'server' and 'port_env'")
        deps.append(Dependency(str(entry["server"]), str(entry["port_env"])))
    return tuple(deps)


def _includes(raw: object, directory: Path, path: Path) -> tuple[Path, ...]:
    """Shared directories (relative to the server's), kept inside the catalogue."""
    names = _str_tuple(raw, "include", path)
    base = directory.resolve().parent
    found = []
    for name in names:
        target = (directory / name).resolve()
        if not target.is_dir() or not target.is_relative_to(base):
            raise CatalogError(
                f"{path}: include {name!r} is not a directory of this catalogue ({base})"
            )
        found.append(target)
    return tuple(found)


def default_protocols(kind: str, extra: dict[str, object]) -> tuple[str, ...]:
    """What a server of ``kind`` speaks when its server.toml does not say: HTTP/1.1 for
    an HTTP server (with WebSocket and SSE where its [streams] table names their routes,
    MQTT where an [mqtt] table makes it a composite), gRPC, MQTT, nothing for a store."""
    if kind == "grpc":
        return ("grpc",)
    if kind == "mqtt":
        return ("mqtt",)
    if kind != "http":
        return ()
    streams = extra.get("streams")
    routes = streams if isinstance(streams, dict) else {}
    found = ["http1"]
    if "websocket" in routes:
        found.append("websocket")
    if "events" in routes:
        found.append("sse")
    if "mqtt" in extra:
        found.append("mqtt")
    return tuple(found)


def _protocols(raw: object, kind: str, extra: dict[str, object], path: Path) -> tuple[str, ...]:
    if raw is None:
        return default_protocols(kind, extra)
    names = _str_tuple(raw, "protocols", path)
    for name in names:
        if name not in PROTOCOLS:
            raise CatalogError(f"{path}: protocols: {name!r} is not one of {', '.join(PROTOCOLS)}")
        if kind not in PROTOCOLS[name]:
            raise CatalogError(f'{path}: protocols: {name!r} is not spoken by kind = "{kind}"')
    if not names:
        raise CatalogError(f"{path}: protocols: name at least one of {', '.join(PROTOCOLS)}")
    return names


def _tls(raw: object, kind: str, path: Path) -> bool:
    if not isinstance(raw, bool):
        raise CatalogError(f"{path}: 'tls' must be true or false, not {raw!r}")
    if raw and kind not in ("http", "mqtt", "grpc"):  # https://, mqtts://
        raise CatalogError(
            f'{path}: \'tls = true\' is for kind = "http", "mqtt" or "grpc" servers only'
        )
    return raw


def load_spec(directory: Path) -> ServerSpec:
    path = directory / "server.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from None
    name = str(data.pop("name", directory.name))
    if not NAME.match(name):
        raise CatalogError(f"{path}: bad server name {name!r} (lower case, digits, . _ -)")
    kind = str(data.pop("kind", "http"))
    if kind not in KINDS:
        raise CatalogError(f"{path}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    image_from = data.pop("image_from", None)
    if image_from is None and not (directory / "Dockerfile").is_file():
        raise CatalogError(f'{directory}: no Dockerfile (or image_from = "<server>")')
    env = data.pop("env", {})
    if not isinstance(env, dict):
        raise CatalogError(f"{path}: [env] must be a table of strings")
    try:
        spec = ServerSpec(
            name=name,
            directory=directory,
            kind=kind,
            description=str(data.pop("description", "")),
            port_env=str(data.pop("port_env", "PORT")),
            bind_env=str(data.pop("bind_env")) if "bind_env" in data else None,
            extra_ports=_str_tuple(data.pop("extra_ports", []), "extra_ports", path),
            health=str(data.pop("health", DEFAULT_HEALTH.get(kind, "tcp"))),
            startup_timeout=float(data.pop("startup_timeout", 120.0)),
            tls=_tls(data.pop("tls", False), kind, path),
            routes=_str_tuple(data.pop("routes", []), "routes", path),
            env={str(k): str(v) for k, v in env.items()},
            depends=_dependencies(data.pop("depends", []), path),
            cpus=None if "cpus" not in data else float(data.pop("cpus")),
            memory=None if "memory" not in data else str(data.pop("memory")),
            notes=str(data.pop("notes", "")),
            image_from=None if image_from is None else str(image_from),
            include=_includes(data.pop("include", []), directory, path),
            watch=_str_tuple(data.pop("watch", []), "watch", path),
            extra=(extra := {k: data.pop(k) for k in list(data) if k in OWNED_ELSEWHERE}),
            count=_count(data.pop("count", None), path),
            protocols=_protocols(data.pop("protocols", None), kind, extra, path),
        )
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"{path}: {exc}") from None
    for key in data:  # catch typos
        if not key.startswith("x-"):
            raise CatalogError(f"{path}: unknown key {key!r}")
    return spec


class Catalog:
    """Every server found in the given directories (later directories win)."""

    def __init__(self, directories: Iterable[Path]) -> None:
        self.directories = tuple(directories)
        self._specs: dict[str, ServerSpec] = {}
        self._shadowed: dict[str, list[ServerSpec]] = {}
        for base in self.directories:
            if not base.is_dir():
                raise CatalogError(f"server catalogue directory {base} does not exist")
            for entry in sorted(base.iterdir()):
                if (entry / "server.toml").is_file():
                    spec = load_spec(entry)
                    if spec.name in self._specs:
                        self._shadowed.setdefault(spec.name, []).append(self._specs[spec.name])
                    self._specs[spec.name] = spec

    def __iter__(self) -> Iterator[ServerSpec]:
        return iter(self._specs.values())

    def names(self) -> list[str]:
        return sorted(self._specs)

    def shadowed(self, name: str) -> tuple[ServerSpec, ...]:
        """Entries of the same name that ``name``'s entry replaces, the first found first."""
        return tuple(self._shadowed.get(name, ()))

    def source(self, name: str) -> str:
        """Where ``name``'s entry came from, and what it replaces: for listings."""
        where = self.label(self.get(name).directory.parent)
        replaced = [self.label(spec.directory.parent) for spec in self.shadowed(name)]
        return f"{where} (replaces {', '.join(replaced)})" if replaced else where

    @staticmethod
    def label(directory: Path) -> str:
        """``built-in``, a path relative to the working directory, or an absolute one."""
        if directory.resolve() == BUILTIN_DIR:
            return "built-in"
        cwd = Path.cwd()
        return str(directory.relative_to(cwd)) if directory.is_relative_to(cwd) else str(directory)

    def get(self, name: str) -> ServerSpec:
        try:
            return self._specs[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            dirs = ", ".join(str(d) for d in self.directories)
            where = f"searched {dirs}" if dirs else "no catalogue directory was found"
            raise CatalogError(
                f"no server {name!r} in the catalogue ({where}); known: {known}. "
                "Add servers/<name>/server.toml, or name the directory "
                "(pytest --webperf-servers=DIR, webperf --servers DIR)."
            ) from None

    def image_spec(self, spec: ServerSpec) -> ServerSpec:
        """The spec whose directory builds ``spec``'s image."""
        seen = {spec.name}
        while spec.image_from is not None:
            spec = self.get(spec.image_from)
            if spec.name in seen:
                raise CatalogError(f"image_from cycle through {spec.name}")
            seen.add(spec.name)
        return spec

    def closure(self, name: str) -> list[ServerSpec]:
        """The server and everything it depends on, dependencies first."""
        order: list[ServerSpec] = []

        def visit(spec: ServerSpec, path: tuple[str, ...]) -> None:
            if spec.name in path:
                raise CatalogError(f"dependency cycle: {' -> '.join((*path, spec.name))}")
            if spec.image_from is not None:
                visit(self.get(spec.image_from), (*path, spec.name))
            for dep in spec.depends:
                visit(self.get(dep.server), (*path, spec.name))
            if spec not in order:
                order.append(spec)

        visit(self.get(name), ())
        return order


def default_directories(extra: Sequence[Path] = ()) -> list[Path]:
    dirs = [BUILTIN_DIR] if BUILTIN_DIR.is_dir() else []
    return [*dirs, *extra]


def _mode(path: Path) -> int:
    """0o755 or 0o644, as git records it: the umask of whoever checked out or installed
    the files must not change the image's hash."""
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def _context_files(spec: ServerSpec) -> list[tuple[str, bytes, int]]:
    """(archive name, content, mode) of the build context, in a stable order."""
    files = []
    for path in sorted(spec.directory.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(spec.directory).as_posix()
            files.append((rel, path.read_bytes(), _mode(path)))
    for shared in spec.include:  # include/<its name>/...
        for path in sorted(shared.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(shared).as_posix()
                files.append((f"include/{shared.name}/{rel}", path.read_bytes(), 0o644))
    files += [(f"assets/{n}", data, 0o644) for n, data in sorted(workload_files().items())]
    return files


def context_hash(spec: ServerSpec) -> str:
    digest = hashlib.sha256()
    for name, data, mode in _context_files(spec):
        digest.update(f"{name}\0{mode}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def image_tag(spec: ServerSpec) -> str:
    return f"{spec.image_repo}:{context_hash(spec)}"


def build_context(spec: ServerSpec) -> bytes:
    """The build context as a tar archive (server directory + assets/)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, mode in _context_files(spec):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
