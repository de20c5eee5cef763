"""Builds catalogue images, once per content hash; and their counted layer (Valgrind on
top, once per image)."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import docker.errors

from pytest_webperf.errors import CatalogError
from pytest_webperf.targets.catalog import Catalog, ServerSpec, build_context, image_tag
from pytest_webperf.targets.engine import docker_client

Log = Callable[[str], None]
_lock = threading.Lock()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def image_exists(tag: str) -> bool:
    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build(context: bytes, tag: str, *, label: str, what: str) -> None:
    """``docker build`` of a tar ``context`` as ``tag``; a ``CatalogError`` naming ``what``
    and the tail of the build's output when it fails."""
    output: list[str] = []
    stream = docker_client().api.build(
        fileobj=io.BytesIO(context),
        custom_context=True,
        tag=tag,
        rm=True,
        forcerm=True,
        decode=True,
        labels={"webperf.server": label},
    )
    error = None
    for chunk in stream:  # read to its end, an error or not: the engine's socket is freed
        if "stream" in chunk:
            output.append(str(chunk["stream"]))
        if "error" in chunk and error is None:
            error = str(chunk["error"])
    if error is not None:
        tail = "".join(output)[-4000:]
        raise CatalogError(f"building {what} failed: {error}\n--- build output (tail) ---\n{tail}")


def ensure_image(spec: ServerSpec, log: Log = _stderr) -> str:
    """The image tag for ``spec``, built first when no image has that content hash."""
    tag = image_tag(spec)
    with _lock:
        if image_exists(tag):
            return tag
        log(f"webperf: building image {tag} from {spec.directory}")
        started = time.monotonic()
        build(
            build_context(spec),
            tag,
            label=spec.name,
            what=f"{spec.name} ({spec.directory / 'Dockerfile'})",
        )
        log(f"webperf: built {tag} in {time.monotonic() - started:.0f}s")
        return tag


def ensure_images(catalog: Catalog, name: str, log: Log = _stderr) -> dict[str, str]:
    """Images for ``name`` and everything it depends on: server name -> tag."""
    return {
        spec.name: ensure_image(catalog.image_spec(spec), log) for spec in catalog.closure(name)
    }


# The counted layer: Valgrind on top of a server's image (Debian's package, as the
# catalogue's images are Debian bookworm), the image's user restored; with the debug
# symbols a server's [count] table asks for, from Debian's debug archive (Valgrind reads
# them from /usr/lib/debug by build id: the libraries' code named instead of held by its
# callers). Tagged by the base image's id and this text: built once per server image.
COUNTED_REPO = "webperf-counted"
COUNTED_LAYER = """FROM {base}
USER root
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends valgrind \\
 && rm -rf /var/lib/apt/lists/*
{debug}{user}"""
DEBUG_ARCHIVE = "http://deb.debian.org/debian-debug"
DEBUG_LAYER = """RUN . /etc/os-release \\
 && echo "deb {archive} $VERSION_CODENAME-debug main" \\
    > /etc/apt/sources.list.d/webperf-debug.list \\
 && apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {packages} \\
 && rm -rf /var/lib/apt/lists/*
"""


def image_config(tag: str) -> dict[str, Any]:
    """An image's ``Config`` (Entrypoint, Cmd, User, ...)."""
    config = docker_client().images.get(tag).attrs.get("Config") or {}
    return dict(config)


def counted_layer(base: str, user: str, debug_symbols: Sequence[str] = ()) -> str:
    """The counted image's Dockerfile: Valgrind on ``base``, the ``-dbgsym`` packages of
    ``debug_symbols``, ``user`` restored."""
    packages = " ".join(f"{p}-dbgsym" for p in sorted(set(debug_symbols)))
    debug = DEBUG_LAYER.format(archive=DEBUG_ARCHIVE, packages=packages) if packages else ""
    return COUNTED_LAYER.format(base=base, debug=debug, user=f"USER {user}\n" if user else "")


def counted_tag(base: str, debug_symbols: Sequence[str] = ()) -> tuple[str, str]:
    """The counted image's tag for the image ``base``, and its Dockerfile."""
    found = docker_client().images.get(base)
    user = str((found.attrs.get("Config") or {}).get("User") or "")
    text = counted_layer(base, user, debug_symbols)
    digest = hashlib.sha256(f"{found.id}\0{text}".encode()).hexdigest()[:16]
    return f"{COUNTED_REPO}/{name_of(base)}:{digest}", text


def ensure_counted_image(base: str, debug_symbols: Sequence[str] = (), log: Log = _stderr) -> str:
    """``base`` with Valgrind (and ``debug_symbols``' -dbgsym packages) installed on top
    (built once per base image)."""
    tag, dockerfile = counted_tag(base, debug_symbols)
    with _lock:
        if image_exists(tag):
            return tag
        log(f"webperf: building {tag}: Valgrind on top of {base} (once per image)")
        started = time.monotonic()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            data = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        try:
            build(buffer.getvalue(), tag, label=name_of(base), what=f"the counted layer of {base}")
        except CatalogError as exc:
            debug = (
                f"; [count] debug_symbols installs their -dbgsym from {DEBUG_ARCHIVE}, which "
                "must answer from here (else leave them out: their code is shown under its "
                "named callers)"
                if debug_symbols
                else ""
            )
            raise CatalogError(
                f"{exc}\ncount=True installs Valgrind in the server's image with Debian's "
                f"apt-get: an image without it needs valgrind installed in its Dockerfile{debug}"
            ) from None
        log(f"webperf: built {tag} in {time.monotonic() - started:.0f}s")
        return tag


def name_of(tag: str) -> str:
    return tag.split(":", maxsplit=1)[0].rsplit("/", 1)[-1]
