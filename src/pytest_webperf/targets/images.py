"""Builds catalogue images, once per content hash."""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable

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
